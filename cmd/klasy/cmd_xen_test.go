package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klasy/klasy/agent"
	"github.com/klasy/klasy/domains"
	"github.com/klasy/klasy/internal/testenv"
	"github.com/klasy/klasy/lab"
	"github.com/klasy/klasy/lab/xenlab"
)

func TestXenUsageErrors(t *testing.T) {
	t.Setenv("KLASY_LAB_DIR", t.TempDir())
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("ca: {cert: a}\ncontroller: {cert: b, key: c}\ndomains:\n  - {name: d, address: 'h:1', kernel: x}\n"), 0o644)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"lab", "up", "--xen", "--lan", "x"}, "--lan does not apply to a Xen lab"},
		{[]string{"lab", "up", "--xen", "--kernel", "built", "x"}, "--kernel does not apply to a Xen lab"},
		{[]string{"lab", "up", "--xen", "--domus", "9", "x"}, "--domus 9: want 1..8"},
		{[]string{"lab", "up", "--domus", "2", "x"}, "--domus and --plugin go with --xen"},
		{[]string{"lab", "up", "--xen", "--mem", "70000", "x"}, "--mem 70000"},
		{[]string{"agent", "--listen", ":0"}, "--listen needs --tls-ca, --tls-cert and --tls-key"},
		{[]string{"agent", "--tls-ca", "a"}, "go with --listen"},
		{[]string{"agent", "--listen", ":0", "--device", "/dev/ttyS1"}, "exclude each other"},
		{[]string{"agent", "--listen", "127.0.0.1:0", "--tls-ca", "/no/ca", "--tls-cert", "/no/c", "--tls-key", "/no/k"}, "/no/c"},
		{[]string{"agent", "keys"}, "keys takes one domains file"},
		{[]string{"agent", "keys", filepath.Join(dir, "none.yaml")}, "none.yaml"},
		{[]string{"agent", "keys", bad}, bad + `:4: unknown key "kernel"`},
	}
	for _, tt := range tests {
		err := run(&stdio{In: strings.NewReader(""), Out: &bytes.Buffer{}, Err: &bytes.Buffer{}}, tt.args)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("klasy %s: error %v, want it to contain %q", strings.Join(tt.args, " "), err, tt.want)
		}
	}
}

// TestAgentListen runs `klasy agent keys` and `klasy agent --listen` as a
// user would: the controller of the domains file is served, a client
// without a certificate is refused and logged to --log, and commands are
// refused without --allow-run.
func TestAgentListen(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	dir := t.TempDir()
	path := filepath.Join(dir, "domains.yaml")
	text := fmt.Sprintf("ca:\n  cert: k/ca.crt\n  key: k/ca.key\ncontroller:\n  cert: k/c.crt\n  key: k/c.key\ndomains:\n  - name: a\n    address: %s\n    cert: k/a.crt\n    key: k/a.key\n", addr)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run(&stdio{Out: &out, Err: &bytes.Buffer{}}, []string{"agent", "keys", path}); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out.String(), "wrote "); n != 6 {
		t.Errorf("agent keys wrote %d files, want 6:\n%s", n, out.String())
	}
	var errb bytes.Buffer
	if err := run(&stdio{Out: &bytes.Buffer{}, Err: &errb}, []string{"agent", "keys", path}); err != nil || !strings.Contains(errb.String(), "has all its keys already") {
		t.Errorf("second agent keys: %v, %q", err, errb.String())
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	logFile := filepath.Join(dir, "agent.log")
	cmd := klasyProcess(ctx, "agent", "--listen", addr, "--tls-ca", filepath.Join(dir, "k/ca.crt"),
		"--tls-cert", filepath.Join(dir, "k/a.crt"), "--tls-key", filepath.Join(dir, "k/a.key"), "--log", logFile)
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	sc := bufio.NewScanner(stderr)
	if !sc.Scan() || !strings.Contains(sc.Text(), "serving on "+addr+" with mutual TLS (run refused)") {
		t.Fatalf("agent said %q", sc.Text())
	}
	go func() {
		for sc.Scan() {
		}
	}()
	f, err := domains.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	c, err := f.Dial(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.ReadFile(ctx, path); err != nil {
		t.Errorf("the controller's ReadFile: %v", err)
	}
	if _, err := c.Run(ctx, []string{"true"}, nil); err == nil || !strings.Contains(err.Error(), "disabled") {
		t.Errorf("Run on an agent without --allow-run: %v", err)
	}
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	local := conn.LocalAddr().String()
	bad := agent.NewClient(conn)
	if err := bad.Ping(ctx); err == nil {
		t.Error("a plain TCP client was answered")
	}
	bad.Close()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		log, _ := os.ReadFile(logFile)
		if strings.Contains(string(log), "refused a connection from "+local) && strings.Contains(string(log), "refused to run a command") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the agent's --log does not show the refusals:\n%s", log)
		}
	}
}

