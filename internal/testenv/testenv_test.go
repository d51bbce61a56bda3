package testenv

import (
	"errors"
	"flag"
	"runtime"
	"testing"
)

func TestRequired(t *testing.T) {
	tests := []struct {
		env, feature string
		want         bool
	}{
		{"", "lab", false},
		{"all", "lab", true},
		{"plugin, lab", "lab", true},
		{"plugin", "lab", false},
		{"laboratory", "lab", false},
		// The Xen lab's images are built by make test-xen only: "all"
		// does not require them, their own name does.
		{"all", "xen-lab", false},
		{"all,xen-lab", "xen-lab", true},
		{"xen-lab", "lab", false},
		// The debug lab kernel is part of make test now that its cold
		// build fits (issue 20): "all" requires it.
		{"all", "debug-kernel", true},
	}
	for _, tt := range tests {
		t.Setenv("KLASY_TEST_REQUIRE", tt.env)
		if got := Required(tt.feature); got != tt.want {
			t.Errorf("KLASY_TEST_REQUIRE=%q: Required(%q) = %v, want %v", tt.env, tt.feature, got, tt.want)
		}
	}
}

// Under -short, a feature that needs set-up skips even when it is there
// and required; a host tool does not.
func TestNeedUnderShort(t *testing.T) {
	old := flag.Lookup("test.short").Value.String()
	flag.Set("test.short", "true")
	defer flag.Set("test.short", old)
	t.Setenv("KLASY_TEST_REQUIRE", "all")
	tests := []struct {
		feature  string
		err      error
		wantSkip bool
	}{
		{"lab", nil, true},
		{"lab", errors.New("no QEMU"), true},
		{"debian-kernel", nil, true},
		{"gcc", nil, false},
	}
	for _, tt := range tests {
		ran := false
		t.Run(tt.feature, func(t *testing.T) {
			Need(t, tt.feature, tt.err)
			ran = true
		})
		if ran == tt.wantSkip {
			t.Errorf("Need(%q, %v) under -short: went on = %v, want %v", tt.feature, tt.err, ran, !tt.wantSkip)
		}
	}
}

// An opt-in feature that is there runs by hand and where
// KLASY_TEST_REQUIRE names it, and skips where KLASY_TEST_REQUIRE is set
// without naming it (make test); one that is missing fails only where
// it is named.
func TestNeedOptIn(t *testing.T) {
	if testing.Short() {
		t.Skip("Need skips every feature under -short")
	}
	missing := errors.New("no Xen images")
	tests := []struct {
		env      string
		err      error
		wantRun  bool
		wantFail bool
	}{
		{"", nil, true, false},
		{"", missing, false, false},
		{"all", nil, false, false},
		{"all", missing, false, false},
		{"all,xen-lab", nil, true, false},
		{"all,xen-lab", missing, false, true},
	}
	for _, tt := range tests {
		t.Setenv("KLASY_TEST_REQUIRE", tt.env)
		ran, failed := false, false
		done := make(chan struct{})
		// Need calls Fatalf or Skipf, which end the goroutine of a test:
		// a fake TB in its own goroutine says which.
		tb := &recordTB{TB: t}
		go func() {
			defer close(done)
			Need(tb, "xen-lab", tt.err)
			ran = true
		}()
		<-done
		failed = tb.failed
		if ran != tt.wantRun || failed != tt.wantFail {
			t.Errorf("KLASY_TEST_REQUIRE=%q, err %v: ran %v failed %v, want ran %v failed %v", tt.env, tt.err, ran, failed, tt.wantRun, tt.wantFail)
		}
	}
}

// recordTB records Fatalf and Skipf instead of ending the test.
type recordTB struct {
	testing.TB
	failed bool
}

func (r *recordTB) Helper() {}
func (r *recordTB) Fatalf(string, ...any) {
	r.failed = true
	runtime.Goexit()
}
func (r *recordTB) Skipf(string, ...any) { runtime.Goexit() }
