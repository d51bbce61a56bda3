package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klasy/klasy/agent/wire"
)

const (
	// streamWindow is how many records the agent may send ahead of the
	// ones the caller's fn has consumed; wire.MaxWindow bounds what a
	// client may ask for.
	streamWindow = 16
	// stdinWindow is how many stdin chunks of stdinChunk bytes Exec sends
	// ahead of the agent's acknowledgements: what a command's input may
	// hold in memory on both sides.
	stdinWindow = 16
	stdinChunk  = maxStdinChunk
)

// ErrConnLost is wrapped by every error caused by the connection to
// the agent going away (EOF, a read or write error, Close).
var ErrConnLost = errors.New("agent connection lost")

// Client talks to an agent over a byte stream (a QEMU serial socket, a
// pipe). It is safe for concurrent use: requests are multiplexed by id,
// so a Stream in progress does not hold up a Run. Frames are written
// whole, one at a time: a request's context is checked before its frame
// is written and while it waits for the answer, not in the middle of
// writing a large frame (cutting a frame short would garble the line).
//
// Damaged input: garbage without a frame magic is skipped (counted in
// Stats). A frame whose header is intact but whose payload is damaged,
// oversized or of another version fails the request it names with a
// *FrameError. A damaged header cannot be attributed to a request, and
// the response it carried is lost, so it fails every request in flight
// with a *FrameError rather than leaving them to their deadlines; the
// connection stays usable for new requests. When the connection ends,
// every request in flight and every later one fails with ErrConnLost.
type Client struct {
	conn io.ReadWriteCloser
	wmu  sync.Mutex // serialises frame writes

	mu      sync.Mutex
	pending map[uint32]*call
	nextID  uint32
	down    error // set once the connection is gone
	done    chan struct{}
	// unflushed is set when a cancel is sent; cancels holds a channel
	// per cancel frame not known to be written yet, closed once it is.
	// Close flushes them.
	unflushed bool
	cancels   []chan struct{}

	skipped  atomic.Int64
	badFrame atomic.Int64
}

// ClientStats counts what the client discarded from the line.
type ClientStats struct {
	SkippedBytes  int64 // garbage bytes outside frames
	DamagedFrames int64 // frames rejected as corrupt, truncated or oversized
}

type call struct {
	frames chan wire.Frame
	failed chan struct{}
	once   sync.Once
	err    error
}

func (c *call) fail(err error) {
	c.once.Do(func() { c.err = err; close(c.failed) })
}

// NewClient starts a client on conn; it owns conn from now on and closes
// it on Close.
func NewClient(conn io.ReadWriteCloser) *Client {
	// A serial line cannot tell one host connection from the next: a late
	// reply to an earlier client's request would match a new client's
	// request of the same id. Starting each client at a random id makes
	// such a collision unlikely instead of certain.
	c := &Client{conn: conn, pending: map[uint32]*call{}, done: make(chan struct{}), nextID: rand.Uint32()}
	go c.readLoop()
	return c
}

// cancelFlush bounds how long Close waits for the agent to take the
// cancels sent before it.
const cancelFlush = 3 * time.Second

// Close closes the connection; requests in flight fail with ErrConnLost.
// If requests were canceled, it first makes sure the agent has read their
// cancels (for up to cancelFlush): a serial line does not tell the agent
// that the host closed its end, and QEMU drops the bytes the guest has
// not taken yet when the host hangs up, so a Run whose cancel is lost
// runs on in the guest.
func (c *Client) Close() error {
	c.mu.Lock()
	cancels, unflushed := c.cancels, c.unflushed
	c.cancels, c.unflushed = nil, false
	c.mu.Unlock()
	if unflushed {
		ctx, stop := context.WithTimeout(context.Background(), cancelFlush)
		written := true
		for _, w := range cancels {
			select {
			case <-w:
			case <-ctx.Done():
				written = false
			}
		}
		if written {
			// The agent reads frames in order and acts on a cancel before
			// it reads the next frame: the ping's answer says it has.
			c.Ping(ctx)
		}
		stop()
	}
	c.mu.Lock()
	if c.down == nil {
		c.down = fmt.Errorf("%w: client closed", ErrConnLost)
	}
	c.mu.Unlock()
	err := c.conn.Close()
	<-c.done
	return err
}