// TestXenLabCommand drives a Xen lab through the command line: up --xen,
// exec in Domain 0 and in the guest, status, down.
func TestXenLabCommand(t *testing.T) {
	_, err := exec.LookPath("qemu-system-x86_64")
	testenv.Need(t, "lab", err)
	_, err = lab.FindKernel(lab.Debian)
	testenv.Need(t, "lab", err)
	_, err = xenlab.FindImages()
	testenv.Need(t, "xen-lab", err)
	plugin, _ := filepath.Abs("../../gcc-patches/klasy.so")
	if _, err := os.Stat(plugin); err != nil {
		testenv.Need(t, "plugin", fmt.Errorf("no klasy GCC plugin (make plugin): %w", err))
	}
	agentBin := filepath.Join(t.TempDir(), "klasy")
	build := exec.Command("go", "build", "-o", agentBin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the static agent: %v\n%s", err, out)
	}
	t.Setenv("KLASY_LAB_AGENT", agentBin)
	name := fmt.Sprintf("t%d-xcli", os.Getpid())
	klasy := func(args ...string) (string, string, error) {
		var out, errb bytes.Buffer
		err := run(&stdio{In: strings.NewReader(""), Out: &out, Err: &errb}, args)
		return out.String(), errb.String(), err
	}
	out, progress, err := klasy("lab", "up", "--xen", "--plugin", plugin, name)
	if err != nil {
		t.Fatalf("lab up --xen: %v\n%s", err, progress)
	}
	t.Cleanup(func() { klasy("lab", "down", name) })
	for _, w := range []string{"lab " + name + " is up: Xen", "dom0", "domU1", "domains file"} {
		if !strings.Contains(out, w) {
			t.Errorf("lab up --xen printed %q, without %q", out, w)
		}
	}
	if !strings.Contains(progress, "domU1: agent answered over mutual TLS") {
		t.Errorf("lab up --xen progress:\n%s", progress)
	}
	if out, stderr, err := klasy("lab", "exec", name, "--", "xl", "list"); err != nil || !strings.Contains(out, "domU1") {
		t.Errorf("lab exec (Domain 0) xl list: %q %q %v", out, stderr, err)
	}
	if out, stderr, err := klasy("lab", "exec", "--domain", "domU1", name, "--", "cat", "/proc/sys/kernel/hostname"); err != nil || strings.TrimSpace(out) != "domU1" {
		t.Errorf("lab exec --domain domU1 hostname: %q %q %v", out, stderr, err)
	}
	if _, _, err := klasy("lab", "exec", "--domain", "domU7", name, "--", "true"); err == nil || !strings.Contains(err.Error(), `no domain "domU7"`) {
		t.Errorf("lab exec --domain domU7: %v", err)
	}
	out, _, err = klasy("lab", "status", "--json", name)
	if err != nil {
		t.Fatal(err)
	}
	var st lab.Status
	if err := json.Unmarshal([]byte(out), &st); err != nil || st.State != "running" || !strings.HasPrefix(st.Xen, "4.17") || len(st.Domains) != 2 {
		t.Fatalf("lab status --json: %q (%v)", out, err)
	}
	if _, err := domains.Load(st.DomainsFile); err != nil {
		t.Errorf("the lab's domains file: %v", err)
	}
	if out, _, err := klasy("lab", "status", name); err != nil || !strings.Contains(out, "domU1") || !strings.Contains(out, "mutual TLS") {
		t.Errorf("lab status: %q, %v", out, err)
	}
	if out, _, err := klasy("agent", "keys", st.DomainsFile); err != nil || out != "" {
		t.Errorf("agent keys on the lab's domains file wrote %q, %v; want nothing (it has them)", out, err)
	}
	if _, progress, err := klasy("lab", "down", name); err != nil || !strings.Contains(progress, "powered off") {
		t.Errorf("lab down: %v\n%s", err, progress)
	}
	if out, _, _ := klasy("lab", "status", "--json"); strings.Contains(out, name) {
		t.Errorf("lab still listed after down: %s", out)
	}
}
