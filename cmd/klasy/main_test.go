package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestRunHelpAndUnknown(t *testing.T) {
	tests := []struct {
		args    []string
		wantOut string
		wantErr string
	}{
		{args: []string{"--help"}, wantOut: "Usage: klasy COMMAND"},
		{args: []string{"help"}, wantOut: "Commands:"},
		{args: []string{"frobnicate"}, wantErr: `unknown command "frobnicate"`},
		{args: []string{"help", "frobnicate"}, wantErr: `unknown command "frobnicate"`},
	}
	for _, tt := range tests {
		var out, errb bytes.Buffer
		err := run(&stdio{Out: &out, Err: &errb}, tt.args)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("run(%q) error = %v, want it to contain %q", tt.args, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("run(%q) = %v", tt.args, err)
		}
		if !strings.Contains(out.String(), tt.wantOut) {
			t.Errorf("run(%q) printed %q, want it to contain %q", tt.args, out.String(), tt.wantOut)
		}
	}
}

func TestEveryCommandHasHelp(t *testing.T) {
	for name, c := range commands {
		if c.Summary == "" || !strings.Contains(c.Help, "klasy "+name) {
			t.Errorf("command %s: help must have a summary and a usage line naming 'klasy %s'", name, name)
		}
	}
}
