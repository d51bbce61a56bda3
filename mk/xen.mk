# The Xen lab (klasy lab up --xen; lab/xenlab/): Xen 4.17 under QEMU TCG with
# a PV Domain 0 and PV Domain U guests on xenbr0, xen-netback and
# xen-netfront rebuilt with the klasy plugin, an agent in every domain
# reached over mutual TLS (agent/tls.go, domains/).
#
#   make xen-lab    its images, once: Xen's hypervisor and Domain 0's root
#                   (debootstrap minbase + Xen's tools), cached under
#                   $KLASY_CACHE/xen-lab by scripts/build-xen-lab.sh
#                   (about a minute cold here; a second warm)
#   make test-xen   the images, then the Xen lab's tests, which must run
#
# make test builds the images and runs the XenLASY case study
# (TestXenNetflow: examples/netflow.klasy woven into Domain 0 and Domain
# U, about 2 minutes; feature xen-case), but not the Xen lab's own tests
# (about 7 minutes of 2 cores): KLASY_TEST_REQUIRE=all leaves the opt-in
# xen-lab feature out, and those skip, saying so (internal/testenv). By
# hand, go test runs them when the images are cached.
.PHONY: xen-lab test-xen
TEST_SETUP += xen-lab
xen-lab: lab-setup
	./scripts/build-xen-lab.sh >/dev/null

test-xen: xen-lab plugin linux-source lint
	KLASY_TEST_REQUIRE=all,xen-lab $(GO) test -count=1 -timeout 30m ./domains/
	KLASY_TEST_REQUIRE=all,xen-lab $(GO) test -count=1 -timeout 30m -run 'Xen|TLS|AgentListen' ./agent/ ./lab/xenlab/ ./cmd/klasy/

# BenchmarkXenFlowLog (Table 6.9 on Xen) runs under make bench when the
# images are cached, and skips, saying so, when they are not.
BENCH_PKGS += ./cmd/klasy/