// Stats reports what the client has discarded so far.
func (c *Client) Stats() ClientStats {
	return ClientStats{SkippedBytes: c.skipped.Load(), DamagedFrames: c.badFrame.Load()}
}

func (c *Client) readLoop() {
	defer close(c.done)
	fr := wire.NewFrameReader(c.conn, wire.MaxPayload)
	for {
		f, err := fr.ReadFrame()
		c.skipped.Store(fr.Skipped)
		if err != nil {
			var fe *wire.FrameError
			if errors.As(err, &fe) && !errors.Is(err, wire.ErrTruncatedFrame) {
				c.badFrame.Add(1)
				err = fmt.Errorf("agent: received %w", fe)
				if fe.HasID {
					c.failCall(fe.ID, err)
				} else {
					c.failAll(err)
				}
				continue
			}
			if errors.Is(err, wire.ErrTruncatedFrame) {
				c.badFrame.Add(1)
			}
			c.mu.Lock()
			if c.down == nil {
				if err == io.EOF {
					c.down = fmt.Errorf("%w: agent closed the connection", ErrConnLost)
				} else {
					c.down = fmt.Errorf("%w: %v", ErrConnLost, err)
				}
			}
			down := c.down
			c.mu.Unlock()
			c.failAll(down)
			return
		}
		c.mu.Lock()
		cl := c.pending[f.ID]
		c.mu.Unlock()
		if cl == nil || f.Type < wire.MsgResult {
			// A late answer to a canceled request, or a request echoed
			// back by a tty not yet in raw mode: not for anyone.
			continue
		}
		select {
		case cl.frames <- f:
		default:
			cl.fail(fmt.Errorf("agent: protocol error: agent sent more than %d unacknowledged frames for request %d", cap(cl.frames), f.ID))
		}
	}
}

func (c *Client) failCall(id uint32, err error) {
	c.mu.Lock()
	cl := c.pending[id]
	c.mu.Unlock()
	if cl != nil {
		cl.fail(err)
	}
}

func (c *Client) failAll(err error) {
	c.mu.Lock()
	calls := make([]*call, 0, len(c.pending))
	for _, cl := range c.pending {
		calls = append(calls, cl)
	}
	c.mu.Unlock()
	for _, cl := range calls {
		cl.fail(err)
	}
}

// start registers a new request and sends it.
func (c *Client) start(typ wire.MsgType, payload []byte, buffer int) (uint32, *call, error) {
	cl := &call{frames: make(chan wire.Frame, buffer), failed: make(chan struct{})}
	c.mu.Lock()
	if c.down != nil {
		err := c.down
		c.mu.Unlock()
		return 0, nil, err
	}
	for {
		c.nextID++
		if c.nextID != 0 && c.pending[c.nextID] == nil {
			break
		}
	}
	id := c.nextID
	c.pending[id] = cl
	c.mu.Unlock()
	if err := c.send(wire.Frame{Type: typ, ID: id, Payload: payload}); err != nil {
		c.finish(id)
		return 0, nil, err
	}
	return id, cl, nil
}

func (c *Client) finish(id uint32) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

func (c *Client) send(f wire.Frame) error {
	b, err := wire.AppendFrameCompressed(nil, f)
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if _, err := c.conn.Write(b); err != nil {
		c.mu.Lock()
		down := c.down
		c.mu.Unlock()
		if down != nil {
			return down
		}
		return fmt.Errorf("%w: sending %s: %v", ErrConnLost, f.Type, err)
	}
	return nil
}

// cancel tells the agent to stop request id; best effort, and in the
// background: the line may be busy with a large frame for seconds, and
// the caller whose context ended should not wait for that.
func (c *Client) cancel(id uint32) {
	c.mu.Lock()
	delete(c.pending, id)
	if c.down != nil {
		c.mu.Unlock()
		return
	}
	written := make(chan struct{})
	live := c.cancels[:0]
	for _, w := range c.cancels {
		select {
		case <-w: // written already: nothing left to flush
		default:
			live = append(live, w)
		}
	}
	c.cancels = append(live, written)
	c.unflushed = true
	c.mu.Unlock()
	go func() {
		defer close(written)
		c.send(wire.Frame{Type: wire.MsgCancel, ID: id})
	}()
}

