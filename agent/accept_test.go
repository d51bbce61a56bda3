package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// failingListener's Accept fails with EMFILE, as accept4 does when the
// process is out of descriptors, while fail is above 0.
type failingListener struct {
	net.Listener
	fail  atomic.Int32
	calls atomic.Int32
}

func (l *failingListener) Accept() (net.Conn, error) {
	l.calls.Add(1)
	if l.fail.Add(-1) >= 0 {
		return nil, &net.OpError{Op: "accept", Net: l.Addr().Network(), Addr: l.Addr(), Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

// TestAcceptRetryable: what an accept loop waits out, and what ends it.
func TestAcceptRetryable(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want bool
	}{
		{&net.OpError{Op: "accept", Err: os.NewSyscallError("accept4", syscall.EMFILE)}, true},
		{&net.OpError{Op: "accept", Err: os.NewSyscallError("accept4", syscall.ENFILE)}, true},
		{&net.OpError{Op: "accept", Err: os.NewSyscallError("accept4", syscall.ECONNABORTED)}, true},
		{fmt.Errorf("wrapped: %w", syscall.ENOBUFS), true},
		{net.ErrClosed, false},
		{&net.OpError{Op: "accept", Err: net.ErrClosed}, false},
		{&net.OpError{Op: "accept", Err: os.NewSyscallError("accept4", syscall.EINVAL)}, false},
		{errors.New("something else"), false},
	} {
		if got := retryable(tt.err); got != tt.want {
			t.Errorf("retryable(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

// TestMuxAcceptEMFILE: a mux whose Accept fails for want of descriptors
// (issue 21: the lab mux ended, and a trace --follow with it) keeps its
// clients and accepts new ones once descriptors are free again.
func TestMuxAcceptEMFILE(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "mux.sock")
	inner, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	ln := &failingListener{Listener: inner}
	a, b := net.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() { Serve(ctx, b, ServerOptions{AllowRun: true}); close(served) }()
	var log syncBuffer
	muxDone := make(chan error, 1)
	go func() { muxDone <- Mux(ctx, a, ln, &log) }()
	defer func() {
		cancel()
		<-served
		select {
		case <-muxDone:
		case <-time.After(5 * time.Second):
			t.Error("Mux did not return after its context ended")
		}
	}()
	dial := func() *Client {
		conn, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		c := NewClient(conn)
		t.Cleanup(func() { c.Close() })
		return c
	}
	tctx := testCtx(t)
	first := dial()
	if err := first.Ping(tctx); err != nil {
		t.Fatal(err)
	}
	// The mux is back in Accept: the next connection is accepted, and
	// the 8 Accepts after it fail.
	ln.fail.Store(8)
	second := dial()
	if err := second.Ping(tctx); err != nil {
		t.Fatal(err)
	}
	for ln.calls.Load() < 3+8 {
		select {
		case err := <-muxDone:
			t.Fatalf("Mux returned on EMFILE: %v\nlog:\n%s", err, log.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	third := dial()
	for i, c := range []*Client{first, second, third} {
		if err := c.Ping(tctx); err != nil {
			t.Errorf("client %d after the failed accepts: %v\nlog:\n%s", i+1, err, log.String())
		}
	}
	l := log.String()
	if strings.Count(l, "too many open files") != 1 || !strings.Contains(l, "accepting clients again, after 8 failed accepts") {
		t.Errorf("the mux's log does not say once that accepting failed and again when it recovered:\n%s", l)
	}
}
