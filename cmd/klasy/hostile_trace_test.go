package main

import (
	"path/filepath"
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
