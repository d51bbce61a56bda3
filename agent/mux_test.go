package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klasy/klasy/agent/wire"
)

// muxed starts a mux on a unix socket in front of agentConn and returns
// a function dialing it, and one waiting up to 5 s for Mux to return.
func muxed(t *testing.T, agentConn io.ReadWriteCloser) (dial func() net.Conn, wait func() (error, bool)) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "mux.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	finished := make(chan struct{})
	var muxErr error
	var log syncBuffer
	go func() { muxErr = Mux(ctx, agentConn, ln, &log); close(finished) }()
	wait = func() (error, bool) {
		select {
		case <-finished:
			return muxErr, true
		case <-time.After(5 * time.Second):
			return nil, false
		}
	}
	t.Cleanup(func() {
		cancel()
		if _, ok := wait(); !ok {
			t.Error("Mux did not return after its context ended")
		}
		if t.Failed() {
			t.Logf("mux log:\n%s", log.String())
		}
	})
	return func() net.Conn {
		conn, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		return conn
	}, wait
}

// muxedAgent is a real agent behind a mux.
func muxedAgent(t *testing.T) (newClient func() *Client, dial func() net.Conn) {
	a, b := net.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() { Serve(ctx, b, ServerOptions{AllowRun: true}); close(served) }()
	dial, _ = muxed(t, a)
	t.Cleanup(func() { cancel(); <-served })
	return func() *Client {
		c := NewClient(dial())
		t.Cleanup(func() { c.Close() })
		return c
	}, dial
}

// Eight clients at once, as eight klasy processes: long commands, a
// stream that never ends, short ones; a short one does not wait behind a
// long one.
func TestMuxServesClientsAtOnce(t *testing.T) {
	newClient, _ := muxedAgent(t)
	ctx := testCtx(t)
	fifo, w := heldFIFO(t)
	records := make(chan string, 4)
	sctx, stopStream := context.WithCancel(ctx)
	defer stopStream()
	streamDone := make(chan error, 1)
	go func() {
		streamDone <- newClient().Stream(sctx, fifo, func(b []byte) error { records <- string(b); return nil })
	}()

	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var out bytes.Buffer
			if code, err := newClient().Exec(ctx, []string{"sh", "-c", "sleep 2; echo long"}, nil, &out, io.Discard); err != nil || code != 0 || out.String() != "long\n" {
				errs <- fmt.Errorf("long exec %d: %q, %d, %v", i, out.String(), code, err)
			}
		}()
	}
	time.Sleep(300 * time.Millisecond) // the long ones run
	for i := 0; i < 3; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			var out bytes.Buffer
			code, err := newClient().Exec(ctx, []string{"echo", fmt.Sprint(i)}, nil, &out, io.Discard)
			if err != nil || code != 0 || out.String() != fmt.Sprintf("%d\n", i) {
				errs <- fmt.Errorf("short exec %d: %q, %d, %v", i, out.String(), code, err)
			}
			if d := time.Since(start); d > time.Second {
				errs <- fmt.Errorf("short exec %d took %v while long ones ran", i, d)
			}
		}()
	}
	w.Write([]byte("hit\n"))
	select {
	case r := <-records:
		if r != "hit\n" {
			t.Errorf("stream record %q", r)
		}
	case <-time.After(5 * time.Second):
		t.Error("the stream got nothing while execs ran")
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	stopStream()
	if err := <-streamDone; !errors.Is(err, context.Canceled) {
		t.Errorf("Stream = %v, want context.Canceled", err)
	}
}

// Two clients using the same request id each get their own answer.
func TestMuxKeepsClientsIDsApart(t *testing.T) {
	a, b := net.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go Serve(ctx, b, ServerOptions{AllowRun: true})
	dial, _ := muxed(t, a)
	conns := []net.Conn{dial(), dial()}
	for i, conn := range conns {
		defer conn.Close()
		run := wire.RunRequest{Argv: []string{"sh", "-c", fmt.Sprintf("sleep 0.%d; echo client%d", 3-i, i)}}
		conn.Write(mustFrame(t, wire.Frame{Type: wire.MsgRun, ID: 7, Payload: run.Encode()}))
	}
	for i, conn := range conns {
		f, err := wire.NewFrameReader(conn, 0).ReadFrame()
		if err != nil || f.ID != 7 || f.Type != wire.MsgResult {
			t.Fatalf("client %d: %s id %d, %v; want the result of its request 7", i, f.Type, f.ID, err)
		}
		res, err := wire.DecodeRunResult(f.Payload)
		if want := fmt.Sprintf("client%d\n", i); err != nil || string(res.Stdout) != want {
			t.Errorf("client %d got %q, %v; want %q", i, res.Stdout, err, want)
		}
	}
}

