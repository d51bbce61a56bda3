package agent

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// The lab mux under a flood of idle connections (issue 21,
// "descriptors": it ended at about 20,000 idle connects, and a running
// trace --follow with it). The floods come from other processes, each
// this test binary again (muxFlooder), as a hostile local program would.

func init() {
	if v := os.Getenv("KLASY_TEST_MUX_FLOOD"); v != "" {
		os.Exit(muxFlooder(v))
	}
	if v := os.Getenv("KLASY_TEST_MUX_NOFILE"); v != "" {
		os.Exit(muxUnderLimit(v))
	}
}

// muxFlooder connects N times to the mux at SOCK ("SOCK N"), sends
// nothing, prints how many connections the mux closed within 300 ms, and
// holds the others until its standard input closes.
func muxFlooder(arg string) int {
	var sock string
	var n int
	if _, err := fmt.Sscan(arg, &sock, &n); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	var conns []net.Conn
	for range n {
		c, err := net.Dial("unix", sock)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		conns = append(conns, c)
	}
	var closed atomic.Int32
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
			if _, err := c.Read(make([]byte, 1)); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
				closed.Add(1)
			}
		}()
	}
	wg.Wait()
	fmt.Println("closed", closed.Load())
	io.Copy(io.Discard, os.Stdin)
	return 0
}

// flood starts a muxFlooder of n connections to sock and returns how many
// the mux closed at once; the flooder holds the rest until the test ends.
func flood(t *testing.T, sock string, n int) int {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("KLASY_TEST_MUX_FLOOD=%s %d", sock, n))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	var closed int
	if _, serr := fmt.Sscanf(line, "closed %d", &closed); err != nil || serr != nil {
		t.Fatalf("flooder: %q, %v", line, err)
	}
	return closed
}

// TestMuxPerClientLimit: one process past MaxPendingPerPeer connections
// that have sent nothing has its further ones closed at once, said in
// the mux's log once, while another process's client is served.
func TestMuxPerClientLimit(t *testing.T) {
	a, b := net.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() { Serve(ctx, b, ServerOptions{}); close(served) }()
	defer func() { cancel(); <-served }()
	sock := t.TempDir() + "/mux.sock"
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var log syncBuffer
	muxDone := make(chan error, 1)
	go func() { muxDone <- Mux(ctx, a, ln, &log) }()
	defer func() { cancel(); <-muxDone }()

	const extra = 8
	if closed := flood(t, sock, MaxPendingPerPeer+extra); closed != extra {
		t.Errorf("%d of %d idle connections of one process closed at once, want the %d past %d", closed, MaxPendingPerPeer+extra, extra, MaxPendingPerPeer)
	}
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(log.String(), "refusing connections of pid"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the mux's log does not say it refused the flood:\n%s", log.String())
		}
	}
	if n := strings.Count(log.String(), "refusing connections of"); n != 1 {
		t.Errorf("the refusal logged %d times, want once:\n%s", n, log.String())
	}
	conn, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	c := NewClient(conn)
	defer c.Close()
	if err := c.Ping(testCtx(t)); err != nil {
		t.Errorf("a client of this process during the flood: %v", err)
	}
}

// TestMuxOutOfDescriptors: a mux whose descriptors idle connections of
// many processes take keeps streaming to the client it serves (a trace
// --follow) and serves a new one once the idle ones have timed out. The
// mux runs in a process of its own under a limit of 64 descriptors.
func TestMuxOutOfDescriptors(t *testing.T) {
	dir := t.TempDir()
	sock := dir + "/mux.sock"
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	lf, err := ln.(*net.UnixListener).File()
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "KLASY_TEST_MUX_NOFILE=64")
	cmd.ExtraFiles = []*os.File{lf} // fd 3
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var log syncBuffer
	cmd.Stderr = &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		stdin.Close()
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("the mux exited: %v; its log:\n%s", err, log.String())
			}
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			t.Errorf("the mux did not exit after its stdin closed")
		}
	}()
	ctx, cancelCtx := context.WithTimeout(context.Background(), time.Minute)
	defer cancelCtx()
	dial := func() (*Client, error) {
		conn, err := net.Dial("unix", sock)
		if err != nil {
			return nil, err
		}
		return NewClient(conn), nil
	}

	// The client being served: a stream of a FIFO, as trace --follow.
	fifo, w := heldFIFO(t)
	follow, err := dial()
	if err != nil {
		t.Fatal(err)
	}
	defer follow.Close()
	chunks := make(chan string, 16)
	streamDone := make(chan error, 1)
	go func() {
		streamDone <- follow.Stream(ctx, fifo, func(b []byte) error { chunks <- string(b); return nil })
	}()
	got := func(want string) {
		t.Helper()
		if _, err := w.WriteString(want); err != nil {
			t.Fatal(err)
		}
		select {
		case c := <-chunks:
			if c != want {
				t.Errorf("streamed %q, want %q", c, want)
			}
		case err := <-streamDone:
			t.Fatalf("the stream ended: %v; the mux's log:\n%s", err, log.String())
		case <-time.After(20 * time.Second):
			t.Fatalf("nothing streamed within 20 s; the mux's log:\n%s", log.String())
		}
	}
	got("before\n")

	// 8 processes of 10 idle connections each, each under the limit
	// per client: together more than the mux has descriptors left. Those
	// it accepted it closes after muxHelloTimeout, then takes the rest.
	for range 8 {
		flood(t, sock, 10)
	}
	got("during\n")
	fresh, err := dial()
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := fresh.Ping(pctx); err != nil {
		t.Fatalf("a new client during the flood: %v; the mux's log:\n%s", err, log.String())
	}
	got("after\n")
	l := log.String()
	if !strings.Contains(l, "too many open files") || !strings.Contains(l, "accepting clients again") || !strings.Contains(l, "sent no request within") {
		t.Errorf("the mux's log does not say it ran out of descriptors, closed idle connections and recovered:\n%s", l)
	}
}

// muxUnderLimit is TestMuxOutOfDescriptors's mux: a real agent behind
// Mux on the listener at fd 3, with at most NOFILE descriptors, until
// its standard input closes; the mux's log on standard error.
func muxUnderLimit(arg string) int {
	var n uint64
	fmt.Sscan(arg, &n)
	lim := syscall.Rlimit{Cur: n, Max: n}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ln, err := net.FileListener(os.NewFile(3, "listener"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	a, b := net.Pipe()
	go Serve(ctx, b, ServerOptions{})
	if err := Mux(ctx, a, ln, os.Stderr); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "Mux:", err)
		return 1
	}
	return 0
}
