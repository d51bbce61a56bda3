package main

import (
	"os"
	"path/filepath"
	"testing"
)

// Hostile inputs to the weaver's commands: each must fail in one line
// and leave nothing behind, before any kernel is touched.
func init() {
	aspectIn := func(t *testing.T, dir, body string) string {
		p := filepath.Join(dir, "a.klasy")
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const execAspect = "<aspect><advice><pointcut>execution(vfs_read)</pointcut><before>STORE_DATA(1);</before></advice></aspect>\n"
	labDir := func(dir string) string { return "KLASY_LAB_DIR=" + filepath.Join(dir, "labs") }
	hostileCases = append(hostileCases,
		// This kind of machine runs a kernel without module support: the
		// local target says so in one line instead of failing later.
		hostileCase{
			name: "weave-local-no-modules", class: "small", want: "cannot load modules",
			setup: func(t *testing.T, dir string) hostileRun {
				if _, err := os.Stat("/proc/modules"); err == nil {
					t.Skip("this machine's kernel can load modules")
				}
				return hostileRun{args: []string{"weave", aspectIn(t, dir, execAspect)}}
			},
		},
		hostileCase{
			name: "weave-no-such-lab", class: "small", want: "no such lab",
			setup: func(t *testing.T, dir string) hostileRun {
				return hostileRun{args: []string{"weave", "--lab", "nosuch", aspectIn(t, dir, execAspect)}, env: []string{labDir(dir)}}
			},
		},
		hostileCase{
			name: "trace-no-such-lab", class: "small", want: "no such lab",
			setup: func(t *testing.T, dir string) hostileRun {
				return hostileRun{args: []string{"trace", "--follow", "--lab", "nosuch"}, env: []string{labDir(dir)}}
			},
		},
		hostileCase{
			name: "unweave-nothing-named", class: "small", want: "name the aspects to unweave",
			setup: func(t *testing.T, dir string) hostileRun {
				return hostileRun{args: []string{"unweave", "--lab", "x"}}
			},
		},
		hostileCase{
			name: "weave-stdin", class: "small", want: "give a FILE, not -",
			setup: func(t *testing.T, dir string) hostileRun {
				return hostileRun{args: []string{"weave", "--lab", "x", "-"}}
			},
		},
		// A bad aspect never reaches the kernel: it fails before the lab
		// is even looked up.
		hostileCase{
			name: "weave-retval-before", class: "small", want: "a.klasy:1:",
			setup: func(t *testing.T, dir string) hostileRun {
				p := aspectIn(t, dir, "<aspect><advice><pointcut>execution(vfs_read)</pointcut><before>STORE_DATA($retval$);</before></advice></aspect>\n")
				return hostileRun{args: []string{"weave", "--lab", "nosuch", p}, env: []string{labDir(dir)}}
			},
		},
	)
}
