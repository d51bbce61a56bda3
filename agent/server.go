package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/klasy/klasy/agent/wire"
)

// ServerOptions configures the agent side.
type ServerOptions struct {
	// AllowRun lets clients run arbitrary commands. Only for the lab:
	// an agent in a real deployment only loads modules and moves files.
	AllowRun bool
	// Log receives one line per damaged frame, refused request and
	// connection event; nil discards them.
	Log io.Writer
	// AuthTimeout bounds, in ServeTLS, how long a connection may take to
	// complete the mutual TLS handshake (to authenticate) before it is
	// closed; 0 is DefaultAuthTimeout.
	AuthTimeout time.Duration

	procModules string // /proc/modules unless a test says otherwise
}

const (
	streamChunk = 64 << 10
	// maxRunOutput bounds stdout and stderr each so that both fit in one
	// result frame.
	maxRunOutput = (wire.MaxPayload - 64) / 2
)

// Serve answers requests read from conn until ctx is done (it then
// closes conn and returns ctx.Err()), the peer closes the connection
// (nil), or reading fails (the error). Each request runs in its own
// goroutine, so a long Run or Stream does not hold up others.
//
// Damaged input is never executed: bytes outside frames are skipped up to
// the next magic; a frame with an intact header but a damaged payload,
// an unsupported version or an oversized length is answered with an
// error for its id (and cancels the request of that id, if one is
// running, since it may have been its cancel or ack); a frame with a
// damaged header is dropped.
func Serve(ctx context.Context, conn io.ReadWriteCloser, opts ServerOptions) error {
	if opts.procModules == "" {
		opts.procModules = "/proc/modules"
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	s := &server{opts: opts, conn: conn, active: map[uint32]*active{}}
	go func() {
		<-ctx.Done()
		s.closeOnce.Do(func() { conn.Close() })
	}()
	fr := wire.NewFrameReader(conn, wire.MaxPayload)
	var skipped int64
	var result error
	for {
		f, err := fr.ReadFrame()
		if fr.Skipped != skipped {
			s.logf("skipped %d bytes of garbage on the line", fr.Skipped-skipped)
			skipped = fr.Skipped
		}
		if err != nil {
			var fe *wire.FrameError
			if errors.As(err, &fe) && !errors.Is(err, wire.ErrTruncatedFrame) {
				s.logf("rejected frame: %v", fe)
				if fe.HasID {
					s.cancel(fe.ID)
					s.reply(fe.ID, &wire.RemoteError{Op: fe.Type.String(), Kind: wire.KindBadFrame,
						Msg: "request arrived damaged and was not run: " + fe.Error()})
				}
				continue
			}
			if ctx.Err() != nil {
				result = ctx.Err()
			} else if err != io.EOF {
				result = fmt.Errorf("agent: reading requests: %w", err)
			}
			break
		}
		s.dispatch(ctx, f)
	}
	stop()
	s.mu.Lock()
	for _, a := range s.active {
		a.cancel()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return result
}

type server struct {
	opts      ServerOptions
	conn      io.ReadWriteCloser
	closeOnce sync.Once
	wmu       sync.Mutex

	mu     sync.Mutex
	active map[uint32]*active
	wg     sync.WaitGroup
}

type active struct {
	cancel context.CancelFunc
	acks   chan int          // stream or exec output credits returned by the client
	stdin  chan []byte       // an exec's input chunks; an empty one ends it
	why    *wire.RemoteError // set (under server.mu) when the agent aborts the request
}

// abort stops request a for the reason re, which becomes its answer.
func (s *server) abort(a *active, re *wire.RemoteError) {
	s.mu.Lock()
	if a.why == nil {
		a.why = re
	}
	s.mu.Unlock()
	s.logf("%s", re.Msg)
	a.cancel()
}

func (s *server) logf(format string, args ...any) {
	if s.opts.Log != nil {
		fmt.Fprintf(s.opts.Log, "klasy agent: "+format+"\n", args...)
	}
}

func (s *server) send(f wire.Frame) {
	b, err := wire.AppendFrame(nil, f)
	if err != nil {
		// Results are bounded below MaxPayload; this is a bug, but the
		// client must still hear about it.
		b, _ = wire.AppendFrame(nil, wire.Frame{Type: wire.MsgError, ID: f.ID, Payload: wire.EncodeRemoteError(
			&wire.RemoteError{Op: f.Type.String(), Kind: wire.KindTooLarge, Msg: err.Error()})})
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if _, err := s.conn.Write(b); err != nil {
		s.logf("sending %s for request %d: %v", f.Type, f.ID, err)
	}
}

func (s *server) reply(id uint32, re *wire.RemoteError) {
	s.send(wire.Frame{Type: wire.MsgError, ID: id, Payload: wire.EncodeRemoteError(re)})
}

func (s *server) cancel(id uint32) {
	s.mu.Lock()
	a := s.active[id]
	s.mu.Unlock()
	if a != nil {
		a.cancel()
	}
}

func (s *server) dispatch(ctx context.Context, f wire.Frame) {
	switch f.Type {
	case wire.MsgCancel:
		s.cancel(f.ID)
		return
	case wire.MsgStreamAck:
		n, err := wire.DecodeUint("stream ack", f.Payload)
		s.mu.Lock()
		a := s.active[f.ID]
		s.mu.Unlock()
		if err != nil || n == 0 || n > wire.MaxWindow {
			s.logf("bad stream ack for request %d", f.ID)
			if a != nil {
				a.cancel()
			}
			return
		}
		if a != nil && a.acks != nil {
			select {
			case a.acks <- int(n):
			default: // more acks than chunks sent: the stream ends anyway
			}
		}
		return
	case wire.MsgStdin:
		s.mu.Lock()
		a := s.active[f.ID]
		s.mu.Unlock()
		switch {
		case a == nil:
			// The command has finished: input sent before the client
			// heard so goes nowhere.
		case a.stdin == nil:
			s.logf("stdin for request %d, which takes none", f.ID)
		case len(f.Payload) > maxStdinChunk:
			s.abort(a, badRequest("exec", "stdin chunk of %d bytes for request %d, limit %d", len(f.Payload), f.ID, maxStdinChunk))
		default:
			select {
			case a.stdin <- f.Payload:
			default:
				s.abort(a, badRequest("exec", "request %d: more stdin chunks than its window allows", f.ID))
			}
		}
		return
	}
	handler, ok := handlers[f.Type]
	if !ok {
		s.logf("unsupported request %s (id %d)", f.Type, f.ID)
		s.reply(f.ID, &wire.RemoteError{Op: f.Type.String(), Kind: wire.KindUnsupported,
			Msg: fmt.Sprintf("this agent does not handle %s frames", f.Type)})
		return
	}
	rctx, cancel := context.WithCancel(ctx)
	a := &active{cancel: cancel}
	switch f.Type {
	case wire.MsgStream:
		a.acks = make(chan int, wire.MaxWindow)
	case wire.MsgExec:
		a.acks = make(chan int, wire.MaxWindow)
		a.stdin = make(chan []byte, wire.MaxWindow+1) // the window and the end
	}
	s.mu.Lock()
	if s.active[f.ID] != nil {
		s.mu.Unlock()
		cancel()
		s.reply(f.ID, &wire.RemoteError{Op: f.Type.String(), Kind: wire.KindBadRequest,
			Msg: fmt.Sprintf("request id %d is already in use", f.ID)})
		return
	}
	s.active[f.ID] = a
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer func() {
			s.mu.Lock()
			delete(s.active, f.ID)
			s.mu.Unlock()
			cancel()
		}()
		defer func() {
			// A bug in one handler must not take the agent, and with it
			// the guest's only channel, down.
			if p := recover(); p != nil {
				s.logf("panic handling %s (id %d): %v", f.Type, f.ID, p)
				s.reply(f.ID, &wire.RemoteError{Op: f.Type.String(), Kind: wire.KindOther, Msg: fmt.Sprintf("agent bug: panic: %v", p)})
			}
		}()
		res, err := handler(s, rctx, f, a)
		s.mu.Lock()
		why := a.why
		s.mu.Unlock()
		if why != nil {
			// Aborted: whatever the handler made of it (a killed
			// command's status), the reason is the answer.
			s.send(wire.Frame{Type: wire.MsgError, ID: f.ID, Payload: wire.EncodeRemoteError(why)})
			return
		}
		if err != nil {
			re := remoteErrorFrom(f.Type.String(), err)
			if rctx.Err() != nil && ctx.Err() == nil {
				re = &wire.RemoteError{Op: f.Type.String(), Kind: wire.KindCanceled, Msg: "canceled by the client"}
			}
			s.send(wire.Frame{Type: wire.MsgError, ID: f.ID, Payload: wire.EncodeRemoteError(re)})
			return
		}
		s.send(wire.Frame{Type: wire.MsgResult, ID: f.ID, Payload: res})
	}()
}

// remoteErrorFrom turns an error on the agent's side into what goes back
// on the wire, keeping the errno when there is one.
func remoteErrorFrom(op string, err error) *wire.RemoteError {
	var re *wire.RemoteError
	if errors.As(err, &re) {
		return re
	}
	e := &wire.RemoteError{Op: op, Kind: wire.KindOther, Msg: err.Error()}
	var errno syscall.Errno
	switch {
	case errors.As(err, &errno):
		e.Kind, e.Errno = wire.KindErrno, errno
	case errors.Is(err, exec.ErrNotFound):
		// A missing program is a missing file to the caller.
		e.Kind, e.Errno = wire.KindErrno, syscall.ENOENT
	}
	return e
}

type handlerFunc func(s *server, ctx context.Context, f wire.Frame, a *active) ([]byte, error)

var handlers map[wire.MsgType]handlerFunc

func init() {
	handlers = map[wire.MsgType]handlerFunc{
		wire.MsgPing: func(s *server, ctx context.Context, f wire.Frame, a *active) ([]byte, error) {
			if len(f.Payload) != 0 {
				return nil, badRequest("ping", "ping carries no payload, got %d bytes", len(f.Payload))
			}
			return nil, nil
		},
		wire.MsgRun:          (*server).run,
		wire.MsgWriteFile:    (*server).writeFile,
		wire.MsgReadFile:     (*server).readFile,
		wire.MsgLoadModule:   (*server).loadModule,
		wire.MsgUnloadModule: (*server).unloadModule,
		wire.MsgModules:      (*server).modules,
		wire.MsgStream:       (*server).stream,
		wire.MsgExec:         (*server).exec,
		wire.MsgClock:        (*server).clock,
	}
}

func badRequest(op, format string, args ...any) *wire.RemoteError {
	return &wire.RemoteError{Op: op, Kind: wire.KindBadRequest, Msg: fmt.Sprintf(format, args...)}
}

func asBadRequest(op string, err error) error {
	if err == nil {
		return nil
	}
	return &wire.RemoteError{Op: op, Kind: wire.KindBadRequest, Msg: err.Error()}
}

// cappedBuffer keeps at most max bytes and remembers that it overflowed.
// It has no ReadFrom (unlike an embedded bytes.Buffer), so io.Copy goes
// through Write and the cap holds.
type cappedBuffer struct {
	buf      bytes.Buffer
	max      int
	overflow bool
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	if b.buf.Len()+len(p) > b.max {
		b.overflow = true
		return 0, wire.ErrTooLarge
	}
	return b.buf.Write(p)
}

func (s *server) run(ctx context.Context, f wire.Frame, _ *active) ([]byte, error) {
	if !s.opts.AllowRun {
		s.logf("refused to run a command (agent started without --allow-run)")
		return nil, &wire.RemoteError{Op: "run", Kind: wire.KindRunDisabled,
			Msg: "running commands is disabled on this agent (start it with --allow-run, lab only)"}
	}
	req, err := wire.DecodeRunRequest(f.Payload)
	if err != nil {
		return nil, asBadRequest("run", err)
	}
	if len(req.Argv) == 0 || req.Argv[0] == "" {
		return nil, badRequest("run", "empty command")
	}
	cmd := exec.CommandContext(ctx, req.Argv[0], req.Argv[1:]...)
	cmd.Stdin = bytes.NewReader(req.Stdin)
	stdout := &cappedBuffer{max: maxRunOutput}
	stderr := &cappedBuffer{max: maxRunOutput}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// Cancel kills the whole process group, so `sh -c` does not leave
	// its children running.
	ownProcessGroup(cmd)
	cmd.WaitDelay = 2 * time.Second
	err = cmd.Run()
	if stdout.overflow || stderr.overflow {
		return nil, &wire.RemoteError{Op: "run", Kind: wire.KindTooLarge,
			Msg: fmt.Sprintf("%s: output exceeds %d bytes; redirect it to a file and Stream it", req.Argv[0], maxRunOutput)}
	}
	res := wire.RunResult{Stdout: stdout.buf.Bytes(), Stderr: stderr.buf.Bytes()}
	if res.ExitCode, err = exitStatus(cmd, err); err != nil {
		return nil, remoteErrorFrom("run", err)
	}
	return res.Encode(), nil
}

// exitStatus turns what cmd.Run or cmd.Wait returned into an exit status
// as a shell gives it (128+N for a command killed by signal N), or the
// error that kept the command from running.
func exitStatus(cmd *exec.Cmd, err error) (int, error) {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, nil
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal()), nil
		}
		return ee.ExitCode(), nil
	case errors.Is(err, exec.ErrWaitDelay) && cmd.ProcessState != nil:
		// The command exited, but something it started still held its
		// output open after WaitDelay: the command's own status stands.
		return exitStatus(cmd, nil)
	}
	return 0, err
}

