#!/usr/bin/env bash
# Installs what `klasy lab` needs on the host: QEMU (TCG), a static
# busybox for the guest, and make/gcc/kmod for building test modules
# against the lab kernel's headers. The kernel itself comes from
# scripts/fetch-debian-kernel.sh (make debian-kernel).
source "$(dirname "$0")/lib.sh"
need_pkgs qemu-system-x86 busybox-static make gcc kmod
