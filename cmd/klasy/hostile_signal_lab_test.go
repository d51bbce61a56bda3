package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/klasy/klasy/internal/cachedir"
	"github.com/klasy/klasy/lab"
	"github.com/klasy/klasy/lab/labboot"
	"github.com/klasy/klasy/weaver/runtime"
)

// Signals while an aspect's module loads (issue 21, "signals during
// load"): init_module registers its 2,000 hooks for tens of seconds under
// QEMU and no signal stops it. The real klasy binary is signalled the
// moment the kernel lists the module as Loading; once klasy (and, after
// kill -9, the next klasy) has exited, the kernel must be what klasy said:
// no module of klasy and the kprobes of before.
func TestWeaveInterruptedDuringLoad(t *testing.T) {
	l := labboot.Boot(t, lab.Config{Name: labboot.Name("sigload"), Kernel: lab.Debian})
	bin := klasyBinary(t)
	dir := t.TempDir()
	aspect := filepath.Join(dir, "many_blocks.klasy")
	// Every basic block of fs/namei.c: about 2,000 kprobes.
	src := "<aspect>\n  <advice>\n    <pointcut>block(%) AND within_file(fs/namei.c)</pointcut>\n    <before></before>\n  </advice>\n</aspect>\n"
	if err := os.WriteFile(aspect, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	const mod = "klasy_a_many_blocks"
	guest := func(cmd string) string {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		res, err := l.Client().Run(ctx, []string{"sh", "-c", cmd}, nil)
		if err != nil {
			t.Fatalf("lab: %s: %v", cmd, err)
		}
		return string(res.Stdout)
	}
	ours := func() string { return guest("grep klasy /proc/modules; true") }
	kprobes := func() int { return strings.Count(guest("cat /sys/kernel/debug/kprobes/list"), "\n") }
	before := kprobes()
	env := labKlasyEnv()
	run := func(args ...string) (string, string, error) { return runKlasyBin(bin, args...) }
	clean := func(t *testing.T) {
		t.Helper()
		if m := ours(); m != "" {
			t.Errorf("modules of klasy left in the kernel: %q", m)
		}
		if n := kprobes(); n != before {
			t.Errorf("%d kprobes registered, %d before the weave", n, before)
		}
	}
	// Build (and cache) the advice module once, so that each case's
	// weave gets to the load at once.
	// Its load takes tens of seconds on a busy host: progress is
	// reported every 10 s meanwhile.
	if stdout, stderr, err := run("weave", "--lab", l.Name(), aspect); err != nil {
		t.Fatalf("weave: %v: %s", err, stderr)
	} else if load := loadTime(t, stdout); load >= 12*time.Second &&
		!regexp.MustCompile(`klasy: `+mod+`: \d+ of \d+ hooks registered in lab `).MatchString(stderr) {
		t.Errorf("weave of ~2,000 hooks loaded in %v and reported no progress of the load: %q", load, stderr)
	}
	if _, stderr, err := run("unweave", "--lab", l.Name(), "--all"); err != nil {
		t.Fatalf("unweave: %v: %s", err, stderr)
	}
	clean(t)

	// weaveUntilLoading starts a weave and returns once the kernel lists
	// its module as Loading.
	weaveUntilLoading := func(t *testing.T) (*exec.Cmd, *syncBuffer) {
		cmd := exec.Command(bin, "weave", "--lab", l.Name(), aspect)
		cmd.Env = env
		stderr := &syncBuffer{}
		cmd.Stderr = stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
			if guest("grep '^"+mod+" .*Loading' /proc/modules; true") != "" {
				return cmd, stderr
			}
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("%s never showed as Loading; stderr: %s", mod, stderr.String())
			}
		}
	}
	wait := func(t *testing.T, cmd *exec.Cmd, d time.Duration) {
		t.Helper()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err == nil {
				t.Errorf("interrupted weave: exit 0")
			}
		case <-time.After(d):
			cmd.Process.Kill()
			<-done
			t.Fatalf("interrupted weave still running after %v", d)
		}
	}

	t.Run("SIGINT", func(t *testing.T) {
		cmd, stderr := weaveUntilLoading(t)
		cmd.Process.Signal(os.Interrupt)
		wait(t, cmd, 10*time.Minute)
		msg := stderr.String()
		for _, want := range []string{"waiting for the load to end", "finished loading and was unwoven again; nothing was woven"} {
			if !strings.Contains(msg, want) {
				t.Errorf("stderr = %q, want it to say %q", msg, want)
			}
		}
		clean(t)
	})

	t.Run("SIGTERM-twice", func(t *testing.T) {
		cmd, stderr := weaveUntilLoading(t)
		cmd.Process.Signal(syscall.SIGTERM)
		for deadline := time.Now().Add(time.Minute); !strings.Contains(stderr.String(), "waiting for the load"); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("no word of waiting after SIGTERM: %q", stderr.String())
			}
		}
		cmd.Process.Signal(syscall.SIGTERM)
		wait(t, cmd, 30*time.Second)
		msg := stderr.String()
		// What it leaves: the module still loading (or, if the load
		// ended meanwhile, live), and how to remove it.
		if !strings.Contains(msg, "stopped waiting: "+mod) || !strings.Contains(msg, "unweave --all") {
			t.Errorf("stderr = %q, want the module's state and 'unweave --all'", msg)
		}
		if _, stderr, err := run("unweave", "--lab", l.Name(), "--all"); err != nil {
			t.Fatalf("unweave --all after the abandoned wait: %v: %s", err, stderr)
		}
		clean(t)
	})

	t.Run("SIGKILL", func(t *testing.T) {
		cmd, _ := weaveUntilLoading(t)
		cmd.Process.Kill()
		cmd.Wait()
		_, stderr, err := run("status", "--lab", l.Name())
		if err != nil {
			t.Fatalf("status after kill -9: %v: %s", err, stderr)
		}
		if !strings.Contains(stderr, mod+" is still loading") && !strings.Contains(stderr, mod+" is live, from a weave") {
			t.Errorf("status after kill -9 during the load: stderr %q, want it to name %s and its state", stderr, mod)
		}
		if _, stderr, err := run("unweave", "--lab", l.Name(), "--all"); err != nil {
			t.Fatalf("unweave --all after kill -9: %v: %s", err, stderr)
		}
		clean(t)
	})
}