// maxStdinChunk bounds one MsgStdin payload, so an exec buffers at most
// its window of them.
const maxStdinChunk = streamChunk

func (s *server) exec(ctx context.Context, f wire.Frame, a *active) ([]byte, error) {
	if !s.opts.AllowRun {
		s.logf("refused to run a command (agent started without --allow-run)")
		return nil, &wire.RemoteError{Op: "exec", Kind: wire.KindRunDisabled,
			Msg: "running commands is disabled on this agent (start it with --allow-run, lab only)"}
	}
	req, err := wire.DecodeExecRequest(f.Payload)
	if err != nil {
		return nil, asBadRequest("exec", err)
	}
	if len(req.Argv) == 0 || req.Argv[0] == "" {
		return nil, badRequest("exec", "empty command")
	}
	cmd := exec.CommandContext(ctx, req.Argv[0], req.Argv[1:]...)
	out := &outputSender{s: s, id: f.ID, ctx: ctx, acks: a.acks, credits: req.Window}
	cmd.Stdout, cmd.Stderr = out.writer(1), out.writer(2)
	ownProcessGroup(cmd)
	cmd.WaitDelay = 2 * time.Second
	var stdin io.WriteCloser
	if req.Stdin {
		if stdin, err = cmd.StdinPipe(); err != nil {
			return nil, remoteErrorFrom("exec", err)
		}
	}
	if err := cmd.Start(); err != nil {
		return nil, remoteErrorFrom("exec", err)
	}
	if stdin != nil {
		go s.feedStdin(ctx, f.ID, a.stdin, stdin)
	}
	code, err := exitStatus(cmd, cmd.Wait())
	if err != nil {
		return nil, remoteErrorFrom("exec", err)
	}
	return wire.EncodeInt(int64(code)), nil
}