// next waits for the next frame of a request.
func (c *Client) next(ctx context.Context, id uint32, cl *call) (wire.Frame, error) {
	return c.nextOr(ctx, id, cl, nil)
}

// nextOr is next that also gives up, canceling the request, on an error
// from stop.
func (c *Client) nextOr(ctx context.Context, id uint32, cl *call, stop <-chan error) (wire.Frame, error) {
	select {
	case err := <-stop:
		c.cancel(id)
		return wire.Frame{}, err
	case f := <-cl.frames:
		return f, nil
	case <-cl.failed:
		select { // a frame that arrived before the failure still counts
		case f := <-cl.frames:
			return f, nil
		default:
		}
		return wire.Frame{}, cl.err
	case <-ctx.Done():
		c.cancel(id)
		return wire.Frame{}, ctx.Err()
	}
}

// roundTrip sends a request and waits for its single result.
func (c *Client) roundTrip(ctx context.Context, op string, typ wire.MsgType, payload []byte) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("agent %s: %w", op, err)
	}
	id, cl, err := c.start(typ, payload, 1)
	if err != nil {
		return nil, fmt.Errorf("agent %s: %w", op, err)
	}
	f, err := c.next(ctx, id, cl)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("agent %s: %w", op, err)
		}
		c.finish(id)
		return nil, fmt.Errorf("agent %s: %w", op, err)
	}
	c.finish(id)
	return resultPayload(f)
}

// roundTripEmpty is roundTrip for requests whose result carries nothing.
func (c *Client) roundTripEmpty(ctx context.Context, op string, typ wire.MsgType, payload []byte) error {
	p, err := c.roundTrip(ctx, op, typ, payload)
	if err == nil && len(p) != 0 {
		err = fmt.Errorf("agent %s: %d unexpected bytes in the answer", op, len(p))
	}
	return err
}

// resultPayload returns the payload of a result frame or the agent's
// error carried by an error frame.
func resultPayload(f wire.Frame) ([]byte, error) {
	switch f.Type {
	case wire.MsgResult:
		return f.Payload, nil
	case wire.MsgError:
		re, err := wire.DecodeRemoteError(f.Payload)
		if err != nil {
			return nil, fmt.Errorf("agent: %w", err)
		}
		return nil, re
	}
	return nil, fmt.Errorf("agent: protocol error: unexpected %s frame for request %d", f.Type, f.ID)
}

// Ping checks that the agent answers.
func (c *Client) Ping(ctx context.Context) error {
	return c.roundTripEmpty(ctx, "ping", wire.MsgPing, nil)
}

// Clock reads the guest's CLOCK_MONOTONIC in nanoseconds: the clock
// klasy's records are stamped with. The agent reads it while answering,
// so a host clock read before the call and one after bracket it.
func (c *Client) Clock(ctx context.Context) (int64, error) {
	p, err := c.roundTrip(ctx, "clock", wire.MsgClock, nil)
	if err != nil {
		return 0, err
	}
	return wire.DecodeInt("clock result", p)
}

// Run runs argv in the guest with stdin as its standard input and waits
// for it. A non-zero exit is not an error: it is in ExitCode. Errors are
// for a command that could not start (errors.Is(err, os.ErrNotExist) for
// a missing program), an agent that refuses to run commands
// (ErrRunDisabled), or output too large for one frame (ErrTooLarge).
// Canceling ctx kills the command.
func (c *Client) Run(ctx context.Context, argv []string, stdin []byte) (wire.RunResult, error) {
	if len(argv) == 0 {
		return wire.RunResult{}, errors.New("agent run: empty command")
	}
	p, err := c.roundTrip(ctx, "run", wire.MsgRun, wire.RunRequest{Argv: argv, Stdin: stdin}.Encode())
	if err != nil {
		return wire.RunResult{}, err
	}
	return wire.DecodeRunResult(p)
}

