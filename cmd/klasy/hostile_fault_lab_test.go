package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klasy/klasy/lab"
	"github.com/klasy/klasy/lab/labboot"
)

// Faulting advice (issue 21, "faulting advice"): advice that reads
// through a NULL pointer oopses the kernel inside a kprobe handler.
// status and trace must say so, naming the advice's aspect line; the
// same read through READ_CHECKED reads zero and the kernel stays well.
// The oops leaves the lab's kernel unsure, so the lab is this test's own.
func TestFaultingAdviceReported(t *testing.T) {
	l := labboot.Boot(t, lab.Config{Name: labboot.Name("fault"), Kernel: lab.Debian})
	bin := klasyBinary(t)
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		src := "<aspect>\n  <advice>\n    <pointcut>execution(ksys_sync)</pointcut>\n    <before>\n" + body + "    </before>\n  </advice>\n</aspect>\n"
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	run := func(args ...string) (string, string, error) { return runKlasyBin(bin, args...) }
	must := func(args ...string) (string, string) {
		t.Helper()
		out, stderr, err := run(args...)
		if err != nil {
			t.Fatalf("klasy %q: %v: %s", args, err, stderr)
		}
		return out, stderr
	}

	// The checked read of NULL and of a user address: zeros, and no
	// report.
	checked := write("checked.klasy", "      STORE_DATA2(READ_CHECKED((int *)NULL), READ_CHECKED((long *)4096));\n")
	must("weave", "--lab", l.Name(), checked)
	run("lab", "exec", l.Name(), "--", "sync")
	out, stderr := must("trace", "--lab", l.Name())
	if !strings.Contains(out, "ksys_sync") || !strings.Contains(out, " 0 0") {
		t.Errorf("trace of READ_CHECKED(NULL), READ_CHECKED(4096) = %q, want a record of ksys_sync with values 0 0", out)
	}
	if _, stderr = must("status", "--lab", l.Name()); strings.Contains(stderr, "reported") || strings.Contains(stderr, "tainted") {
		t.Errorf("status after checked reads warns: %q", stderr)
	}
	must("unweave", "--lab", l.Name(), "checked")

	// The unchecked read: an oops in the advice.
	null := write("nullref.klasy", "      int x = 1;\n\n      x += *(volatile int *)0;\n      STORE_DATA(x);\n")
	must("weave", "--lab", l.Name(), null)
	run("lab", "exec", l.Name(), "--", "sync")
	for _, cmd := range [][]string{{"status", "--lab", l.Name()}, {"trace", "--lab", l.Name()}} {
		_, stderr := must(cmd...)
		t.Logf("klasy %s: %s", cmd[0], stderr)
		for _, want := range []string{"tainted D (died: an oops or BUG)", "reported \"BUG: kernel NULL pointer dereference", "in advice of aspect nullref at " + null + ":7"} {
			if !strings.Contains(stderr, want) {
				t.Errorf("klasy %s after an oops in advice: stderr %q, want %q", cmd[0], stderr, want)
			}
		}
	}
	// unweave says so before it unloads (which may crash the kernel:
	// its result is not checked).
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	unweave := exec.CommandContext(ctx, bin, "unweave", "--lab", l.Name(), "--all")
	unweave.Env = labKlasyEnv()
	var errb strings.Builder
	unweave.Stderr = &errb
	unweave.Run()
	if stderr = errb.String(); !strings.Contains(stderr, "tainted D") || !strings.Contains(stderr, "unweaving may crash it") {
		t.Errorf("unweave --all after an oops in advice: stderr %q, want the taint and that unweaving may crash the kernel", stderr)
	}
}

