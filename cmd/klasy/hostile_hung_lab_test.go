package main

import (
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
	env := append(os.Environ(), "KLASY_CACHE="+cachedir.Root())
	weave := exec.Command(bin, "weave", "--lab", l.Name(), p)
	weave.Env = env
	if out, err := weave.CombinedOutput(); err != nil {
		t.Fatalf("weave: %v: %s", err, out)
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
		cmd := exec.Command(bin, "lab", "status", l.Name())
		cmd.Env = env
		var out, errb strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errb
		cmd.Run()
		stdout, stderr = out.String(), errb.String()
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
}
