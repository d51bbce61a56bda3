package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/klasy/klasy/agent/wire"
)

// randomBytes returns n bytes that do not compress.
func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.NewChaCha8([32]byte{byte(n)}).Read(b)
	return b
}

// Input and output larger than a frame (and than Run's limits) stream
// through; stdout and stderr stay apart; the exit status comes back.
func TestExecStreamsBothWays(t *testing.T) {
	c := pipeClient(t, ServerOptions{AllowRun: true})
	ctx := testCtx(t)
	in := randomBytes(wire.MaxPayload + 4<<20)
	var out, errb bytes.Buffer
	code, err := c.Exec(ctx, []string{"sh", "-c", "cat; echo done >&2; exit 5"}, bytes.NewReader(in), &out, &errb)
	if err != nil || code != 5 {
		t.Fatalf("Exec = %d, %v; want exit 5", code, err)
	}
	if !bytes.Equal(out.Bytes(), in) || errb.String() != "done\n" {
		t.Errorf("Exec echoed %d of %d bytes intact: %v; stderr %q", out.Len(), len(in), bytes.Equal(out.Bytes(), in), errb.String())
	}

	out.Reset()
	n := int64(2*maxRunOutput + 1)
	code, err = c.Exec(ctx, []string{"head", "-c", strconv.FormatInt(n, 10), "/dev/zero"}, nil, &out, io.Discard)
	if err != nil || code != 0 || int64(out.Len()) != n {
		t.Errorf("Exec(head -c %d) = %d bytes, exit %d, %v", n, out.Len(), code, err)
	}

	// Without stdin the command reads /dev/null.
	out.Reset()
	if code, err := c.Exec(ctx, []string{"wc", "-c"}, nil, &out, io.Discard); err != nil || code != 0 || strings.TrimSpace(out.String()) != "0" {
		t.Errorf("Exec(wc -c) without stdin = %q, %d, %v", out.String(), code, err)
	}
	if code, err := c.Exec(ctx, []string{"sh", "-c", "kill -TERM $$"}, nil, io.Discard, io.Discard); err != nil || code != 128+int(syscall.SIGTERM) {
		t.Errorf("Exec(kill self) = %d, %v; want %d", code, err, 128+int(syscall.SIGTERM))
	}
	if _, err := c.Exec(ctx, []string{"/no/such/program"}, nil, io.Discard, io.Discard); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Exec(missing program) = %v, want os.ErrNotExist", err)
	}
}

func TestExecRefusedWithoutAllowRun(t *testing.T) {
	c := pipeClient(t, ServerOptions{})
	if _, err := c.Exec(testCtx(t), []string{"true"}, nil, io.Discard, io.Discard); !errors.Is(err, wire.ErrRunDisabled) {
		t.Fatalf("Exec = %v, want ErrRunDisabled", err)
	}
}

// endless is a stdin that never ends, counting what was read from it.
type endless struct{ n atomic.Int64 }

func (e *endless) Read(p []byte) (int, error) {
	e.n.Add(int64(len(p)))
	return len(p), nil
}

// A command that does not read its endless input: the client reads only
// its window ahead, and the command's exit ends the exec.
func TestExecStdinIsFlowControlled(t *testing.T) {
	c := pipeClient(t, ServerOptions{AllowRun: true})
	in := &endless{}
	start := time.Now()
	res := make(chan error, 1)
	go func() {
		code, err := c.Exec(testCtx(t), []string{"sleep", "2"}, in, io.Discard, io.Discard)
		if err == nil && code != 0 {
			err = fmt.Errorf("exit status %d", code)
		}
		res <- err
	}()
	time.Sleep(time.Second)
	// The window, one chunk in the pipe, one in the agent's write, one
	// being read.
	if read, max := in.n.Load(), int64(stdinWindow+3)*stdinChunk; read > max {
		t.Errorf("read %d bytes of stdin ahead of a command that reads none; want at most %d", read, max)
	}
	if err := <-res; err != nil {
		t.Fatalf("Exec(sleep 2) with endless stdin: %v", err)
	}
	if d := time.Since(start); d > 6*time.Second {
		t.Errorf("Exec returned after %v", d)
	}
	// All input, then exit: the input the command did not take is dropped.
	if code, err := c.Exec(testCtx(t), []string{"true"}, bytes.NewReader(randomBytes(4<<20)), io.Discard, io.Discard); err != nil || code != 0 {
		t.Errorf("Exec(true) with 4 MiB of stdin = %d, %v", code, err)
	}
}

// Canceling an exec whose stdin has nothing to give (an idle terminal)
// returns at once and kills the command.
func TestExecCanceledWhileStdinIdle(t *testing.T) {
	c := pipeClient(t, ServerOptions{AllowRun: true})
	pidFile := filepath.Join(t.TempDir(), "pid")
	r, w := io.Pipe()
	defer w.Close()
	ctx, cancel := context.WithCancel(context.Background())
	res := make(chan error, 1)
	go func() {
		_, err := c.Exec(ctx, []string{"sh", "-c", "echo $$ >" + pidFile + "; exec cat"}, r, io.Discard, io.Discard)
		res <- err
	}()
	pid := waitPidFile(t, pidFile)
	start := time.Now()
	cancel()
	select {
	case err := <-res:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Exec = %v, want context.Canceled", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Exec did not return within 2s of its cancel while stdin was idle")
	}
	t.Logf("returned %v after the cancel", time.Since(start))
	waitGone(t, pid)
}