// A client that does not read its answers is dropped once it is too far
// behind, its requests canceled; others go on.
func TestMuxDropsClientThatDoesNotRead(t *testing.T) {
	defer func(max int) { muxQueueMax = max }(muxQueueMax)
	muxQueueMax = 1 << 20
	newClient, dial := muxedAgent(t)
	ctx := testCtx(t)
	stuck := newClient()
	w := &blockingWriter{release: make(chan struct{})}
	defer close(w.release)
	res := make(chan error, 1)
	go func() {
		_, err := stuck.Exec(ctx, []string{"head", "-c", "100000000", "/dev/zero"}, nil, w, io.Discard)
		res <- err
	}()
	// The client's acks stop (its writer blocks), so the agent sends
	// only a window ahead: the mux must not drop a client for that.
	time.Sleep(500 * time.Millisecond)
	if err := newClient().Ping(ctx); err != nil {
		t.Fatalf("Ping from another client: %v", err)
	}
	select {
	case err := <-res:
		t.Fatalf("a flow-controlled exec ended: %v", err)
	default:
	}
	// A client that sends requests and never reads their answers.
	big := filepath.Join(t.TempDir(), "big")
	if err := os.WriteFile(big, randomBytes(512<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	conn := dial()
	defer conn.Close()
	for id := uint32(1); id <= 8; id++ {
		conn.Write(mustFrame(t, wire.Frame{Type: wire.MsgReadFile, ID: id, Payload: wire.EncodeString(big)}))
	}
	time.Sleep(500 * time.Millisecond)
	// What the socket held before the mux gave up on it, then the end.
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := io.Copy(io.Discard, conn)
	if err != nil || n >= 8*512<<10 {
		t.Errorf("the client that did not read got %d bytes, %v; want it dropped (EOF) before all its answers", n, err)
	}
	if err := newClient().Ping(ctx); err != nil {
		t.Errorf("Ping from another client after one was dropped: %v", err)
	}
}

// A client that goes away without canceling has its requests canceled on
// the agent: the mux's own connection stays, so the agent hears of it.
func TestMuxCancelsWhatAGoneClientLeft(t *testing.T) {
	newClient, _ := muxedAgent(t)
	pidFile := filepath.Join(t.TempDir(), "pid")
	c := newClient()
	go c.Exec(context.Background(), []string{"sh", "-c", "echo $$ >" + pidFile + "; exec sleep 30"}, nil, io.Discard, io.Discard)
	pid := waitPidFile(t, pidFile)
	c.conn.Close() // as a klasy process killed by SIGKILL
	waitGone(t, pid)
	if err := newClient().Ping(testCtx(t)); err != nil {
		t.Errorf("Ping from another client afterwards: %v", err)
	}
}

// When the agent's line ends (QEMU exited), every client's request fails
// as a lost connection and Mux returns.
func TestMuxAgentGone(t *testing.T) {
	a, b := net.Pipe()
	dial, wait := muxed(t, a)
	c := NewClient(dial())
	defer c.Close()
	res := make(chan error, 1)
	go func() { res <- c.Ping(testCtx(t)) }()
	fr := wire.NewFrameReader(b, 0)
	readRequest(t, fr)
	b.Close()
	if err := <-res; !errors.Is(err, ErrConnLost) {
		t.Errorf("Ping when the agent went = %v, want ErrConnLost", err)
	}
	if err, ok := wait(); !ok {
		t.Error("Mux did not return when the agent's line ended")
	} else if err != nil {
		t.Errorf("Mux = %v, want nil when the agent closes the line", err)
	}
}

// A damaged answer from the agent fails the request it names (and only
// it); a damaged header fails every request in flight. Both are canceled
// on the agent.
func TestMuxDamagedAnswers(t *testing.T) {
	a, agentEnd := net.Pipe()
	dial, _ := muxed(t, a)
	c1, c2 := NewClient(dial()), NewClient(dial())
	defer c1.Close()
	defer c2.Close()
	fr := wire.NewFrameReader(agentEnd, 0)
	ping := func(c *Client) chan error {
		res := make(chan error, 1)
		go func() { res <- c.Ping(testCtx(t)) }()
		return res
	}
	// Payload damaged: only its request fails.
	r1, r2 := ping(c1), ping(c2)
	q1, q2 := readRequest(t, fr), readRequest(t, fr)
	bad := mustFrame(t, wire.Frame{Type: wire.MsgResult, ID: q1.ID, Payload: []byte("x")})
	bad[len(bad)-1] ^= 1
	go agentEnd.Write(bad)
	if f := readRequest(t, fr); f.Type != wire.MsgCancel || f.ID != q1.ID {
		t.Errorf("after a damaged answer the agent got %s id %d, want a cancel of id %d", f.Type, f.ID, q1.ID)
	}
	agentEnd.Write(mustFrame(t, wire.Frame{Type: wire.MsgResult, ID: q2.ID}))
	var failed, ok int
	for _, r := range []chan error{r1, r2} {
		if err := <-r; errors.Is(err, wire.ErrCorruptFrame) {
			failed++
		} else if err == nil {
			ok++
		} else {
			t.Errorf("Ping = %v", err)
		}
	}
	if failed != 1 || ok != 1 {
		t.Errorf("%d pings failed and %d answered, want one each", failed, ok)
	}

	// Header damaged: both fail.
	r1, r2 = ping(c1), ping(c2)
	readRequest(t, fr)
	readRequest(t, fr)
	bad = mustFrame(t, wire.Frame{Type: wire.MsgResult, ID: 1})
	bad[12] ^= 1
	go agentEnd.Write(bad)
	for i := 0; i < 2; i++ {
		if f := readRequest(t, fr); f.Type != wire.MsgCancel {
			t.Errorf("after a damaged header the agent got %s, want cancels", f.Type)
		}
	}
	for _, r := range []chan error{r1, r2} {
		if err := <-r; !errors.Is(err, wire.ErrCorruptFrame) || !strings.Contains(err.Error(), "damaged") {
			t.Errorf("Ping = %v, want a damaged-answer error", err)
		}
	}
}
