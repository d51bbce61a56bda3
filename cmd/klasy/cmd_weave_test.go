package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestWeaveBufferUsage(t *testing.T) {
	for _, kb := range []string{"0", "7", "65537", "-1"} {
		var out, errb bytes.Buffer
		err := run(&stdio{In: strings.NewReader(""), Out: &out, Err: &errb}, []string{"weave", "--lab", "none", "--buffer-kb", kb, "a.klasy"})
		if err == nil || !strings.Contains(err.Error(), "want 8..65536 KiB per CPU") {
			t.Errorf("weave --buffer-kb %s = %v, want an error giving the range", kb, err)
		}
	}
}

// TestWeaveTaskFilterUsage: a filter no task can match is refused before
// any kernel is looked at.
func TestWeaveTaskFilterUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--pid", "0"}, "--pid: want a process id from 1 up"},
		{[]string{"--pid", "-3"}, "--pid: want a process id from 1 up"},
		{[]string{"--comm", ""}, "--comm: want a command name"},
		{[]string{"--comm", "systemd-journald"}, `give its first 15 bytes ("systemd-journal")`},
	} {
		var out, errb bytes.Buffer
		args := append(append([]string{"weave", "--lab", "none"}, tc.args...), "a.klasy")
		err := run(&stdio{In: strings.NewReader(""), Out: &out, Err: &errb}, args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("weave %q = %v, want an error with %q", tc.args, err, tc.want)
		}
	}
}
