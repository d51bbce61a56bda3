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
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/klasy/klasy/agent/wire"
)

// serve starts an agent on one end of conn pair and a client on the
// other; both stop at the end of the test and Serve must return cleanly.
func serve(t *testing.T, opts ServerOptions, clientConn, serverConn io.ReadWriteCloser) *Client {
	t.Helper()
	return serveTolerating(t, opts, clientConn, serverConn, nil)
}

// serveTolerating is serve where Serve may also return an error ok
// accepts.
func serveTolerating(t *testing.T, opts ServerOptions, clientConn, serverConn io.ReadWriteCloser, ok func(error) bool) *Client {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var log syncBuffer
	if opts.Log == nil {
		opts.Log = &log
	}
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, serverConn, opts) }()
	c := NewClient(clientConn)
	t.Cleanup(func() {
		c.Close()
		cancel()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, syscall.EIO) && (ok == nil || !ok(err)) {
				t.Errorf("Serve returned %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Error("Serve did not return after the client closed")
		}
		if t.Failed() {
			t.Logf("agent log:\n%s", log.String())
		}
	})
	return c
}

func pipeClient(t *testing.T, opts ServerOptions) *Client {
	a, b := net.Pipe()
	return serve(t, opts, a, b)
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestPingAndRun(t *testing.T) {
	c := pipeClient(t, ServerOptions{AllowRun: true})
	ctx := testCtx(t)
	if err := c.Ping(ctx); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	res, err := c.Run(ctx, []string{"sh", "-c", "cat; echo to-stderr >&2; exit 3"}, []byte("from stdin\n"))
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if string(res.Stdout) != "from stdin\n" || string(res.Stderr) != "to-stderr\n" || res.ExitCode != 3 {
		t.Errorf("Run = stdout %q stderr %q exit %d; want %q %q 3", res.Stdout, res.Stderr, res.ExitCode, "from stdin\n", "to-stderr\n")
	}
	res, err = c.Run(ctx, []string{"sh", "-c", "kill -TERM $$"}, nil)
	if err != nil || res.ExitCode != 128+int(syscall.SIGTERM) {
		t.Errorf("Run(kill self) = exit %d, %v; want %d", res.ExitCode, err, 128+int(syscall.SIGTERM))
	}
	_, err = c.Run(ctx, []string{"/no/such/program"}, nil)
	if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "/no/such/program") {
		t.Errorf("Run(missing program) = %v, want a not-exist error naming it", err)
	}
	_, err = c.Run(ctx, []string{"no-such-program-in-path"}, nil)
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Run(missing program in PATH) = %v, want os.ErrNotExist", err)
	}
}

