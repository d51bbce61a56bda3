# Debian's 6.1 kernel (image, headers, DWARF vmlinux) for the lab and the
# dwarfmap benchmark: scripts/fetch-debian-kernel.sh.
.PHONY: debian-kernel
debian-kernel:
	./scripts/fetch-debian-kernel.sh >/dev/null

# The same ABI's PREEMPT_RT kernel (lab flavor debian-rt, 930 MB of
# downloads) and the runtime's lab tests on it: make test leaves them out
# (the opt-in feature debian-rt).
.PHONY: debian-rt-kernel test-rt
debian-rt-kernel:
	KLASY_DEBIAN_FLAVOR=rt ./scripts/fetch-debian-kernel.sh >/dev/null

test-rt: debian-rt-kernel debian-kernel lab-setup weaver-deps
	KLASY_TEST_REQUIRE=all,debian-rt $(GO) test -count=1 -timeout 30m -run 'InRTLab|RTKernelClean' ./weaver/runtime/ ./weaver/
