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
		// The sentence must end with the pattern that matched nothing.
		hostileCase{
			name: "funcs-inlined-no-copies", class: "small", want: `no inlined copies of the functions matching "process"`,
			setup: func(t *testing.T, dir string) hostileRun {
				return hostileRun{args: []string{"funcs", "--inlined", indexedFixture(t, dir), "process"}}
			},
		},
	)
}
