# The lab: Debian's or our own kernel under QEMU with the klasy agent in a
# busybox initramfs (package lab, klasy lab).
#
#   make lab-setup    QEMU, busybox-static, kbuild tools; Debian's kernel
#   make lab-guest    the static klasy binary the guest runs as its agent
#                     ($KLASY_CACHE/lab/klasy), for a dynamically linked
#                     bin/klasy
#   make lab-kernel   the `built` flavor: linux-source-6.1 + the klasy GCC
#                     plugin, cached by source/config/plugin (6-15 min cold)
#   make lab-kernel-debug
#                     the `debug` flavor: the built kernel with lockdep,
#                     KASAN and atomic-sleep checks, cached the same way
.PHONY: lab-setup lab-guest lab-kernel lab-kernel-debug
lab-setup: debian-kernel
	./scripts/lab-setup.sh

lab-guest:
	@mkdir -p $(KLASY_CACHE)/lab
	CGO_ENABLED=0 $(GO) build -o $(KLASY_CACHE)/lab/klasy.tmp ./cmd/klasy
	mv -f $(KLASY_CACHE)/lab/klasy.tmp $(KLASY_CACHE)/lab/klasy

lab-kernel: lab-setup plugin-deps
	./scripts/build-lab-kernel.sh >/dev/null

lab-kernel-debug: lab-setup plugin-deps
	KLASY_LAB_FLAVOR=debug ./scripts/build-lab-kernel.sh >/dev/null

TEST_SETUP += lab-setup
DEMO_SETUP += lab-setup lab-guest
BENCH_SETUP += lab-setup
BENCH_PKGS  += ./lab/
