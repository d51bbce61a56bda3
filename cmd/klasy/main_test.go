package main

import (
	"bytes"
	"fmt"
	"io/fs"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/klasy/klasy/cmd/klasy/internal/cmdout"
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

// errWriter takes n bytes, then fails as a full disk does.
type errWriter struct{ n int }

func (w *errWriter) Write(p []byte) (int, error) {
	if len(p) > w.n {
		k := w.n
		w.n = 0
		return k, &fs.PathError{Op: "write", Path: "/dev/stdout", Err: syscall.ENOSPC}
	}
	w.n -= len(p)
	return len(p), nil
}

// A write that failed, at the start or after some output, is the
// command's error, whatever the command returned.
func TestRunReportsLostOutput(t *testing.T) {
	for _, n := range []int{0, 100, 1000} {
		for _, args := range [][]string{{"--help"}, {"help", "lab"}, {"check", "--help"}} {
			err := run(&stdio{Out: &errWriter{n: n}, Err: &bytes.Buffer{}}, args)
			if err == nil || err.Error() != "writing output: no space left on device" {
				t.Errorf("klasy %s with stdout full after %d bytes: %v", strings.Join(args, " "), n, err)
			}
		}
	}
}

// Standard error flushes standard output first: on a terminal, data and
// diagnostics come in the order the command wrote them.
func TestDiagnosticsFollowOutput(t *testing.T) {
	var both bytes.Buffer
	out := cmdout.New(&both)
	s := &stdio{Out: out, Err: cmdout.Diagnostics{Out: out, W: &both}}
	fmt.Fprint(s.Out, "1 ")
	fmt.Fprint(s.Err, "2 ")
	fmt.Fprint(s.Out, "3")
	out.Flush()
	if both.String() != "1 2 3" {
		t.Errorf("interleaved output %q, want %q", both.String(), "1 2 3")
	}
}

// Help shows only commands that exist: every command line in the
// overview, the command list and each command's help names a registered
// command (or help).
func TestHelpNamesOnlyCommands(t *testing.T) {
	var list bytes.Buffer
	usage(&list)
	texts := map[string]string{"klasy --help": list.String()}
	for name, c := range commands {
		texts["klasy help "+name] = c.Help
	}
	cmdLine := regexp.MustCompile(`(?m)(?:^\s*(?:usage:\s*)?|['` + "`" + `])klasy ([a-z][a-z-]*)`)
	found := 0
	for where, text := range texts {
		for _, m := range cmdLine.FindAllStringSubmatch(text, -1) {
			found++
			if _, ok := commands[m[1]]; !ok && m[1] != "help" {
				t.Errorf("%s shows %q, but klasy has no command %q", where, strings.TrimSpace(m[0]), m[1])
			}
		}
	}
	if found < len(commands) {
		t.Errorf("found %d command lines in the help texts, want at least one per command", found)
	}
}
