# The weaver (weaver/): its lab tests build the runtime and advice modules
# with kbuild against the lab kernel's headers (lab-setup) and run static
# test programs in the guest (gcc -static needs libc6-dev). `make bench`
# reports the cost per hit of klasy's hooks beside a bare kprobe module's
# in one lab run, the time a weave of 100 join points takes, and the flow
# table's ns per call with 1 and 2 threads beside the dissertation's Table
# 6.7 (weaver/runtime: klasy_flow.c in a user-space harness, gcc only).
.PHONY: weaver-deps
weaver-deps:
	@bash -c 'source scripts/lib.sh && need_pkgs gcc libc6-dev make'

TEST_SETUP  += weaver-deps
BENCH_SETUP += weaver-deps lab-setup
BENCH_PKGS  += ./weaver/...

# Access join points and the case studies (issue 10) are woven into the
# `built` lab kernel: make test builds it when it is missing (6-7 min cold
# on 2 idle cores, 13 min while the machine is busy; then cached).
TEST_SETUP += lab-kernel

# The runtime's weave, flow and aggregation run clean in the `debug` lab
# kernel (the built one with lockdep, KASAN and atomic-sleep checks:
# weaver/debug_lab_test.go), and each of those checks is shown to fire
# there. make test builds it after the built one (one kernel build at a
# time), cached by content like it; its config trims what the debug lab
# does not use and KASAN is outline, so that its cold build fits in make
# test's hour (it was 80.5 minutes with inline KASAN on a busy machine).
# make test-debug builds it and runs only its tests.
TEST_SETUP += lab-kernel-debug

.PHONY: test-debug
test-debug: lab-kernel-debug weaver-deps
	KLASY_TEST_REQUIRE=all $(GO) test -count=1 -timeout 30m -run 'TestDebugKernel|TestSplats' ./weaver/
