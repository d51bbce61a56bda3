// Package testenv decides what a test does when something it needs from
// the machine (a lab kernel, the GCC plugin, linux-source) is missing.
//
// Run by hand, such a test skips and says what is missing and how to get
// it. Under `make test`, which installs everything, KLASY_TEST_REQUIRE=all
// turns the same absence into a failure, so CI cannot go green by skipping.
// Under -short (`make check`, unit tests only) a test that needs set-up
// skips whether or not the feature is there, and whatever
// KLASY_TEST_REQUIRE says.
package testenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klasy/klasy/internal/cachedir"
)

// optIn are the features "all" does not name: set-up that make test
// does not do, and tests it does not run, because they are slow or large
// (the Xen lab's tests take about 7 minutes of two cores), run by a
// target of their own (make test-xen, make test-rt). A test needing one
// is required only where KLASY_TEST_REQUIRE names the feature; where
// KLASY_TEST_REQUIRE is set without naming it (make test), it skips even
// when the feature is there; run by hand, it runs when it is there.
var optIn = map[string]string{"xen-lab": "make test-xen", "debian-rt": "make test-rt"}

// Required reports whether KLASY_TEST_REQUIRE (a comma-separated list,
// or "all") names feature. "all" names every feature but the opt-in
// ones (xen-lab, debian-rt), which only their own name
// requires.
func Required(feature string) bool {
	for _, f := range strings.Split(os.Getenv("KLASY_TEST_REQUIRE"), ",") {
		f = strings.TrimSpace(f)
		if (f == "all" && optIn[feature] == "") || f == feature {
			return true
		}
	}
	return false
}

// hostTools are the features a -short run still uses: tools every
// machine has, with which unit tests compile their C fixtures.
var hostTools = map[string]bool{"gcc": true, "binutils": true}

// GCC runs gcc with args, as the tests that compile their C fixtures
// do: without gcc t skips (or fails, when required), and a compile that
// fails fails t with gcc's command line and output.
func GCC(t testing.TB, args ...string) {
	t.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		Need(t, "gcc", errors.New("gcc not found: apt install gcc"))
	}
	if b, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
		t.Fatalf("gcc %s: %v\n%s", strings.Join(args, " "), err, b)
	}
}

// Need skips t (or fails it when the feature is required) if err is not
// nil. err should say what is missing and how to get it, e.g.
// "no lab kernel in ~/.cache/klasy: run make debian-kernel". Under -short
// it skips t for every feature but the host tools, even when err is nil,
// so call it whether or not the feature was found.
func Need(t testing.TB, feature string, err error) {
	t.Helper()
	if testing.Short() && !hostTools[feature] {
		t.Skipf("%s: needs set-up, not run under -short (make check)", feature)
	}
	if optIn[feature] != "" && os.Getenv("KLASY_TEST_REQUIRE") != "" && !Required(feature) {
		t.Skipf("%s: slow, not run where KLASY_TEST_REQUIRE=%s does not name it (make test); %s runs it", feature, os.Getenv("KLASY_TEST_REQUIRE"), optIn[feature])
	}
	if err == nil {
		return
	}
	if Required(feature) {
		t.Fatalf("%s required (KLASY_TEST_REQUIRE=%s) but unavailable: %v", feature, os.Getenv("KLASY_TEST_REQUIRE"), err)
	}
	t.Skipf("%s unavailable: %v", feature, err)
}

// DebianVmlinux returns the path of the Debian debug vmlinux that `make
// debian-kernel` fetches into the cache; without it tb skips, or fails
// when "debian-kernel" is required.
func DebianVmlinux(tb testing.TB) string {
	tb.Helper()
	p := filepath.Join(cachedir.Root(), "debian", "current", "vmlinux")
	if _, err := os.Stat(p); err != nil {
		Need(tb, "debian-kernel", fmt.Errorf("no Debian debug vmlinux at %s: run make debian-kernel", p))
	}
	return p
}
