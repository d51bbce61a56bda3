package lab

// The lab's mux: a process of its own that owns the agent's socket (QEMU
// serves one connection on it) and shares it among every klasy process
// that uses the lab (agent.Mux). Up starts it once the guest says the
// agent starts, and it lives as long as QEMU: it exits when QEMU closes
// the socket, when a check every half second finds QEMU gone, or on
// SIGTERM. It writes its own pidfile (mux.pid, locked while it runs), so
// it is never left running without a record, and Get starts a new one
// if it has died.
//
// It runs the executable that started it (os.Executable), so the mux
// always speaks the protocol of the klasy that booted the lab, test
// binaries included: this package's init recognises the call.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/klasy/klasy/agent"
)

const (
	// muxArg0 is the mux's argv[0]: ps shows "klasy-lab-mux DIR".
	muxArg0 = "klasy-lab-mux"
	// muxEnv set to 1 in the environment, with argv[0] muxArg0, makes
	// any program linking this package run the mux instead.
	muxEnv = "KLASY_LAB_MUX"
)

func init() {
	if len(os.Args) > 0 && os.Args[0] == muxArg0 && os.Getenv(muxEnv) == "1" {
		os.Exit(muxMain(os.Args[1:]))
	}
}

// muxMain is the mux process: muxArg0 DIR AGENT-SOCKET QEMU-PID.
func muxMain(args []string) int {
	logf := func(format string, a ...any) {
		fmt.Fprintf(os.Stderr, "%s klasy mux: %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, a...))
	}
	if len(args) != 3 {
		logf("usage: %s DIR AGENT-SOCKET QEMU-PID", muxArg0)
		return 2
	}
	dir, sock := args[0], args[1]
	qemu, err := strconv.Atoi(args[2])
	if err != nil || qemu <= 0 {
		logf("bad QEMU pid %q", args[2])
		return 2
	}
	pidf, err := os.OpenFile(filepath.Join(dir, "mux.pid"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		logf("%v", err)
		return 1
	}
	// A mux that was killed holds the lock until its exit has closed its
	// files, a moment after its command line is gone (which is what
	// muxPID goes by): wait that moment.
	for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		err := syscall.Flock(int(pidf.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			logf("another mux serves %s (%v)", dir, err)
			return 1
		}
	}
	pid := strconv.Itoa(os.Getpid())
	if err := pidf.Truncate(0); err == nil {
		pidf.WriteAt([]byte(pid+"\n"), 0)
	}
	defer func() {
		os.Remove(pidf.Name())
		pidf.Close()
	}()
	signal.Ignore(syscall.SIGHUP, syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()

	// QEMU gone, the mux goes.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if !isQEMUOf(qemu, dir) {
					cancel(fmt.Errorf("QEMU (pid %d) is gone", qemu))
					return
				}
			}
		}
	}()

	var conn net.Conn
	for deadline := time.Now().Add(30 * time.Second); ; {
		conn, err = net.DialTimeout("unix", sock, 2*time.Second)
		if err == nil {
			break
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			logf("connecting to the agent's socket %s: %v (%v)", sock, err, context.Cause(ctx))
			return 1
		}
		time.Sleep(100 * time.Millisecond)
	}
	// A mux killed by SIGKILL leaves its socket behind; holding the
	// pidfile's lock, this one is the only mux of the lab.
	os.Remove(filepath.Join(dir, "mux.sock"))
	ln, err := net.Listen("unix", filepath.Join(dir, "mux.sock"))
	if err != nil {
		conn.Close()
		logf("%v", err)
		return 1
	}
	os.Chmod(filepath.Join(dir, "mux.sock"), 0o600)
	logf("pid %s serving %s for QEMU pid %d", pid, sock, qemu)
	err = agent.Mux(ctx, conn, ln, os.Stderr)
	switch {
	case context.Cause(ctx) != nil && !errors.Is(context.Cause(ctx), context.Canceled):
		logf("stopped: %v", context.Cause(ctx))
	case ctx.Err() != nil:
		logf("stopped by a signal")
	case err != nil:
		logf("stopped: %v", err)
	default:
		logf("stopped: QEMU closed the agent's socket")
	}
	return 0
}

// muxPID returns the pid of the mux serving the lab in dir, 0 if none
// runs.
func muxPID(dir string) int {
	b, err := os.ReadFile(filepath.Join(dir, "mux.pid"))
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0
	}
	if a := procArgs(pid); len(a) >= 2 && a[0] == muxArg0 && a[1] == dir {
		return pid
	}
	return 0
}

// startMux starts the lab's mux unless one runs, and returns once it
// accepts clients. Callers hold lockRoot, so two do not race.
func (r record) startMux() error {
	if muxPID(r.dir()) > 0 {
		return nil
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("starting the mux of lab %s: %w", r.Name, err)
	}
	log, err := os.OpenFile(r.muxLog(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("starting the mux of lab %s: %w", r.Name, err)
	}
	cmd := &exec.Cmd{
		Path: exe,
		Args: []string{muxArg0, r.dir(), r.agentConn(), strconv.Itoa(r.PID)},
		Env:  append(os.Environ(), muxEnv+"=1"),
		// Like QEMU, its own session: it outlives the command that
		// started it and ignores the terminal's signals.
		Stdout: log, Stderr: log,
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	err = cmd.Start()
	log.Close()
	if err != nil {
		return fmt.Errorf("starting the mux of lab %s: %w", r.Name, err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		select {
		case <-exited:
			return fmt.Errorf("the mux of lab %s exited at start: %s (log: %s)", r.Name, consoleTail(r.muxLog(), 1), r.muxLog())
		default:
		}
		if conn, err := net.Dial("unix", r.muxSocket()); err == nil {
			conn.Close()
			return nil
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			return fmt.Errorf("the mux of lab %s did not start listening within 30s (log: %s)", r.Name, r.muxLog())
		}
	}
}

// stopMux waits up to grace for the mux of the lab in dir to exit by
// itself (it does when QEMU goes), then stops it: SIGTERM, then SIGKILL.
func stopMux(dir string, grace time.Duration) {
	gone := func(d time.Duration) bool {
		for deadline := time.Now().Add(d); ; time.Sleep(20 * time.Millisecond) {
			if muxPID(dir) == 0 {
				return true
			}
			if time.Now().After(deadline) {
				return false
			}
		}
	}
	pid := muxPID(dir)
	if pid == 0 || gone(grace) {
		return
	}
	syscall.Kill(pid, syscall.SIGTERM)
	if gone(2 * time.Second) {
		return
	}
	if muxPID(dir) == pid {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	gone(2 * time.Second)
}
