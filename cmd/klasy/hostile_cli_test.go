package main

import (
	"path/filepath"
	"testing"
)

// Hostile inputs to the command line itself.
func init() {
	hostileCases = append(hostileCases,
		hostileCase{
			name: "unknown-command", class: "small", want: `unknown command "frobnicate"`,
			setup: func(t *testing.T, dir string) hostileRun {
				return hostileRun{args: []string{"frobnicate"}}
			},
		},
		// lab.Config takes 0 CPUs for the default: the range the help
		// documents is the command line's to check. No QEMU may start.
		hostileCase{
			name: "lab-up-cpus-0", class: "small", want: "--cpus 0: want 1..64",
			setup: func(t *testing.T, dir string) hostileRun {
				return hostileRun{args: []string{"lab", "up", "--cpus", "0", "h"}, env: []string{"KLASY_LAB_DIR=" + filepath.Join(dir, "labs")}}
			},
		},
		hostileCase{
			name: "lab-up-mem-0", class: "small", want: "--mem 0: want 128..65536",
			setup: func(t *testing.T, dir string) hostileRun {
				return hostileRun{args: []string{"lab", "up", "h", "--mem=0"}, env: []string{"KLASY_LAB_DIR=" + filepath.Join(dir, "labs")}}
			},
		},
		// A flag whose zero value stands for its default is out of range
		// when 0 is given (issue 21): the runtime's buffer is not 1024
		// KiB because the user typed 0, and cover does not count until
		// Ctrl-C because the user asked for no time at all.
		hostileCase{
			name: "weave-buffer-kb-0", class: "small", want: "--buffer-kb 0: want 8..65536 KiB per CPU",
			setup: func(t *testing.T, dir string) hostileRun {
				return hostileRun{args: []string{"weave", "--lab", "h", "--buffer-kb", "0", writeAspect(t, "a.klasy", oneAdvice("execution(f)", "f();"))},
					env: []string{"KLASY_LAB_DIR=" + filepath.Join(dir, "labs")}}
			},
		},
		hostileCase{
			name: "cover-for-0", class: "small", want: "--for takes a positive duration",
			setup: func(t *testing.T, dir string) hostileRun {
				return hostileRun{args: []string{"cover", "--lab", "h", "--for=0s", "f"}, env: []string{"KLASY_LAB_DIR=" + filepath.Join(dir, "labs")}}
			},
		},
		// The sentence must end with the pattern that matched nothing.
		hostileCase{
			name: "funcs-inlined-no-copies", class: "small", want: `no inlined copies of the functions matching "process"`,
			setup: func(t *testing.T, dir string) hostileRun {
				return hostileRun{args: []string{"funcs", "--inlined", indexedFixture(t, dir), "process"}}
			},
		},
	)
}
