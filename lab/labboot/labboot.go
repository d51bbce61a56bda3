// Package labboot boots lab kernels for tests and builds what tests run
// in them: the static klasy agent and static test programs.
//
// Tests that need a lab skip without one when run by hand and fail under
// make test (internal/testenv).
package labboot

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/klasy/klasy/internal/testenv"
	"github.com/klasy/klasy/lab"
)

var (
	agentOnce sync.Once
	agentDir  string
	agentPath string
	agentErr  error
)

// KernelState is a shell command printing what a weave must leave as it
// found it: the names of the loaded modules, sorted, the kprobes list
// and the functions ftrace calls out from (an aspect's ftrace_ops; none
// in a kernel without ftrace). Tests run it in a guest (sh -c) before
// weaving and after unweaving and compare the outputs.
const KernelState = "cut -d' ' -f1 /proc/modules | sort; cat /sys/kernel/debug/kprobes/list; cat /sys/kernel/debug/tracing/enabled_functions 2>/dev/null || true"

// moduleRoot is the directory of go.mod, found from this file.
func moduleRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Agent builds this tree's klasy as a static binary once per test
// process, so a lab runs the agent code under test. Cleanup removes it
// when the process's tests are done (call it from TestMain).
func Agent(t testing.TB) string {
	t.Helper()
	agentOnce.Do(func() {
		agentDir, agentErr = os.MkdirTemp("", "klasy-labtest-agent")
		if agentErr != nil {
			return
		}
		agentPath = filepath.Join(agentDir, "klasy")
		cmd := exec.Command("go", "build", "-o", agentPath, "./cmd/klasy")
		cmd.Dir = moduleRoot()
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			agentErr = fmt.Errorf("building the static klasy agent: %v\n%s", err, out)
		}
	})
	if agentErr != nil {
		t.Fatal(agentErr)
	}
	return agentPath
}

// Cleanup removes what Agent built.
func Cleanup() {
	if agentDir != "" {
		os.RemoveAll(agentDir)
	}
}

// Need skips (or fails under make test) without QEMU or the kernel
// flavor, and returns the kernel.
func Need(t testing.TB, flavor string) lab.Kernel {
	t.Helper()
	_, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		err = fmt.Errorf("qemu-system-x86_64 not installed (make lab-setup)")
	}
	testenv.Need(t, "lab", err)
	k, err := lab.FindKernel(flavor)
	testenv.Need(t, "lab", err)
	return k
}

// Name is a lab name unique to this test process.
func Name(suffix string) string { return fmt.Sprintf("t%d-%s", os.Getpid(), suffix) }

// Boot starts a lab of cfg (Name and Agent filled in when empty) and
// takes it down when the test ends.
func Boot(t testing.TB, cfg lab.Config) *lab.Lab {
	t.Helper()
	k := Need(t, cfg.Kernel)
	if cfg.System {
		_, err := lab.FindSystemImage(k)
		testenv.Need(t, "lab", err)
	}
	if cfg.Name == "" {
		cfg.Name = Name(t.Name())
	}
	if cfg.Agent == "" {
		cfg.Agent = Agent(t)
	}
	cfg.DieWithCaller = true
	wait := 3 * time.Minute
	if cfg.BootTimeout+time.Minute > wait {
		wait = cfg.BootTimeout + time.Minute
	}
	if cfg.System && wait < 7*time.Minute { // its default boot timeout is 6m
		wait = 7 * time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	l, err := lab.Up(ctx, cfg)
	if err != nil {
		t.Fatalf("booting lab %s: %v", cfg.Name, err)
	}
	t.Cleanup(func() { l.Down(context.Background()) })
	return l
}

// StaticProgram compiles the C file src with gcc -static and returns the
// binary.
func StaticProgram(t testing.TB, src string) []byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), filepath.Base(src)+".bin")
	if b, err := exec.Command("gcc", "-static", "-O2", "-Wall", "-Werror", "-o", out, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc -static %s: %v\n%s (static linking needs libc6-dev)", src, err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Install writes an executable into the lab at path.
func Install(t testing.TB, l *lab.Lab, path string, data []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := l.Client().WriteFile(ctx, path, data, 0o755); err != nil {
		t.Fatalf("installing %s in lab %s: %v", path, l.Name(), err)
	}
}