// WriteFile writes data to path in the guest, creating it with mode if it
// does not exist and truncating it if it does. The mode of an existing
// regular file is set to mode too.
func (c *Client) WriteFile(ctx context.Context, path string, data []byte, mode os.FileMode) error {
	return c.roundTripEmpty(ctx, "write file", wire.MsgWriteFile, wire.WriteFileRequest{Path: path, Mode: mode, Data: data}.Encode())
}

// ReadFile reads a whole file (procfs, sysfs and debugfs files included)
// from the guest. A file larger than a frame fails with ErrTooLarge: use
// Stream for those.
func (c *Client) ReadFile(ctx context.Context, path string) ([]byte, error) {
	p, err := c.roundTrip(ctx, "read file", wire.MsgReadFile, wire.EncodeString(path))
	if err != nil {
		return nil, err
	}
	return wire.DecodeBytes("read-file result", p)
}

// LoadModule loads a kernel module image (the bytes of a .ko) with
// init_module(2); params is the module parameter string ("a=1 b=x").
// The kernel's error comes back as a *RemoteError carrying the errno
// (errors.Is(err, syscall.EEXIST) for a module already loaded).
func (c *Client) LoadModule(ctx context.Context, image []byte, params string) error {
	return c.roundTripEmpty(ctx, "load module", wire.MsgLoadModule, wire.LoadModuleRequest{Image: image, Params: params}.Encode())
}

// UnloadModule removes a module with delete_module(2) without waiting
// (O_NONBLOCK, as rmmod does): a module in use fails with EWOULDBLOCK.
func (c *Client) UnloadModule(ctx context.Context, name string) error {
	return c.roundTripEmpty(ctx, "unload module", wire.MsgUnloadModule, wire.EncodeString(name))
}

// Modules lists the modules loaded in the guest, in /proc/modules order.
func (c *Client) Modules(ctx context.Context) ([]wire.Module, error) {
	p, err := c.roundTrip(ctx, "modules", wire.MsgModules, nil)
	if err != nil {
		return nil, err
	}
	return wire.DecodeModules(p)
}

// Stream reads path in the guest (a device such as /dev/kmsg, a pipe such
// as trace_pipe, or a plain file) and calls fn with each record, one
// read(2) worth of bytes, in order. It returns nil at end of file, fn's
// error if fn fails, ctx.Err() when ctx is done (the agent stops reading
// in both cases), or the agent's error. fn may keep the chunk.
func (c *Client) Stream(ctx context.Context, path string, fn func(chunk []byte) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("agent stream %s: %w", path, err)
	}
	// Room for the window plus the closing result.
	id, cl, err := c.start(wire.MsgStream, wire.StreamRequest{Path: path, Window: streamWindow}.Encode(), streamWindow+2)
	if err != nil {
		return fmt.Errorf("agent stream %s: %w", path, err)
	}
	for {
		f, err := c.next(ctx, id, cl)
		if err != nil {
			c.finish(id)
			return fmt.Errorf("agent stream %s: %w", path, err)
		}
		if f.Type != wire.MsgStreamData {
			c.finish(id)
			p, err := resultPayload(f)
			if err == nil && len(p) != 0 {
				err = fmt.Errorf("agent stream %s: %d unexpected bytes in the answer", path, len(p))
			}
			return err
		}
		if err := fn(f.Payload); err != nil {
			c.cancel(id)
			return err
		}
		if err := c.send(wire.Frame{Type: wire.MsgStreamAck, ID: id, Payload: wire.EncodeUint(1)}); err != nil {
			c.finish(id)
			return fmt.Errorf("agent stream %s: %w", path, err)
		}
	}
}

