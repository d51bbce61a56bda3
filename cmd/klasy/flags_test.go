package main

import (
	"flag"
	"io"
	"slices"
	"testing"
)

func TestParseInterspersed(t *testing.T) {
	tests := []struct {
		args     []string
		wantPos  []string
		wantJSON bool
	}{
		{args: []string{"vmlinux", "f"}, wantPos: []string{"vmlinux", "f"}},
		{args: []string{"--json", "vmlinux", "f"}, wantPos: []string{"vmlinux", "f"}, wantJSON: true},
		{args: []string{"vmlinux", "--json", "f"}, wantPos: []string{"vmlinux", "f"}, wantJSON: true},
		{args: []string{"vmlinux", "f", "--json"}, wantPos: []string{"vmlinux", "f"}, wantJSON: true},
		// After "--" nothing is a flag, not even what looks like one.
		{args: []string{"--", "vmlinux", "--json"}, wantPos: []string{"vmlinux", "--json"}},
		{args: []string{"vmlinux", "--", "-f"}, wantPos: []string{"vmlinux", "-f"}},
		{args: []string{"--json", "--", "--", "x"}, wantPos: []string{"--", "x"}, wantJSON: true},
	}
	for _, tt := range tests {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		json := fs.Bool("json", false, "")
		pos, err := parseInterspersed(fs, tt.args)
		if err != nil || !slices.Equal(pos, tt.wantPos) || *json != tt.wantJSON {
			t.Errorf("parseInterspersed(%q) = %q, json=%v, %v; want %q, json=%v", tt.args, pos, *json, err, tt.wantPos, tt.wantJSON)
		}
	}
}

func TestParseQueryDoubleDash(t *testing.T) {
	q, pos, err := parseQuery(nil, "lines", []string{"--", "vmlinux", "--json"}, 2)
	if err != nil || !slices.Equal(pos, []string{"vmlinux", "--json"}) || q.json {
		t.Errorf("parseQuery(-- vmlinux --json) = %q, json=%v, %v; want [vmlinux --json] without --json set", pos, q != nil && q.json, err)
	}
}
