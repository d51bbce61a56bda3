package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// Output lost silently (issue 14, class 3): every command that prints
// data, with its standard output on /dev/full, must fail and say so
// instead of exiting 0 with part of its output.
func init() {
	const want = "writing output: no space left on device"
	full := func(args ...string) hostileRun { return hostileRun{args: args, stdout: "/dev/full"} }
	aspect := func(t *testing.T, dir, text string) string {
		p := filepath.Join(dir, "a.klasy")
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, c := range []struct {
		name  string
		setup func(t *testing.T, dir string) hostileRun
	}{
		{"help", func(t *testing.T, dir string) hostileRun { return full("--help") }},
		{"help-command", func(t *testing.T, dir string) hostileRun { return full("help", "lines") }},
		{"command-help", func(t *testing.T, dir string) hostileRun { return full("lab", "up", "--help") }},
		// check prints its diagnostics on stdout with --json.
		{"check-json", func(t *testing.T, dir string) hostileRun {
			return full("check", "--json", aspect(t, dir, invalidAspect))
		}},
		{"translate", func(t *testing.T, dir string) hostileRun {
			return full("translate", aspect(t, dir, validAspect))
		}},
		{"lines", func(t *testing.T, dir string) hostileRun { return full("lines", indexedFixture(t, dir), "process") }},
		{"lines-json", func(t *testing.T, dir string) hostileRun {
			return full("lines", "--json", indexedFixture(t, dir), "fixture.c")
		}},
		{"vars", func(t *testing.T, dir string) hostileRun { return full("vars", indexedFixture(t, dir), "helper+0") }},
		{"struct", func(t *testing.T, dir string) hostileRun { return full("struct", indexedFixture(t, dir), "packet") }},
		{"funcs", func(t *testing.T, dir string) hostileRun { return full("funcs", indexedFixture(t, dir), "%") }},
		{"funcs-inlined", func(t *testing.T, dir string) hostileRun {
			return full("funcs", "--inlined", indexedFixture(t, dir), "scale")
		}},
		{"accesses", func(t *testing.T, dir string) hostileRun {
			return full("accesses", fixtureObject(t, true), "inner.f%")
		}},
		{"accesses-json", func(t *testing.T, dir string) hostileRun {
			return full("accesses", "--json", fixtureObject(t, true), "%.%")
		}},
		// A lab directory without a record (an interrupted up) is listed
		// as stale; with --json, status prints it on stdout and nothing
		// on stderr.
		{"lab-status-json", func(t *testing.T, dir string) hostileRun {
			labs := filepath.Join(dir, "labs")
			if err := os.MkdirAll(filepath.Join(labs, "x"), 0o755); err != nil {
				t.Fatal(err)
			}
			r := full("lab", "status", "--json")
			r.env = []string{"KLASY_LAB_DIR=" + labs}
			return r
		}},
	} {
		hostileCases = append(hostileCases, hostileCase{name: "full-" + c.name, class: "output", want: want, setup: c.setup})
	}
}

// indexedFixture compiles the dwarfmap fixture and indexes it into the
// case's cache (dir/cache), so that the case's own run loads the index
// and prints nothing but its error.
func indexedFixture(t *testing.T, dir string) string {
	t.Helper()
	img := fixtureImage(t)
	t.Setenv("KLASY_CACHE", filepath.Join(dir, "cache"))
	var out, errb bytes.Buffer
	if err := run(&stdio{Out: &out, Err: &errb}, []string{"funcs", img, "%"}); err != nil {
		t.Fatalf("indexing the fixture: %v\n%s", err, errb.String())
	}
	return img
}
