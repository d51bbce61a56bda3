# Debian's 6.1 kernel (image, headers, DWARF vmlinux) for the lab and the
# dwarfmap benchmark: scripts/fetch-debian-kernel.sh.
.PHONY: debian-kernel
debian-kernel:
	./scripts/fetch-debian-kernel.sh >/dev/null