// feedStdin writes an exec's input chunks to the command as they come
// and acknowledges each once written, so the client has at most its
// window in flight. After the command stops reading (it exited, or
// closed its input), chunks are still acknowledged and dropped.
func (s *server) feedStdin(ctx context.Context, id uint32, in <-chan []byte, w io.WriteCloser) {
	defer w.Close()
	broken := false
	for {
		select {
		case b := <-in:
			if len(b) == 0 {
				return
			}
			if !broken {
				_, err := w.Write(b)
				broken = err != nil
			}
			if ctx.Err() != nil {
				return
			}
			s.send(wire.Frame{Type: wire.MsgStdinAck, ID: id, Payload: wire.EncodeUint(1)})
		case <-ctx.Done():
			return
		}
	}
}

// outputSender sends an exec's output as MsgExecOutput frames, at most
// credits ahead of the client's acknowledgements: a client that does not
// keep up holds the command back, not the agent's line.
type outputSender struct {
	s       *server
	id      uint32
	ctx     context.Context
	acks    <-chan int
	mu      sync.Mutex
	credits int
}

type fdWriter struct {
	o  *outputSender
	fd int
}

func (o *outputSender) writer(fd int) io.Writer { return fdWriter{o, fd} }

func (w fdWriter) Write(p []byte) (int, error) {
	o, n := w.o, 0
	for len(p) > 0 {
		c := p
		if len(c) > streamChunk {
			c = c[:streamChunk]
		}
		o.mu.Lock()
		for o.credits == 0 {
			select {
			case k := <-o.acks:
				o.credits += k
			case <-o.ctx.Done():
				o.mu.Unlock()
				return n, o.ctx.Err()
			}
		}
		o.credits--
		o.mu.Unlock()
		o.s.send(wire.Frame{Type: wire.MsgExecOutput, ID: o.id, Payload: wire.ExecOutput{FD: w.fd, Data: c}.Encode()})
		n += len(c)
		p = p[len(c):]
	}
	return n, nil
}