// Exec runs argv in the guest and returns its exit status (128+N when a
// signal N killed it, as in a shell). Unlike Run, nothing is held whole:
// stdin (nil: the command reads /dev/null) is sent as the command takes
// it, at most a window of chunks ahead, and the command's output is
// written to stdout and stderr as it comes, the agent sending at most a
// window ahead of what was written, so neither has a size limit and a
// slow writer holds the command back. Errors are for a command that could
// not start (errors.Is(err, os.ErrNotExist) for a missing program), an
// agent that refuses to run commands (ErrRunDisabled), reading stdin or
// writing the output, and ctx: canceling it kills the command. Exec does
// not wait for a Read of stdin in progress when it returns.
//
// An agent that predates Exec answers with ErrUnsupported; without stdin,
// Exec then falls back to Run (whose output is limited to a frame).
func (c *Client) Exec(ctx context.Context, argv []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	if len(argv) == 0 {
		return 0, errors.New("agent exec: empty command")
	}
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("agent exec: %w", err)
	}
	req := wire.ExecRequest{Argv: argv, Stdin: stdin != nil, Window: streamWindow, StdinWindow: stdinWindow}
	// Room for the output window, the acks of the stdin window and the
	// result.
	id, cl, err := c.start(wire.MsgExec, req.Encode(), streamWindow+stdinWindow+2)
	if err != nil {
		return 0, fmt.Errorf("agent exec: %w", err)
	}
	done := make(chan struct{})
	defer close(done)
	credits := make(chan int, stdinWindow+2)
	stop := make(chan error, 1)
	if stdin != nil {
		go c.sendStdin(id, stdin, credits, done, stop)
	}
	for heard := false; ; heard = true {
		f, err := c.nextOr(ctx, id, cl, stop)
		if err != nil {
			if ctx.Err() == nil {
				c.finish(id)
			}
			return 0, fmt.Errorf("agent exec: %w", err)
		}
		switch f.Type {
		case wire.MsgExecOutput:
			o, err := wire.DecodeExecOutput(f.Payload)
			if err != nil {
				c.cancel(id)
				return 0, fmt.Errorf("agent: %w", err)
			}
			w := stdout
			if o.FD == 2 {
				w = stderr
			}
			if _, err := w.Write(o.Data); err != nil {
				c.cancel(id)
				return 0, fmt.Errorf("writing the output of %s: %w", argv[0], err)
			}
			if err := c.send(wire.Frame{Type: wire.MsgStreamAck, ID: id, Payload: wire.EncodeUint(1)}); err != nil {
				c.finish(id)
				return 0, fmt.Errorf("agent exec: %w", err)
			}
		case wire.MsgStdinAck:
			n, err := wire.DecodeUint("stdin ack", f.Payload)
			if err != nil || n == 0 || n > stdinWindow {
				c.cancel(id)
				return 0, fmt.Errorf("agent: protocol error: stdin ack of %d chunks (%v)", n, err)
			}
			select {
			case credits <- int(n):
			default: // more acks than chunks sent; the stdin sender is gone
			}
		default:
			c.finish(id)
			p, err := resultPayload(f)
			if errors.Is(err, wire.ErrUnsupported) && !heard {
				if stdin != nil {
					return 0, fmt.Errorf("%w (the lab's agent predates streamed input: restart the lab)", err)
				}
				res, err := c.Run(ctx, argv, nil)
				if err != nil {
					return 0, err
				}
				if _, err := stdout.Write(res.Stdout); err != nil {
					return 0, fmt.Errorf("writing the output of %s: %w", argv[0], err)
				}
				if _, err := stderr.Write(res.Stderr); err != nil {
					return 0, fmt.Errorf("writing the output of %s: %w", argv[0], err)
				}
				return res.ExitCode, nil
			}
			if err != nil {
				return 0, err
			}
			code, err := wire.DecodeInt("exec result", p)
			return int(code), err
		}
	}
}

// sendStdin reads stdin in chunks and sends each once the window allows,
// then an empty chunk at end of file. It stops when done closes; a read
// error goes to stop.
func (c *Client) sendStdin(id uint32, stdin io.Reader, credits <-chan int, done <-chan struct{}, stop chan<- error) {
	buf := make([]byte, stdinChunk)
	avail := stdinWindow
	for {
		n, rerr := stdin.Read(buf)
		select {
		case <-done:
			return
		default:
		}
		if n > 0 {
			for avail == 0 {
				select {
				case k := <-credits:
					avail += k
				case <-done:
					return
				}
			}
			avail--
			if c.send(wire.Frame{Type: wire.MsgStdin, ID: id, Payload: buf[:n]}) != nil {
				return // the connection is gone: the exec hears of it too
			}
		}
		if rerr == io.EOF {
			c.send(wire.Frame{Type: wire.MsgStdin, ID: id})
			return
		}
		if rerr != nil {
			stop <- fmt.Errorf("reading standard input: %w", rerr)
			return
		}
	}
}
