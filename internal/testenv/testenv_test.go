package testenv

import (
	"errors"
	"flag"
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