// clock answers the guest's CLOCK_MONOTONIC in nanoseconds, the clock
// klasy's records are stamped with (ktime_get_mono_fast_ns), read as
// late as possible so that the host's round trip brackets it.
func (s *server) clock(_ context.Context, f wire.Frame, _ *active) ([]byte, error) {
	if len(f.Payload) != 0 {
		return nil, badRequest("clock", "clock request carries no payload, got %d bytes", len(f.Payload))
	}
	ns, err := monotonicNS()
	if err != nil {
		return nil, remoteErrorFrom("clock", err)
	}
	return wire.EncodeInt(ns), nil
}

func (s *server) writeFile(_ context.Context, f wire.Frame, _ *active) ([]byte, error) {
	req, err := wire.DecodeWriteFileRequest(f.Payload)
	if err != nil {
		return nil, asBadRequest("write file", err)
	}
	if req.Path == "" {
		return nil, badRequest("write file", "empty path")
	}
	if req.Mode&^os.ModePerm != 0 {
		return nil, badRequest("write file", "mode %v: only permission bits may be set", req.Mode)
	}
	file, err := os.OpenFile(req.Path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, req.Mode)
	if err != nil {
		return nil, remoteErrorFrom("write file", err)
	}
	// sysfs and debugfs files take one write per value: do not split it.
	if _, err := file.Write(req.Data); err != nil {
		file.Close()
		return nil, remoteErrorFrom("write file", err)
	}
	if fi, err := file.Stat(); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm() != req.Mode {
		if err := file.Chmod(req.Mode); err != nil {
			file.Close()
			return nil, remoteErrorFrom("write file", err)
		}
	}
	if err := file.Close(); err != nil {
		return nil, remoteErrorFrom("write file", err)
	}
	return nil, nil
}