func TestRunRefusedWithoutAllowRun(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	c := pipeClient(t, ServerOptions{AllowRun: false})
	_, err := c.Run(testCtx(t), []string{"touch", marker}, nil)
	if !errors.Is(err, wire.ErrRunDisabled) || !strings.Contains(err.Error(), "--allow-run") {
		t.Fatalf("Run = %v, want ErrRunDisabled mentioning --allow-run", err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the refused command ran")
	}
}

func TestRunCanceledKillsCommand(t *testing.T) {
	c := pipeClient(t, ServerOptions{AllowRun: true})
	dir := t.TempDir()
	marker := filepath.Join(dir, "survived")
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	// The touch runs in a child of the shell: canceling must kill the
	// whole process group, not just the shell.
	_, err := c.Run(ctx, []string{"sh", "-c", "(sleep 2; touch " + marker + ") & wait"}, nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Run = %v, want context.DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 1500*time.Millisecond {
		t.Errorf("Run returned after %v, want soon after the deadline", d)
	}
	time.Sleep(2500 * time.Millisecond)
	if _, err := os.Stat(marker); err == nil {
		t.Error("canceled command was not killed")
	}
	// The connection still works.
	if err := c.Ping(testCtx(t)); err != nil {
		t.Fatalf("Ping after cancel: %v", err)
	}
}

func TestWriteAndReadFile(t *testing.T) {
	c := pipeClient(t, ServerOptions{})
	ctx := testCtx(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "f.bin")
	data := make([]byte, 3<<20)
	for i := range data {
		data[i] = byte(i * 7)
	}
	if err := c.WriteFile(ctx, path, data, 0o640); err != nil {
		t.Fatalf("WriteFile: %v", err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o640 {
		t.Fatalf("written file: %v, mode %v; want 0640", err, fi.Mode())
	}
	got, err := c.ReadFile(ctx, path)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("ReadFile = %d bytes, %v; want the %d bytes written", len(got), err, len(data))
	}
	// Overwrite truncates and applies the new mode.
	if err := c.WriteFile(ctx, path, []byte("short"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); string(got) != "short" {
		t.Errorf("after overwrite the file holds %q", got)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("after overwrite mode %v, want 0600", fi.Mode())
	}
	// procfs reports size 0 but has content.
	got, err = c.ReadFile(ctx, "/proc/self/status")
	if err != nil || !bytes.Contains(got, []byte("Name:")) {
		t.Errorf("ReadFile(/proc/self/status) = %q, %v", got, err)
	}
}

func TestFileErrorsComeBackTyped(t *testing.T) {
	c := pipeClient(t, ServerOptions{})
	ctx := testCtx(t)
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing")
	_, err := c.ReadFile(ctx, missing)
	var re *wire.RemoteError
	if !errors.Is(err, os.ErrNotExist) || !errors.Is(err, syscall.ENOENT) || !errors.As(err, &re) {
		t.Fatalf("ReadFile(missing) = %v, want a *RemoteError matching os.ErrNotExist", err)
	}
	if re.Kind != wire.KindErrno || !strings.Contains(re.Msg, missing) || re.Op != "read file" {
		t.Errorf("RemoteError = %+v, want the guest's message naming %s", re, missing)
	}
	err = c.WriteFile(ctx, filepath.Join(dir, "no", "dir"), []byte("x"), 0o644)
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("WriteFile(in missing dir) = %v, want os.ErrNotExist", err)
	}
	_, err = c.ReadFile(ctx, dir)
	if !errors.Is(err, syscall.EISDIR) {
		t.Errorf("ReadFile(dir) = %v, want EISDIR", err)
	}
	err = c.WriteFile(ctx, filepath.Join(dir, "f"), nil, os.ModeSetuid|0o755)
	if !errors.Is(err, wire.ErrBadRequest) {
		t.Errorf("WriteFile(setuid) = %v, want ErrBadRequest", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "f")); err == nil {
		t.Error("a refused WriteFile created the file")
	}
}

func TestModules(t *testing.T) {
	opts := ServerOptions{procModules: "testdata/proc-modules"}
	c := pipeClient(t, opts)
	got, err := c.Modules(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	want := []wire.Module{{Name: "klasy_trivial", Size: 16384, Refs: 0}, {Name: "e1000", Size: 163840, Refs: 0}, {Name: "virtio_ring", Size: 45056, Refs: 3}, {Name: "crc32c_generic", Size: 16384, Refs: -1}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Modules = %v, want %v", got, want)
	}

	c = pipeClient(t, ServerOptions{procModules: filepath.Join(t.TempDir(), "none")})
	if _, err := c.Modules(testCtx(t)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Modules without /proc/modules = %v, want os.ErrNotExist", err)
	}
}

func TestParseProcModulesRejectsGarbage(t *testing.T) {
	for _, in := range []string{"e1000\n", "e1000 big 0 - Live 0x0\n", "e1000 1 x - Live 0x0\n"} {
		if ms, err := ParseProcModules([]byte(in)); err == nil {
			t.Errorf("ParseProcModules(%q) = %v, want an error", in, ms)
		}
	}
}

func TestStreamFile(t *testing.T) {
	c := pipeClient(t, ServerOptions{})
	ctx := testCtx(t)
	path := filepath.Join(t.TempDir(), "big")
	data := bytes.Repeat([]byte("0123456789abcdef"), 100000) // 1.6 MB: 25 chunks, above the window
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	var got []byte
	chunks := 0
	err := c.Stream(ctx, path, func(b []byte) error {
		got = append(got, b...)
		chunks++
		time.Sleep(time.Millisecond) // a slow consumer: the window must hold the agent back
		return nil
	})
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("Stream = %d bytes in %d chunks, %v; want %d bytes", len(got), chunks, err, len(data))
	}
	err = c.Stream(ctx, path+".missing", func([]byte) error { return nil })
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Stream(missing) = %v, want os.ErrNotExist", err)
	}
}

// A stream blocked on a device that produces nothing must not hold up
// other requests, and ends cleanly when fn or ctx says so.
func TestStreamDoesNotBlockOtherRequests(t *testing.T) {
	c := pipeClient(t, ServerOptions{AllowRun: true})
	ctx := testCtx(t)
	fifo, w := heldFIFO(t)

	records := make(chan string, 10)
	stop := errors.New("enough")
	streamErr := make(chan error, 1)
	go func() {
		streamErr <- c.Stream(ctx, fifo, func(b []byte) error {
			records <- string(b)
			if string(b) == "last\n" {
				return stop
			}
			return nil
		})
	}()
	if _, err := w.Write([]byte("first\n")); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-records:
		if r != "first\n" {
			t.Fatalf("first record = %q", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no record streamed")
	}
	// The stream is now blocked in read(2) in the agent.
	res, err := c.Run(ctx, []string{"echo", "not blocked"}, nil)
	if err != nil || string(res.Stdout) != "not blocked\n" {
		t.Fatalf("Run during a stream = %q, %v", res.Stdout, err)
	}
	if _, err := w.Write([]byte("last\n")); err != nil {
		t.Fatal(err)
	}
	if err := <-streamErr; err != stop {
		t.Fatalf("Stream = %v, want fn's error", err)
	}

	// Canceling ctx ends a stream that gets nothing.
	sctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	err = c.Stream(sctx, fifo, func([]byte) error { return nil })
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Stream with deadline = %v, want DeadlineExceeded", err)
	}
	if err := c.Ping(ctx); err != nil {
		t.Fatalf("Ping after streams: %v", err)
	}
}

// heldFIFO makes a FIFO and holds its write end open, so a stream of it
// blocks waiting for records until the test writes them.
func heldFIFO(t *testing.T) (string, *os.File) {
	t.Helper()
	fifo := filepath.Join(t.TempDir(), "records")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	w, err := os.OpenFile(fifo, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return fifo, w
}

func TestConcurrentRequests(t *testing.T) {
	c := pipeClient(t, ServerOptions{AllowRun: true})
	ctx := testCtx(t)
	dir := t.TempDir()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := 0; i < 32; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			p := filepath.Join(dir, fmt.Sprint(i))
			want := bytes.Repeat([]byte{byte(i)}, 1000*i)
			if err := c.WriteFile(ctx, p, want, 0o644); err != nil {
				errs <- err
				return
			}
			got, err := c.ReadFile(ctx, p)
			if err != nil || !bytes.Equal(got, want) {
				errs <- fmt.Errorf("file %d: %d bytes, %v", i, len(got), err)
			}
			res, err := c.Run(ctx, []string{"echo", fmt.Sprint(i)}, nil)
			if err != nil || string(res.Stdout) != fmt.Sprintf("%d\n", i) {
				errs <- fmt.Errorf("run %d: %q, %v", i, res.Stdout, err)
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// fakeAgent runs a client against a hand-driven agent end, so tests can
// send the client exactly the bytes they want.
func fakeAgent(t *testing.T) (*Client, net.Conn) {
	a, b := net.Pipe()
	c := NewClient(a)
	t.Cleanup(func() { c.Close(); b.Close() })
	return c, b
}

// readRequest reads one request frame from the agent end.
func readRequest(t *testing.T, fr *wire.FrameReader) wire.Frame {
	t.Helper()
	f, err := fr.ReadFrame()
	if err != nil {
		t.Errorf("fake agent reading: %v", err)
	}
	return f
}

func TestClientDamagedResponses(t *testing.T) {
	tests := []struct {
		name    string
		respond func(req wire.Frame) []byte
		want    error
		text    string
	}{
		{"payload checksum mismatch", func(req wire.Frame) []byte {
			b := mustFrame(t, wire.Frame{Type: wire.MsgResult, ID: req.ID, Payload: wire.EncodeBytes([]byte("data"))})
			b[len(b)-1] ^= 1
			return b
		}, wire.ErrCorruptFrame, "payload checksum mismatch"},
		{"header damaged", func(req wire.Frame) []byte {
			b := mustFrame(t, wire.Frame{Type: wire.MsgResult, ID: req.ID, Payload: wire.EncodeBytes([]byte("data"))})
			b[12] ^= 1
			return b
		}, wire.ErrCorruptFrame, "header checksum mismatch"},
		{"oversized", func(req wire.Frame) []byte {
			return oversizedHeader(wire.MsgResult, req.ID)
		}, wire.ErrFrameTooLarge, "frame too large"},
		{"truncated then connection dropped", func(req wire.Frame) []byte {
			b := mustFrame(t, wire.Frame{Type: wire.MsgResult, ID: req.ID, Payload: wire.EncodeBytes([]byte("data"))})
			return b[:len(b)-2]
		}, ErrConnLost, "truncated frame"},
		{"error payload garbled but checksummed", func(req wire.Frame) []byte {
			return mustFrame(t, wire.Frame{Type: wire.MsgError, ID: req.ID, Payload: []byte{1}})
		}, wire.ErrShortPayload, "decoding error response"},
		{"result of the wrong shape", func(req wire.Frame) []byte {
			return mustFrame(t, wire.Frame{Type: wire.MsgResult, ID: req.ID, Payload: []byte{5, 'a'}})
		}, wire.ErrShortPayload, "decoding read-file result"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, agent := fakeAgent(t)
			go func() {
				fr := wire.NewFrameReader(agent, 0)
				req := readRequest(t, fr)
				agent.Write(tt.respond(req))
				if tt.want == ErrConnLost {
					agent.Close()
				}
			}()
			_, err := c.ReadFile(testCtx(t), "/etc/hostname")
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.text) {
				t.Fatalf("ReadFile = %v, want %v saying %q", err, tt.want, tt.text)
			}
			if tt.want != ErrConnLost && c.Stats().DamagedFrames == 0 && !errors.Is(tt.want, wire.ErrShortPayload) {
				t.Errorf("Stats = %+v, want the damaged frame counted", c.Stats())
			}
		})
	}
}

func TestClientSkipsGarbageAndEchoedRequests(t *testing.T) {
	c, agent := fakeAgent(t)
	go func() {
		fr := wire.NewFrameReader(agent, 0)
		req := readRequest(t, fr)
		// Console noise, then the client's own request echoed back by a
		// tty that is not raw yet, then the answer.
		agent.Write([]byte("\r\nDebian GNU/Linux 12 ttyS1\r\n"))
		agent.Write(mustFrame(t, req))
		agent.Write(mustFrame(t, wire.Frame{Type: wire.MsgResult, ID: req.ID}))
	}()
	if err := c.Ping(testCtx(t)); err != nil {
		t.Fatalf("Ping = %v", err)
	}
	if s := c.Stats(); s.SkippedBytes != int64(len("\r\nDebian GNU/Linux 12 ttyS1\r\n")) {
		t.Errorf("Stats = %+v, want the console text counted", s)
	}
}

func TestClientConnectionLoss(t *testing.T) {
	c, agent := fakeAgent(t)
	got := make(chan error, 2)
	go func() { got <- c.Ping(testCtx(t)) }()
	go func() { _, err := c.ReadFile(testCtx(t), "/x"); got <- err }()
	fr := wire.NewFrameReader(agent, 0)
	readRequest(t, fr)
	readRequest(t, fr)
	agent.Close()
	for i := 0; i < 2; i++ {
		if err := <-got; !errors.Is(err, ErrConnLost) || !strings.Contains(err.Error(), "agent closed the connection") {
			t.Errorf("request in flight = %v, want ErrConnLost", err)
		}
	}
	if err := c.Ping(testCtx(t)); !errors.Is(err, ErrConnLost) {
		t.Errorf("Ping after loss = %v, want ErrConnLost", err)
	}
	c.Close()
	if err := c.Ping(testCtx(t)); !errors.Is(err, ErrConnLost) {
		t.Errorf("Ping after Close = %v, want ErrConnLost", err)
	}
}

// The agent must never act on a damaged request: it answers with an error
// for the id and leaves the file system alone.
func TestServerRejectsDamagedRequests(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "must-not-exist")
	write := func(id uint32) []byte {
		return mustFrame(t, wire.Frame{Type: wire.MsgWriteFile, ID: id, Payload: wire.WriteFileRequest{Path: target, Mode: 0o644, Data: []byte("x")}.Encode()})
	}
	payloadFlip := write(1)
	payloadFlip[len(payloadFlip)-1] ^= 1
	headerFlip := write(2)
	headerFlip[9] ^= 1
	tests := []struct {
		name  string
		in    []byte
		id    uint32 // the request answered with an error, 0 for none
		kind  wire.ErrorKind
		close bool // close the connection after sending
	}{
		{"payload checksum", payloadFlip, 1, wire.KindBadFrame, false},
		{"header checksum", headerFlip, 0, 0, false},
		{"oversized", cat(oversizedHeader(wire.MsgWriteFile, 3), make([]byte, wire.MaxPayload+1)), 3, wire.KindBadFrame, false},
		{"unsupported type", mustFrame(t, wire.Frame{Type: 0x7F, ID: 4}), 4, wire.KindUnsupported, false},
		{"undecodable payload", mustFrame(t, wire.Frame{Type: wire.MsgWriteFile, ID: 5, Payload: []byte{0xFF}}), 5, wire.KindBadRequest, false},
		{"truncated, then the line drops", write(6)[:30], 0, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := net.Pipe()
			var log syncBuffer
			done := make(chan error, 1)
			go func() { done <- Serve(context.Background(), b, ServerOptions{Log: &log}) }()
			fr := wire.NewFrameReader(a, 0)
			go a.Write(cat(tt.in, mustFrame(t, wire.Frame{Type: wire.MsgPing, ID: 100})))
			if tt.close {
				time.Sleep(50 * time.Millisecond)
				a.Close()
				if err := <-done; !errors.Is(err, wire.ErrTruncatedFrame) {
					t.Fatalf("Serve = %v after a truncated frame and EOF, want ErrTruncatedFrame", err)
				}
			} else {
				// Requests run concurrently: the answers may come in any order.
				var answered, pinged bool
				for !pinged || (tt.id != 0 && !answered) {
					f, err := fr.ReadFrame()
					if err != nil {
						t.Fatalf("reading answers: %v", err)
					}
					if f.ID == 100 {
						pinged = true // the agent resynchronised after the damage
						continue
					}
					if f.ID != tt.id || f.Type != wire.MsgError {
						t.Fatalf("answer %s for id %d, want an error for id %d", f.Type, f.ID, tt.id)
					}
					re, err := wire.DecodeRemoteError(f.Payload)
					if err != nil || re.Kind != tt.kind {
						t.Fatalf("error answer %+v, %v; want kind %d", re, err, tt.kind)
					}
					t.Logf("agent answered: %v", re)
					answered = true
				}
				if answered != (tt.id != 0) {
					t.Errorf("answered = %v, want %v", answered, tt.id != 0)
				}
				a.Close()
				<-done
			}
			if _, err := os.Stat(target); err == nil {
				t.Fatal("the damaged request was executed")
			}
			if !tt.close && tt.kind != wire.KindUnsupported && tt.kind != wire.KindBadRequest && !strings.Contains(log.String(), "klasy agent:") {
				t.Errorf("nothing logged for the damaged frame: %q", log.String())
			}
		})
	}
}

func TestServerRejectsDuplicateID(t *testing.T) {
	a, b := net.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go Serve(ctx, b, ServerOptions{AllowRun: true})
	run := mustFrame(t, wire.Frame{Type: wire.MsgRun, ID: 7, Payload: wire.RunRequest{Argv: []string{"sleep", "1"}}.Encode()})
	go a.Write(cat(run, run))
	f, err := wire.NewFrameReader(a, 0).ReadFrame()
	if err != nil || f.Type != wire.MsgError || f.ID != 7 {
		t.Fatalf("first answer %s id %d, %v; want an error for the duplicate id 7", f.Type, f.ID, err)
	}
	re, _ := wire.DecodeRemoteError(f.Payload)
	if re == nil || !strings.Contains(re.Msg, "already in use") {
		t.Errorf("error = %v", re)
	}
}

func TestSizeLimitsAreErrorsNotTruncation(t *testing.T) {
	c := pipeClient(t, ServerOptions{AllowRun: true})
	ctx := testCtx(t)
	dir := t.TempDir()

	big := filepath.Join(dir, "big")
	err := c.WriteFile(ctx, big, make([]byte, wire.MaxPayload), 0o644)
	if !errors.Is(err, wire.ErrFrameTooLarge) {
		t.Errorf("WriteFile(16 MiB) = %v, want ErrFrameTooLarge", err)
	}
	if _, err := os.Stat(big); err == nil {
		t.Error("an oversized WriteFile created the file")
	}

	// A sparse file just over the limit: ReadFile refuses, Stream reads it.
	sparse := filepath.Join(dir, "sparse")
	f, err := os.Create(sparse)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(maxReadFile + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	_, err = c.ReadFile(ctx, sparse)
	if !errors.Is(err, wire.ErrTooLarge) || !strings.Contains(err.Error(), "use Stream") {
		t.Errorf("ReadFile(too large) = %v, want ErrTooLarge pointing at Stream", err)
	}
	var n int64
	if err := c.Stream(ctx, sparse, func(b []byte) error { n += int64(len(b)); return nil }); err != nil || n != maxReadFile+1 {
		t.Errorf("Stream(large file) = %d bytes, %v; want %d", n, err, maxReadFile+1)
	}

	_, err = c.Run(ctx, []string{"head", "-c", fmt.Sprint(maxRunOutput + 1), "/dev/zero"}, nil)
	if !errors.Is(err, wire.ErrTooLarge) {
		t.Errorf("Run(output too large) = %v, want ErrTooLarge", err)
	}
	if err := c.Ping(ctx); err != nil {
		t.Errorf("Ping after refusals: %v", err)
	}
}

// lineRelay joins a client to an agent the way QEMU's serial socket does:
// bytes reach the guest a FIFO's worth (16) at a time, and when the host
// hangs up, QEMU drops its connection with whatever the guest has not
// taken yet, while the guest's line stays open: the agent never sees the
// client go.
func lineRelay(t *testing.T, opts ServerOptions) *Client {
	host, relayHost := net.Pipe()
	relayGuest, guest := net.Pipe()
	hungUp := new(atomic.Bool)
	go io.Copy(relayHost, relayGuest)
	go func() {
		buf := make([]byte, 16)
		for {
			n, err := relayHost.Read(buf)
			time.Sleep(time.Millisecond)
			if err != nil || hungUp.Load() {
				relayHost.Close()
				return
			}
			relayGuest.Write(buf[:n])
		}
	}()
	t.Cleanup(func() { relayGuest.Close() })
	return serve(t, opts, hangupConn{host, hungUp}, guest)
}

type hangupConn struct {
	net.Conn
	hungUp *atomic.Bool
}

func (c hangupConn) Close() error {
	c.hungUp.Store(true)
	return c.Conn.Close()
}

func TestRunCanceledThenClosedKillsCommand(t *testing.T) {
	c := lineRelay(t, ServerOptions{AllowRun: true})
	marker := filepath.Join(t.TempDir(), "survived")
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := c.Run(ctx, []string{"sh", "-c", "sleep 2; touch " + marker}, nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Run = %v, want context.DeadlineExceeded", err)
	}
	// What `klasy lab exec --timeout` does next: close the connection
	// and exit. The cancel must still reach the agent.
	c.Close()
	time.Sleep(2500 * time.Millisecond)
	if _, err := os.Stat(marker); err == nil {
		t.Error("the command of a canceled Run kept running after the client closed")
	}
}

// TestClock reads the agent's CLOCK_MONOTONIC between two reads of this
// process's: agent and client share the machine here, so the agent's
// reading must fall between them, as a guest's does in host time once
// its offset is subtracted. A clock request with a payload is refused.
func TestClock(t *testing.T) {
	c := pipeClient(t, ServerOptions{})
	ctx := testCtx(t)
	now := func() int64 {
		var ts unix.Timespec
		if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
			t.Fatal(err)
		}
		return ts.Nano()
	}
	for i := 0; i < 5; i++ {
		before := now()
		got, err := c.Clock(ctx)
		after := now()
		if err != nil {
			t.Fatalf("Clock: %v", err)
		}
		if got < before || got > after {
			t.Fatalf("Clock = %d, not within the round trip [%d, %d]", got, before, after)
		}
	}

	a, b := net.Pipe()
	done := make(chan error, 1)
	go func() { done <- Serve(context.Background(), b, ServerOptions{}) }()
	go a.Write(mustFrame(t, wire.Frame{Type: wire.MsgClock, ID: 9, Payload: []byte{1}}))
	f, err := wire.NewFrameReader(a, 0).ReadFrame()
	if err != nil || f.Type != wire.MsgError || f.ID != 9 {
		t.Fatalf("answer to a clock request with a payload: %s id %d, %v; want an error for id 9", f.Type, f.ID, err)
	}
	if re, err := wire.DecodeRemoteError(f.Payload); err != nil || re.Kind != wire.KindBadRequest {
		t.Errorf("error answer %+v, %v; want a bad request", re, err)
	}
	a.Close()
	<-done
}
