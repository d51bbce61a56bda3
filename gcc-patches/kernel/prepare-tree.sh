#!/usr/bin/env bash
# prepare-tree.sh SRCDIR: makes a Linux source tree ready for objects that
# carry the klasy plugin's .debug_klasy section.
#
# The plugin adds a non-allocated section to every object. vmlinux is linked
# with --orphan-handling=warn, so without a place in the linker script every
# object triggers "ld: warning: orphan section `.debug_klasy'" at each of the
# three vmlinux links (later kernels make that an error). One line after
# ELF_DETAILS in arch/x86/kernel/vmlinux.lds.S keeps the section, unallocated,
# in vmlinux. Modules need nothing: they are linked with ld -r, which
# concatenates the section, and modpost accepts ".debug_*" names; objcopy -S
# drops ".debug_*", so the section stays out of bzImage and the vDSO.
#
# Idempotent: running it twice changes nothing the second time.
set -euo pipefail

src=${1:?usage: prepare-tree.sh LINUX_SOURCE_DIR}
lds=$src/arch/x86/kernel/vmlinux.lds.S
[ -f "$lds" ] || { echo "prepare-tree.sh: $lds not found: is $src a Linux source tree?" >&2; exit 1; }

line='	.debug_klasy 0 : { *(.debug_klasy) }	/* klasy: member accesses (gcc-patches/) */'
if grep -q '\.debug_klasy' "$lds"; then
	exit 0
fi
grep -q '^[[:space:]]*ELF_DETAILS[[:space:]]*$' "$lds" ||
	{ echo "prepare-tree.sh: no ELF_DETAILS line in $lds: add this line by hand after the DWARF sections:" >&2; echo "$line" >&2; exit 1; }
tmp=$lds.klasy-tmp.$$
trap 'rm -f "$tmp"' EXIT # a failed awk leaves nothing behind
awk -v add="$line" '{ print } /^[[:space:]]*ELF_DETAILS[[:space:]]*$/ && !done { print add; done = 1 }' "$lds" >"$tmp"
mv -f "$tmp" "$lds"
echo "prepare-tree.sh: placed .debug_klasy in $lds" >&2