// maxReadFile leaves room for the length prefix in the result frame.
const maxReadFile = wire.MaxPayload - 16

func (s *server) readFile(_ context.Context, f wire.Frame, _ *active) ([]byte, error) {
	path, err := wire.DecodeString("read-file request", f.Payload)
	if err != nil {
		return nil, asBadRequest("read file", err)
	}
	file, err := os.Open(path)
	if err != nil {
		return nil, remoteErrorFrom("read file", err)
	}
	defer file.Close()
	// procfs and sysfs report size 0: read to EOF, one byte past the
	// limit to tell "exactly full" from "too large".
	data, err := io.ReadAll(io.LimitReader(file, maxReadFile+1))
	if err != nil {
		return nil, remoteErrorFrom("read file", err)
	}
	if len(data) > maxReadFile {
		return nil, &wire.RemoteError{Op: "read file", Kind: wire.KindTooLarge,
			Msg: fmt.Sprintf("%s is larger than %d bytes; use Stream", path, maxReadFile)}
	}
	return wire.EncodeBytes(data), nil
}

func (s *server) loadModule(_ context.Context, f wire.Frame, _ *active) ([]byte, error) {
	req, err := wire.DecodeLoadModuleRequest(f.Payload)
	if err != nil {
		return nil, asBadRequest("load module", err)
	}
	if len(req.Image) == 0 {
		return nil, badRequest("load module", "empty module image")
	}
	if err := initModule(req.Image, req.Params); err != nil {
		return nil, remoteErrorFrom("load module", fmt.Errorf("init_module: %w", err))
	}
	return nil, nil
}

