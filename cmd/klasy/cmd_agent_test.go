package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/klasy/klasy/agent"
	"github.com/klasy/klasy/agent/wire"
)

// TestAgentHelperProcess is not a test: it is `klasy` itself when the
// test binary re-executes itself with KLASY_AGENT_HELPER set.
func TestAgentHelperProcess(t *testing.T) {
	if os.Getenv("KLASY_AGENT_HELPER") == "" {
		return
	}
	args := os.Args
	for i, a := range args {
		if a == "--" {
			args = args[i+1:]
			break
		}
	}
	err := run(&stdio{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}, args)
	if err != nil {
		fmt.Fprintf(os.Stderr, "klasy: %v\n", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func klasyProcess(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, os.Args[0], append([]string{"-test.run=^TestAgentHelperProcess$", "--"}, args...)...)
	cmd.Env = append(os.Environ(), "KLASY_AGENT_HELPER=1")
	return cmd
}

// openPTY returns the master of a new pty and its slave's path: the
// stand-in for the guest's /dev/ttyS1 on the host.
func openPTY(t *testing.T) (*os.File, string) {
	fd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	return os.NewFile(uintptr(fd), "/dev/ptmx"), fmt.Sprintf("/dev/pts/%d", n)
}

// The klasy agent command on a pty: it puts the line in raw mode itself,
// answers, refuses Run without --allow-run, and exits cleanly on SIGTERM.
func TestAgentCommandOnPTY(t *testing.T) {
	for _, allowRun := range []bool{false, true} {
		t.Run(fmt.Sprintf("allow-run=%v", allowRun), func(t *testing.T) {
			master, slave := openPTY(t)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			args := []string{"agent", "--device", slave}
			if allowRun {
				args = append(args, "--allow-run")
			}
			cmd := klasyProcess(ctx, args...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			c := agent.NewClient(master)
			defer c.Close()
			// Bytes sent before the agent opens the line are lost: retry.
			deadline := time.Now().Add(20 * time.Second)
			for {
				pctx, pcancel := context.WithTimeout(ctx, 300*time.Millisecond)
				err := c.Ping(pctx)
				pcancel()
				if err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("agent never answered: %v; its stderr:\n%s", err, stderr.String())
				}
			}
			res, err := c.Run(ctx, []string{"echo", "hello"}, nil)
			if allowRun {
				if err != nil || string(res.Stdout) != "hello\n" {
					t.Errorf("Run = %q, %v", res.Stdout, err)
				}
			} else if !errors.Is(err, wire.ErrRunDisabled) {
				t.Errorf("Run without --allow-run = %v, want ErrRunDisabled", err)
			}
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if err := cmd.Wait(); err != nil {
				t.Errorf("agent exited with %v after SIGTERM; stderr:\n%s", err, stderr.String())
			}
			if !strings.Contains(stderr.String(), "serving on "+slave) {
				t.Errorf("agent did not say where it serves; stderr:\n%s", stderr.String())
			}
		})
	}
}

func TestAgentCommandErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"agent", "--device", "/no/such/tty"}, "opening /no/such/tty: no such file or directory"},
		{[]string{"agent", "--device", "/etc/passwd"}, "opening /etc/passwd: not a character device"},
		{[]string{"agent", "--bogus"}, "flag provided but not defined: -bogus"},
		{[]string{"agent", "extra"}, `unexpected argument "extra"`},
	}
	for _, tt := range tests {
		err := run(&stdio{Out: &bytes.Buffer{}, Err: &bytes.Buffer{}}, tt.args)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("klasy %s = %v, want %q", strings.Join(tt.args, " "), err, tt.want)
		}
	}
}