// labKlasyEnv is the environment klasy runs in for a lab test: the
// shared cache, which holds the lab's kernel, image and built runtime.
func labKlasyEnv() []string { return append(os.Environ(), "KLASY_CACHE="+cachedir.Root()) }

// runKlasyBin runs klasy (bin) to its end, within 5 minutes, and returns
// what it printed.
func runKlasyBin(bin string, args ...string) (stdout, stderr string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = labKlasyEnv()
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	return out.String(), errb.String(), err
}

// loadTime is the load's time in a weave's report ("load 12.1 s,").
func loadTime(t *testing.T, report string) time.Duration {
	t.Helper()
	m := regexp.MustCompile(`load ([0-9.]+) (s|ms|µs),`).FindStringSubmatch(report)
	if m == nil {
		t.Fatalf("no load time in the weave's report:\n%s", report)
	}
	d, err := time.ParseDuration(m[1] + map[string]string{"s": "s", "ms": "ms", "µs": "us"}[m[2]])
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestWeaveInterruptedDuringRuntimeLoad: a signal while the runtime
// module itself loads, on the first weave into a kernel (issue 21,
// "signals during load"). Its init allocates the trace buffer, 64 MiB a
// CPU here: about 0.7 s of the guest's two CPUs under TCG, in which the
// kernel lists it and no signal stops it. Once klasy has exited the
// kernel must be what it said: nothing of klasy after SIGINT, and after
// kill -9 a status that names the runtime left and an unweave --all
// that removes it.
func TestWeaveInterruptedDuringRuntimeLoad(t *testing.T) {
	l := labboot.Boot(t, lab.Config{Name: labboot.Name("sigrt"), Kernel: lab.Debian, CPUs: 2, MemMB: 1024})
	bin := klasyBinary(t)
	aspect := filepath.Join(t.TempDir(), "sync_nop.klasy")
	src := "<aspect>\n  <advice>\n    <pointcut>execution(ksys_sync)</pointcut>\n    <before></before>\n  </advice>\n</aspect>\n"
	if err := os.WriteFile(aspect, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	guest := func(ctx context.Context, cmd string) (string, error) {
		res, err := l.Client().Run(ctx, []string{"sh", "-c", cmd}, nil)
		if err != nil {
			return "", err
		}
		return string(res.Stdout), nil
	}
	ours := func() string {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		out, err := guest(ctx, "grep klasy /proc/modules; true")
		if err != nil {
			t.Fatalf("lab: %v", err)
		}
		return out
	}
	run := func(args ...string) (string, string, error) { return runKlasyBin(bin, args...) }
	// Build (and cache) the runtime and the advice module, so that each
	// case's weave gets to the runtime's load at once.
	if _, stderr, err := run("weave", "--lab", l.Name(), aspect); err != nil {
		t.Fatalf("weave: %v: %s", err, stderr)
	}
	if _, stderr, err := run("unweave", "--lab", l.Name(), "--all"); err != nil {
		t.Fatalf("unweave: %v: %s", err, stderr)
	}
	if m := ours(); m != "" {
		t.Fatalf("modules of klasy left after unweave --all: %q", m)
	}

	// weaveSignalled starts a weave with the largest trace buffer and
	// sends sig the moment the guest lists the runtime, loading. It
	// returns the weave's exit error and standard error once it exited.
	weaveSignalled := func(t *testing.T, sig os.Signal) (error, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		seen := make(chan error, 1)
		// A loop of shell builtins: it forks nothing, so it sees the
		// runtime early in its load.
		go func() {
			_, err := guest(ctx, "while :; do while read -r n rest; do [ \"$n\" = klasy_runtime ] && exit 0; done < /proc/modules; done")
			seen <- err
		}()
		time.Sleep(300 * time.Millisecond)
		cmd := exec.Command(bin, "weave", "--lab", l.Name(), "--buffer-kb", "65536", aspect)
		cmd.Env = labKlasyEnv()
		stderr := &syncBuffer{}
		cmd.Stderr = stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if err := <-seen; err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("watching for the runtime in the guest: %v; weave's stderr: %s", err, stderr.String())
		}
		cmd.Process.Signal(sig)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			return err, stderr.String()
		case <-time.After(5 * time.Minute):
			cmd.Process.Kill()
			<-done
			t.Fatalf("interrupted weave still running after 5 minutes; stderr: %s", stderr.String())
		}
		return nil, ""
	}

	t.Run("SIGINT", func(t *testing.T) {
		// The signal may land just after the runtime's load ended (the
		// advice module's load is interrupted then): up to 3 tries.
		for try := 1; ; try++ {
			err, msg := weaveSignalled(t, os.Interrupt)
			t.Logf("try %d: %v: %s", try, err, msg)
			if err == nil {
				t.Fatalf("interrupted weave: exit 0")
			}
			if !strings.Contains(msg, "nothing was woven") {
				t.Errorf("stderr = %q, want it to say that nothing was woven", msg)
			}
			if m := ours(); m != "" {
				t.Fatalf("klasy said %q and left in the kernel: %q", lastLine(msg), m)
			}
			if strings.Contains(msg, "loads "+runtime.ModuleName) {
				break
			}
			if try == 3 {
				t.Fatalf("3 signals missed the runtime's load")
			}
		}
	})

	t.Run("SIGKILL", func(t *testing.T) {
		weaveSignalled(t, syscall.SIGKILL)
		_, stderr, err := run("status", "--lab", l.Name())
		if err != nil {
			t.Fatalf("status after kill -9: %v: %s", err, stderr)
		}
		t.Logf("status after kill -9: %s", stderr)
		if m := ours(); m != "" && !strings.Contains(stderr, runtime.ModuleName+" is ") {
			t.Errorf("status after kill -9 during the runtime's load: stderr %q, want it to name %s left in the kernel (%q)", stderr, runtime.ModuleName, m)
		}
		if _, stderr, err := run("unweave", "--lab", l.Name(), "--all"); err != nil {
			t.Fatalf("unweave --all after kill -9: %v: %s", err, stderr)
		}
		if m := ours(); m != "" {
			t.Errorf("modules of klasy left after unweave --all: %q", m)
		}
	})
}
