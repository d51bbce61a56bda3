package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klasy/klasy/internal/testenv"
	"github.com/klasy/klasy/lab"
)

func TestLabUsageErrors(t *testing.T) {
	t.Setenv("KLASY_LAB_DIR", t.TempDir())
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"lab"}, "missing subcommand"},
		{[]string{"lab", "frob"}, `unknown subcommand "frob"`},
		{[]string{"lab", "up", "a", "extra"}, `unexpected argument "extra"`},
		{[]string{"lab", "up", "a", "--name", "b"}, `two names: "a" and --name "b"`},
		{[]string{"lab", "up", "--cpus", "0"}, "--cpus 0: want 1..64"},
		{[]string{"lab", "up", "--cpus=65"}, "--cpus 65: want 1..64"},
		{[]string{"lab", "up", "--mem", "0"}, "--mem 0: want 128..65536"},
		{[]string{"lab", "up", "--kernel", "gentoo"}, `--kernel "gentoo"`},
		{[]string{"lab", "up", "--name", "../x"}, "bad lab name"},
		{[]string{"lab", "up", "../x"}, "bad lab name"},
		{[]string{"lab", "up", "--mem", "lots"}, "invalid value"},
		{[]string{"lab", "exec"}, "needs a lab name and a command"},
		{[]string{"lab", "exec", "a"}, "needs a command after the lab name"},
		{[]string{"lab", "exec", "a", "--"}, "needs a command after the lab name"},
		{[]string{"lab", "down"}, "one lab name"},
		{[]string{"lab", "down", "a", "b"}, "one lab name"},
		{[]string{"lab", "console", "a/b"}, "bad lab name"},
		{[]string{"lab", "exec", "nosuch", "--", "true"}, "no such lab"},
		{[]string{"lab", "down", "nosuch"}, "no such lab"},
		{[]string{"lab", "status", "nosuch"}, `no lab called "nosuch"`},
	}
	for _, tt := range tests {
		var out, errb bytes.Buffer
		err := run(&stdio{In: strings.NewReader(""), Out: &out, Err: &errb}, tt.args)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("klasy %s: error %v, want it to contain %q", strings.Join(tt.args, " "), err, tt.want)
		}
	}
}

// TestLabCommand drives a real lab through the command line: up, exec
// (output and exit status), status, console, down.
func TestLabCommand(t *testing.T) {
	_, err := exec.LookPath("qemu-system-x86_64")
	testenv.Need(t, "lab", err)
	_, err = lab.FindKernel(lab.Debian)
	testenv.Need(t, "lab", err)
	agent := filepath.Join(t.TempDir(), "klasy")
	build := exec.Command("go", "build", "-o", agent, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the static agent: %v\n%s", err, out)
	}
	t.Setenv("KLASY_LAB_AGENT", agent)
	name := fmt.Sprintf("t%d-cli", os.Getpid())
	klasy := func(stdin string, args ...string) (string, string, error) {
		var out, errb bytes.Buffer
		err := run(&stdio{In: strings.NewReader(stdin), Out: &out, Err: &errb}, args)
		return out.String(), errb.String(), err
	}
	out, progress, err := klasy("", "lab", "up", name)
	if err != nil {
		t.Fatalf("lab up: %v\n%s", err, progress)
	}
	t.Cleanup(func() { klasy("", "lab", "down", name) })
	if !strings.Contains(out, "lab "+name+" is up") || !strings.Contains(progress, "agent answered") {
		t.Errorf("lab up printed %q, progress %q", out, progress)
	}

	out, stderr, err := klasy("", "lab", "exec", name, "--", "sh", "-c", "uname -r; echo oops >&2; exit 3")
	var ee exitError
	if !errors.As(err, &ee) || ee.Code != 3 {
		t.Errorf("lab exec with exit 3: err %v", err)
	}
	k, _ := lab.FindKernel(lab.Debian)
	if strings.TrimSpace(out) != k.Release || stderr != "oops\n" {
		t.Errorf("lab exec printed %q / %q", out, stderr)
	}
	if out, _, err := klasy("hello from stdin\n", "lab", "exec", "--stdin", name, "cat"); err != nil || out != "hello from stdin\n" {
		t.Errorf("lab exec --stdin cat: %q, %v", out, err)
	}
	// A command the guest does not have exits 127, as in a shell.
	if _, stderr, err := klasy("", "lab", "exec", name, "--", "no-such-command"); !errors.As(err, &ee) || ee.Code != 127 || !strings.Contains(stderr, "no-such-command") {
		t.Errorf("lab exec of a missing command: err %v, stderr %q; want exit 127 naming it", err, stderr)
	}
	// --timeout stops the command in the guest, not only the wait for it.
	if _, _, err := klasy("", "lab", "exec", name, "--timeout", "1s", "--", "sh", "-c", "sleep 3; touch /tmp/survived"); err == nil || !strings.Contains(err.Error(), "deadline exceeded") {
		t.Errorf("lab exec --timeout 1s of a 3 s command: %v, want a deadline error", err)
	}
	time.Sleep(3 * time.Second)
	if out, _, err := klasy("", "lab", "exec", name, "--", "ls", "/tmp"); err != nil || strings.Contains(out, "survived") {
		t.Errorf("the command of lab exec --timeout kept running in the guest (ls /tmp: %q, %v)", out, err)
	}

	out, _, err = klasy("", "lab", "status", "--json", name)
	if err != nil {
		t.Fatal(err)
	}
	var st lab.Status
	if err := json.Unmarshal([]byte(out), &st); err != nil || st.Name != name || st.State != "running" || st.ConsoleLog == "" {
		t.Errorf("lab status --json: %q (%v)", out, err)
	}
	if log, err := os.ReadFile(st.ConsoleLog); err != nil || !strings.Contains(string(log), "klasy-init: starting agent") {
		t.Errorf("console log %s: %v", st.ConsoleLog, err)
	}

	if out, _, err := klasy("echo console-$((6*7))\n", "lab", "console", name); err != nil || !strings.Contains(out, "console-42") {
		t.Errorf("lab console: %q, %v", out, err)
	}

	// The name of the older --name flag is the same lab.
	if _, _, err := klasy("", "lab", "up", "--name", name); err == nil || !strings.Contains(err.Error(), "already running") {
		t.Errorf("second lab up of the same name: %v", err)
	}
	if _, progress, err := klasy("", "lab", "down", name); err != nil || !strings.Contains(progress, "powered off") {
		t.Errorf("lab down: %v\n%s", err, progress)
	}
	if out, _, _ := klasy("", "lab", "status", "--json"); strings.Contains(out, name) {
		t.Errorf("lab still listed after down: %s", out)
	}
}