func waitPidFile(t *testing.T, path string) int {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		b, err := os.ReadFile(path)
		if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && perr == nil {
			return pid
		}
	}
	t.Fatalf("the command did not write %s", path)
	return 0
}

// waitGone fails unless process pid ends within 3 s.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil || strings.Contains(string(stat), ") Z ") {
			return
		}
	}
	t.Errorf("process %d still runs", pid)
}

// blockingWriter blocks every Write until released.
type blockingWriter struct {
	release chan struct{}
	buf     bytes.Buffer
}

func (w *blockingWriter) Write(p []byte) (int, error) {
	<-w.release
	return w.buf.Write(p)
}

// A caller slow to take the output holds the command back, not the line:
// other requests go on meanwhile.
func TestExecSlowOutputDoesNotBlockOthers(t *testing.T) {
	c := pipeClient(t, ServerOptions{AllowRun: true})
	ctx := testCtx(t)
	w := &blockingWriter{release: make(chan struct{})}
	res := make(chan error, 1)
	const n = 8 << 20
	go func() {
		_, err := c.Exec(ctx, []string{"head", "-c", strconv.Itoa(n), "/dev/zero"}, nil, w, io.Discard)
		res <- err
	}()
	time.Sleep(200 * time.Millisecond)
	for i := 0; i < 3; i++ {
		if err := c.Ping(ctx); err != nil {
			t.Fatalf("Ping while an exec's output waits: %v", err)
		}
	}
	close(w.release)
	if err := <-res; err != nil || w.buf.Len() != n {
		t.Errorf("Exec = %d bytes, %v; want %d", w.buf.Len(), err, n)
	}
}

// An agent that predates Exec: without stdin, Exec falls back to Run;
// with stdin it says what to do.
func TestExecOnOldAgent(t *testing.T) {
	for _, withStdin := range []bool{false, true} {
		c, agent := fakeAgent(t)
		go func() {
			fr := wire.NewFrameReader(agent, 0)
			for {
				req, err := fr.ReadFrame()
				if err != nil {
					return
				}
				switch req.Type {
				case wire.MsgExec:
					agent.Write(mustFrame(t, wire.Frame{Type: wire.MsgError, ID: req.ID, Payload: wire.EncodeRemoteError(
						&wire.RemoteError{Op: "exec", Kind: wire.KindUnsupported, Msg: "this agent does not handle exec frames"})}))
				case wire.MsgRun:
					agent.Write(mustFrame(t, wire.Frame{Type: wire.MsgResult, ID: req.ID, Payload: wire.RunResult{Stdout: []byte("old\n"), ExitCode: 3}.Encode()}))
				}
			}
		}()
		var out bytes.Buffer
		var stdin io.Reader
		if withStdin {
			stdin = strings.NewReader("x")
		}
		code, err := c.Exec(testCtx(t), []string{"uname"}, stdin, &out, io.Discard)
		if withStdin {
			if !errors.Is(err, wire.ErrUnsupported) || !strings.Contains(err.Error(), "restart the lab") {
				t.Errorf("Exec with stdin on an old agent = %v, want ErrUnsupported saying to restart the lab", err)
			}
		} else if err != nil || code != 3 || out.String() != "old\n" {
			t.Errorf("Exec on an old agent = %q, %d, %v; want Run's answer", out.String(), code, err)
		}
	}
}

// The agent holds an exec's input to the window the client asked for and
// to chunks of maxStdinChunk; a client that sends more is refused.
func TestServerBoundsExecStdin(t *testing.T) {
	tests := []struct {
		name   string
		chunks int
		size   int
		want   string
	}{
		{"oversized chunk", 1, maxStdinChunk + 1, "limit"},
		{"past the window", wire.MaxWindow + 8, maxStdinChunk, "more stdin chunks than its window"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, s := net.Pipe()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go Serve(ctx, s, ServerOptions{AllowRun: true})
			defer c.Close()
			go func() {
				c.Write(mustFrame(t, wire.Frame{Type: wire.MsgExec, ID: 9, Payload: wire.ExecRequest{Argv: []string{"sleep", "10"}, Stdin: true, Window: 1, StdinWindow: 1}.Encode()}))
				chunk := mustFrame(t, wire.Frame{Type: wire.MsgStdin, ID: 9, Payload: make([]byte, tt.size)})
				for i := 0; i < tt.chunks; i++ {
					if _, err := c.Write(chunk); err != nil {
						return
					}
				}
			}()
			fr := wire.NewFrameReader(c, 0)
			for {
				f, err := fr.ReadFrame()
				if err != nil {
					t.Fatalf("reading the answer: %v", err)
				}
				if f.Type == wire.MsgStdinAck {
					continue
				}
				re, _ := wire.DecodeRemoteError(f.Payload)
				if f.Type != wire.MsgError || re == nil || re.Kind != wire.KindBadRequest || !strings.Contains(re.Msg, tt.want) {
					t.Fatalf("answer %s %v, want a bad-request error saying %q", f.Type, re, tt.want)
				}
				return
			}
		})
	}
}
