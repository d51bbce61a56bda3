package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// Hostile options to klasy trace's views: refused in one line before
// the lab is even looked up (the lab named does not exist).
func init() {
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"trace-hist-0", []string{"--hist", "0"}, "--hist: value index 0: want 1..16"},
		{"trace-two-views", []string{"--group-by", "2", "--lhist", "1,0,10,1"}, "--group-by and --lhist are different views: give one"},
		{"trace-lhist-step", []string{"--lhist", "1,0,10,3"}, "MAX-MIN (10) must be a multiple of STEP (3)"},
		{"trace-lhist-buckets", []string{"--lhist", "1,0,9223372036854775807,1"}, "buckets, at most 1000"},
		{"trace-gap-alone", []string{"--group-gap", "1s"}, "--group-gap needs --group-by"},
	} {
		hostileCases = append(hostileCases, hostileCase{
			name: c.name, class: "small", want: c.want,
			setup: func(t *testing.T, dir string) hostileRun {
				args := append([]string{"trace", "--follow", "--lab", "nosuch"}, c.args...)
				return hostileRun{args: args, env: []string{"KLASY_LAB_DIR=" + filepath.Join(dir, "labs")}}
			},
		})
	}
}

// A --perfetto path that cannot be written is refused before the lab is
// looked up, let alone a record consumed (issue 21, "output files": it
// failed once the records were read).
func init() {
	for _, c := range []struct {
		name string
		path func(dir string) string
		want string
	}{
		{"trace-perfetto-dir", func(dir string) string { return dir }, "is a directory"},
		{"trace-perfetto-missing-dir", func(dir string) string { return filepath.Join(dir, "missing", "t.json") },
			"no such file or directory"},
	} {
		hostileCases = append(hostileCases, hostileCase{
			name: c.name, class: "output", want: c.want,
			setup: func(t *testing.T, dir string) hostileRun {
				return hostileRun{
					args: []string{"trace", "--lab", "nosuch", "--perfetto", c.path(dir)},
					env:  []string{"KLASY_LAB_DIR=" + filepath.Join(dir, "labs")},
					afterErr: func(t *testing.T, stderr string) {
						if !strings.HasPrefix(stderr, "klasy: --perfetto: ") {
							t.Errorf("stderr %q, want it to name --perfetto", stderr)
						}
					},
				}
			},
		})
	}
}