func (s *server) unloadModule(_ context.Context, f wire.Frame, _ *active) ([]byte, error) {
	name, err := wire.DecodeString("unload-module request", f.Payload)
	if err != nil {
		return nil, asBadRequest("unload module", err)
	}
	if name == "" || strings.ContainsAny(name, "/\x00") {
		return nil, badRequest("unload module", "bad module name %q", name)
	}
	if err := deleteModule(name); err != nil {
		return nil, remoteErrorFrom("unload module", fmt.Errorf("delete_module %s: %w", name, err))
	}
	return nil, nil
}

func (s *server) modules(_ context.Context, f wire.Frame, _ *active) ([]byte, error) {
	if len(f.Payload) != 0 {
		return nil, badRequest("modules", "modules request carries no payload, got %d bytes", len(f.Payload))
	}
	data, err := os.ReadFile(s.opts.procModules)
	if err != nil {
		return nil, remoteErrorFrom("modules", err)
	}
	ms, err := ParseProcModules(data)
	if err != nil {
		return nil, remoteErrorFrom("modules", err)
	}
	return wire.EncodeModules(ms), nil
}

// ParseProcModules parses the text of /proc/modules:
// "name size refcount deps state address" per line.
func ParseProcModules(data []byte) ([]wire.Module, error) {
	var ms []wire.Module
	for i, line := range strings.Split(string(data), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		fs := strings.Fields(line)
		if len(fs) < 3 {
			return nil, fmt.Errorf("parsing /proc/modules line %d %q: want at least 3 fields", i+1, line)
		}
		size, err := strconv.ParseInt(fs[1], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("parsing /proc/modules line %d: size: %w", i+1, err)
		}
		refs := -1 // "-": the module cannot be unloaded, so it has no count
		if fs[2] != "-" {
			r, err := strconv.Atoi(fs[2])
			if err != nil {
				return nil, fmt.Errorf("parsing /proc/modules line %d: refcount: %w", i+1, err)
			}
			refs = r
		}
		ms = append(ms, wire.Module{Name: fs[0], Size: size, Refs: refs})
	}
	return ms, nil
}

func (s *server) stream(ctx context.Context, f wire.Frame, a *active) ([]byte, error) {
	req, err := wire.DecodeStreamRequest(f.Payload)
	if err != nil {
		return nil, asBadRequest("stream", err)
	}
	file, err := os.Open(req.Path)
	if err != nil {
		return nil, remoteErrorFrom("stream", err)
	}
	// A read of a device may block past cancellation; closing from here
	// interrupts it for pollable files, and the reader goroutine exits on
	// its own for the rest.
	defer func() { go file.Close() }()
	type chunk struct {
		b   []byte
		err error
	}
	chunks := make(chan chunk)
	go func() {
		for {
			b := make([]byte, streamChunk)
			n, err := file.Read(b)
			select {
			case chunks <- chunk{b[:n], err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	credits := req.Window
	for {
		var c chunk
		select {
		case c = <-chunks:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if len(c.b) > 0 {
			for credits == 0 {
				select {
				case n := <-a.acks:
					credits += n
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			credits--
			s.send(wire.Frame{Type: wire.MsgStreamData, ID: f.ID, Payload: c.b})
		}
		if c.err == io.EOF {
			return nil, nil
		}
		if c.err != nil {
			return nil, remoteErrorFrom("stream", c.err)
		}
	}
}
