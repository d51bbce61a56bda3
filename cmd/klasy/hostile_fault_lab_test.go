package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klasy/klasy/internal/cachedir"
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
	run := func(args ...string) (string, string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = append(os.Environ(), "KLASY_CACHE="+cachedir.Root())
		var out, errb strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		return out.String(), errb.String(), err
	}
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
}
