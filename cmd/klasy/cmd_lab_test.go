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
	"syscall"
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
		{[]string{"lab", "up", "--system", "--xen", "a"}, "--system boots Debian's kernel, without --xen"},
		{[]string{"lab", "up", "--system", "--kernel", "built", "a"}, "--system boots Debian's kernel"},
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
	// Input above a frame's 16 MiB and output above Run's 8 MiB stream
	// through.
	big := strings.Repeat("0123456789abcdef", 20<<16) // 20 MiB
	if out, stderr, err := klasy(big, "lab", "exec", "--stdin", name, "--", "wc", "-c"); err != nil || strings.TrimSpace(out) != fmt.Sprint(len(big)) {
		t.Errorf("lab exec --stdin of 20 MiB into wc -c: %q, %v %s", out, err, stderr)
	}
	if out, stderr, err := klasy("", "lab", "exec", name, "--", "head", "-c", fmt.Sprint(12<<20), "/dev/zero"); err != nil || len(out) != 12<<20 {
		t.Errorf("lab exec of 12 MiB of output: %d bytes, %v %s", len(out), err, stderr)
	}
	checkExecSignals(t, agent, name)
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
	if err := json.Unmarshal([]byte(out), &st); err != nil || st.Name != name || st.State != "running" || st.ConsoleLog == "" || st.MuxPID == 0 {
		t.Errorf("lab status --json: %q (%v); want it running, with a mux", out, err)
	}
	if out, _, err := klasy("", "lab", "status", name); err != nil || !strings.Contains(out, "MUX") || !strings.Contains(out, fmt.Sprint(st.MuxPID)) {
		t.Errorf("lab status: %q, %v; want a MUX column with pid %d", out, err, st.MuxPID)
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

// checkExecSignals runs the real binary's lab exec --stdin with a stdin
// that gives nothing (an idle terminal) and sends it SIGINT, then SIGTERM:
// it must stop at once, exit 130 and 143 as a shell does, say so in one
// line, and the command in the guest must be gone.
func checkExecSignals(t *testing.T, klasy, name string) {
	for _, tt := range []struct {
		sig  syscall.Signal
		code int
		word string
	}{{syscall.SIGINT, 130, "SIGINT"}, {syscall.SIGTERM, 143, "SIGTERM"}} {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		pidFile := fmt.Sprintf("/tmp/exec-%d.pid", tt.sig)
		cmd := exec.Command(klasy, "lab", "exec", "--stdin", name, "--", "sh", "-c", "echo $$ >"+pidFile+"; exec cat")
		var stderr bytes.Buffer
		cmd.Stdin, cmd.Stderr = r, &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		r.Close()
		var guestPID string
		for deadline := time.Now().Add(30 * time.Second); guestPID == "" && time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			out, _ := exec.Command(klasy, "lab", "exec", name, "--", "cat", pidFile).Output()
			guestPID = strings.TrimSpace(string(out))
		}
		start := time.Now()
		cmd.Process.Signal(tt.sig)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
			t.Errorf("lab exec still ran 5s after %s", tt.word)
		}
		took := time.Since(start)
		w.Close()
		msg := strings.TrimSpace(stderr.String())
		if code := cmd.ProcessState.ExitCode(); code != tt.code || strings.Contains(msg, "\n") || !strings.Contains(msg, "interrupted by "+tt.word) {
			t.Errorf("lab exec after %s: exit %d, stderr %q; want exit %d and one line saying so", tt.word, code, msg, tt.code)
		}
		t.Logf("lab exec stopped %v after %s", took.Round(time.Millisecond), tt.word)
		if guestPID == "" {
			t.Errorf("the command of lab exec did not start in the guest")
			continue
		}
		// The cancel reaches the guest with the connection's end.
		var alive []byte
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			alive, _ = exec.Command(klasy, "lab", "exec", name, "--", "sh", "-c", "kill -0 "+guestPID+" 2>/dev/null && echo alive").Output()
			if len(alive) == 0 {
				break
			}
		}
		if len(alive) != 0 {
			t.Errorf("the guest's command (pid %s) still runs after lab exec was stopped by %s", guestPID, tt.word)
		}
	}
}
