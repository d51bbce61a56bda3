package main

import (
	"strings"
	"testing"
)

// TestStarIsPercent: on the command line * is a wildcard as % is, for
// klasy funcs (as in perf probe -F) and klasy accesses alike, on the
// plugin-built fixture, dwarfmap's fixture and Debian's vmlinux.
func TestStarIsPercent(t *testing.T) {
	t.Setenv("KLASY_CACHE", t.TempDir())
	img := fixtureImage(t)
	obj := fixtureObject(t, true)
	cases := []struct {
		star, percent []string
		want          string // in the output of both
	}{
		{[]string{"funcs", img, "pro*"}, []string{"funcs", img, "pro%"}, "process"},
		{[]string{"funcs", "--json", img, "*cal*"}, []string{"funcs", "--json", img, "%cal%"}, `"name":"scale"`},
		{[]string{"accesses", obj, "task.*"}, []string{"accesses", obj, "task.%"}, "task.count"},
		{[]string{"accesses", "--json", obj, "*.f*"}, []string{"accesses", "--json", obj, "%.f%"}, `"member":"f`},
	}
	for _, c := range cases {
		star, starErr, err := runKlasy(t, c.star...)
		if err != nil {
			t.Errorf("klasy %s: %v", strings.Join(c.star, " "), err)
			continue
		}
		percent, percentErr, err := runKlasy(t, c.percent...)
		if err != nil {
			t.Errorf("klasy %s: %v", strings.Join(c.percent, " "), err)
			continue
		}
		if !strings.Contains(star, c.want) {
			t.Errorf("klasy %s printed no %q:\n%s", strings.Join(c.star, " "), c.want, star)
		}
		if star != percent {
			t.Errorf("klasy %s printed\n%s\nklasy %s printed\n%s", strings.Join(c.star, " "), star, strings.Join(c.percent, " "), percent)
		}
		// The summary names the pattern as given; the counts agree.
		if a, b := strings.ReplaceAll(starErr, "*", "%"), percentErr; c.star[0] == "accesses" && a != b {
			t.Errorf("summaries differ: %q and %q", starErr, percentErr)
		}
	}
}

// TestStarIsPercentVmlinux: klasy funcs vmlinux 'tcp_*' lists what
// 'tcp_%' lists, on Debian's kernel (the shared index cache).
func TestStarIsPercentVmlinux(t *testing.T) {
	vmlinux := needDebianVmlinux(t)
	star, _, err := runKlasy(t, "funcs", vmlinux, "tcp_*")
	if err != nil {
		t.Fatal(err)
	}
	percent, _, err := runKlasy(t, "funcs", vmlinux, "tcp_%")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(star, "\n"); n < 100 || !strings.Contains(star, "tcp_sendmsg ") {
		t.Errorf("funcs vmlinux 'tcp_*': %d lines, want hundreds with tcp_sendmsg:\n%.500s", n, star)
	}
	if star != percent {
		t.Errorf("funcs vmlinux 'tcp_*' and 'tcp_%%' differ: %d and %d bytes", len(star), len(percent))
	}
}

// TestPatternErrors: bad patterns are usage errors that say what is
// wrong.
func TestPatternErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"funcs", "nosuch-image", ""}, `funcs: pattern "": empty pattern`},
		{[]string{"accesses", "nosuch.o", "sk_buff"}, "not STRUCT.MEMBER (use % or * as a wildcard: sk_buff.%)"},
		{[]string{"accesses", "nosuch.o", "sk_buff.l-n"}, `"-" is not allowed`},
		{[]string{"accesses", "nosuch.o", "a.b.c"}, "nested members are not selectable"},
	} {
		_, _, err := runKlasy(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("klasy %q: %v, want an error with %q", c.args, err, c.want)
		}
	}
}
