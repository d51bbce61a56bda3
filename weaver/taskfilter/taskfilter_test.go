package taskfilter

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func TestC(t *testing.T) {
	for _, tc := range []struct {
		f    Filter
		want []string
		not  []string
	}{
		{Filter{}, nil, nil},
		{Filter{SelfTGID: 71, IncludeSelf: true}, nil, nil},
		{Filter{SelfTGID: 71}, []string{"current->tgid == 71"}, []string{"comm", "!="}},
		{Filter{PID: 300, SelfTGID: 71}, []string{"current->tgid == 71", "current->tgid != 300"}, []string{"comm"}},
		{Filter{Comm: "dd", IncludeSelf: true, SelfTGID: 71}, []string{`want[3] = "\x64\x64"`, "current->comm[i]) != want[i]"}, []string{"tgid", "memcmp"}},
	} {
		c := tc.f.C()
		if (c == "") != (tc.want == nil) {
			t.Errorf("%+v: C %q", tc.f, c)
		}
		for _, w := range tc.want {
			if !strings.Contains(c, w) {
				t.Errorf("%+v: C lacks %q:\n%s", tc.f, w, c)
			}
		}
		for _, w := range tc.not {
			if strings.Contains(c, w) {
				t.Errorf("%+v: C has %q:\n%s", tc.f, w, c)
			}
		}
	}
}

func TestCheck(t *testing.T) {
	if err := (Filter{Comm: "systemd-journald"}).Check(); err == nil || !strings.Contains(err.Error(), `"systemd-journal"`) {
		t.Errorf("a 16-byte comm: %v, want the 15 bytes the kernel keeps", err)
	}
	if err := (Filter{Comm: "systemd-journal", PID: 1}).Check(); err != nil {
		t.Errorf("a 15-byte comm: %v", err)
	}
	if err := (Filter{PID: -2}).Check(); err == nil {
		t.Errorf("--pid -2 accepted")
	}
}

func TestSelf(t *testing.T) {
	read := func(b string, err error) func(context.Context, string) ([]byte, error) {
		return func(_ context.Context, p string) ([]byte, error) {
			if p != SelfStat {
				t.Errorf("read %s", p)
			}
			return []byte(b), err
		}
	}
	if tgid, err := Self(context.Background(), read("4242 (klasy) S 1 4242", nil)); err != nil || tgid != 4242 {
		t.Errorf("Self = %d, %v; want 4242", tgid, err)
	}
	if _, err := Self(context.Background(), read("", errors.New("no agent"))); err == nil || !strings.Contains(err.Error(), "no agent") {
		t.Errorf("read error: %v", err)
	}
	if _, err := Self(context.Background(), read("x (klasy)", nil)); err == nil {
		t.Errorf("a stat without a pid accepted")
	}
}
