# dwarfmap: the kernel symbol index (klasy lines/vars/struct/funcs).
# Tests compile C fixtures with gcc and compare with binutils; one test
# reads Debian's debug vmlinux. The benchmark compares against perf probe
# and stap on that vmlinux (scripts/dwarfmap-bench-setup.sh).
.PHONY: dwarfmap-test-setup dwarfmap-bench-setup
dwarfmap-test-setup: debian-kernel
	@bash -c 'source scripts/lib.sh && need_pkgs gcc binutils'

dwarfmap-bench-setup: debian-kernel
	./scripts/dwarfmap-bench-setup.sh

TEST_SETUP  += dwarfmap-test-setup
BENCH_SETUP += dwarfmap-bench-setup
BENCH_PKGS  += ./dwarfmap/...