// TestHungLabStatus: advice in an endless loop stops the lab's one CPU;
// klasy lab status must call the lab hung, with the kernel's own reason
// (its soft lockup or RCU stall report), not "running".
func TestHungLabStatus(t *testing.T) {
	l := labboot.Boot(t, lab.Config{Name: labboot.Name("hung"), Kernel: lab.Debian})
	bin := klasyBinary(t)
	p := filepath.Join(t.TempDir(), "spin.klasy")
	src := "<aspect>\n  <advice>\n    <pointcut>execution(ksys_sync)</pointcut>\n    <before>\n      for (;;)\n        cpu_relax();\n    </before>\n  </advice>\n</aspect>\n"
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	env := labKlasyEnv()
	if _, stderr, err := runKlasyBin(bin, "weave", "--lab", l.Name(), p); err != nil {
		t.Fatalf("weave: %v: %s", err, stderr)
	}
	// Never returns: the lab is down at the end of the test.
	sync := exec.Command(bin, "lab", "exec", l.Name(), "--", "sync")
	sync.Env = env
	if err := sync.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sync.Process.Kill(); sync.Wait() })
	var stdout, stderr string
	for deadline := time.Now().Add(4 * time.Minute); ; time.Sleep(5 * time.Second) {
		stdout, stderr, _ = runKlasyBin(bin, "lab", "status", l.Name())
		if f := strings.Fields(lastLine(stdout)); len(f) > 1 && f[1] == "hung" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("lab status of a lab spinning in advice: %q, stderr %q; want it hung", stdout, stderr)
		}
	}
	t.Logf("lab status: %s%s", stdout, stderr)
	if !strings.Contains(stderr, "soft lockup") && !strings.Contains(stderr, "stall") {
		t.Errorf("lab status stderr %q: want the kernel's soft lockup or RCU stall report as the reason", stderr)
	}
	// Every other command says so too, not only that a ping timed out.
	_, stderr, err := runKlasyBin(bin, "status", "--lab", l.Name())
	t.Logf("status: %v: %s", err, stderr)
	if err == nil || !strings.Contains(stderr, "looks hung") || !strings.Contains(stderr, "soft lockup") && !strings.Contains(stderr, "stall") {
		t.Errorf("status of a hung lab: %v, stderr %q; want it to fail saying the lab looks hung, with the console's report", err, stderr)
	}
}

// TestTraceDomainsFaultReported: trace --domains says what trace on one
// kernel says of a faulting advice, after the domain it happened in: an
// aspect woven into two labs by one weave oopses in one of them only
// (the command that runs its join point runs there), and trace of both
// names that domain, the taint and the advice's aspect line, and nothing
// of the other.
func TestTraceDomainsFaultReported(t *testing.T) {
	if testing.Short() {
		t.Skip("boots two labs")
	}
	labs := make([]*lab.Lab, 2)
	var wg sync.WaitGroup
	for i, name := range []string{"fdsick", "fdwell"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			labs[i] = labboot.Boot(t, lab.Config{Name: labboot.Name(name), Kernel: lab.Debian})
		}()
	}
	wg.Wait()
	if t.Failed() || t.Skipped() {
		return // a lab that is missing skipped the test from its goroutine
	}
	bin := klasyBinary(t)
	dir := t.TempDir()
	// TestFaultingAdviceReported's unchecked read of NULL.
	null := filepath.Join(dir, "nullref.klasy")
	src := "<aspect>\n  <advice>\n    <pointcut>execution(ksys_sync)</pointcut>\n    <before>\n      int x = 1;\n\n      x += *(volatile int *)0;\n      STORE_DATA(x);\n    </before>\n  </advice>\n</aspect>\n"
	if err := os.WriteFile(null, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	dfile := filepath.Join(dir, "labs.yaml")
	text := "domains:\n  - {name: sick, lab: " + labs[0].Name() + "}\n  - {name: well, lab: " + labs[1].Name() + "}\n"
	if err := os.WriteFile(dfile, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, stderr, err := runKlasyBin(bin, "weave", "--domains", dfile, null); err != nil {
		t.Fatalf("weave --domains: %v: %s", err, stderr)
	}
	runKlasyBin(bin, "lab", "exec", labs[0].Name(), "--", "sync")
	_, stderr, err := runKlasyBin(bin, "trace", "--domains", dfile)
	if err != nil {
		t.Fatalf("trace --domains after an oops in one domain: %v: %s", err, stderr)
	}
	t.Logf("klasy trace --domains: %s", stderr)
	for _, want := range []string{
		"warning: domain sick: lab " + labs[0].Name() + " is tainted D (died: an oops or BUG)",
		"warning: domain sick: lab " + labs[0].Name() + " reported \"BUG: kernel NULL pointer dereference",
		"in advice of aspect nullref at " + null + ":7",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("trace --domains stderr %q, want %q", stderr, want)
		}
	}
	if strings.Contains(stderr, "domain well:") {
		t.Errorf("trace --domains warns of the domain whose kernel is well: %q", stderr)
	}
}
