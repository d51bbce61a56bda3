package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/klasy/klasy/agent/wire"
)

// muxQueueMax bounds what the mux holds for one client that does not read
// its answers; such a client is dropped (its requests canceled) rather
// than let it hold back the line every other client shares.
var muxQueueMax = 4 * wire.MaxPayload

// muxHelloTimeout bounds how long a client may stay connected to the
// mux without sending a whole frame (klasy's clients ping at once): a
// connection that sends nothing is closed then, so that idle connections
// cannot hold the mux's descriptors. A test shortens it.
var muxHelloTimeout = DefaultAuthTimeout

// Mux lets many clients share one connection to an agent, whose line (a
// QEMU chardev socket) takes one connection at a time. It accepts clients
// on ln, each speaking the protocol as to an agent, and forwards their
// frames whole over agentConn, giving each request an id of its own on
// the agent's side; answers go back to the client that asked, under its
// id. So a long command, a stream that never ends (a trace) and short
// requests of several clients run side by side, as the agent runs
// requests of one client. A client that goes away has its requests in
// flight canceled; since the mux's own connection stays, the agent always
// hears of it.
//
// Frames are not decoded beyond their header: a compressed payload is
// forwarded as it came. Damage on the agent's line is reported as the
// agent's own client would: a damaged answer fails the request it names
// (an error of kind KindBadFrame), a damaged header every request in
// flight; both are canceled on the agent.
//
// As the agent's ServeTLS, it keeps serving when idle connections take
// its descriptors: accept errors that pass are waited out (acceptRetry),
// a connection that sends no frame within muxHelloTimeout is closed, and
// one client process (by SO_PEERCRED) may have at most MaxPendingPerPeer
// connections waiting for their first frame; more are closed at once.
//
// Mux returns when agentConn ends (nil: the agent or QEMU closed it),
// reading it fails (the error) or ctx is done (ctx.Err()); it then closes
// ln, agentConn and every client.
func Mux(ctx context.Context, agentConn io.ReadWriteCloser, ln net.Listener, log io.Writer) error {
	m := &mux{agent: agentConn, log: log, routes: map[uint32]route{}, clients: map[*muxClient]bool{},
		nextID: rand.Uint32(), pending: peerCounts{max: MaxPendingPerPeer}}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		<-ctx.Done()
		agentConn.Close()
		ln.Close()
	}()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		// Errors that pass (descriptors run out) are waited out, so
		// that the clients being served keep being served.
		retry := acceptRetry{logf: m.logf, what: "clients"}
		for {
			conn, err := ln.Accept()
			if err != nil {
				if retry.wait(ctx, err) {
					continue
				}
				if ctx.Err() == nil && !errors.Is(err, net.ErrClosed) {
					m.logf("accepting clients: %v", err)
				}
				stop()
				return
			}
			retry.ok()
			peer := muxPeer(conn)
			if n, ok := m.pending.add(peer); !ok {
				// One client process cannot take every descriptor
				// from the others.
				if n == MaxPendingPerPeer {
					m.logf("refusing connections of %s: %d already wait for their first request", peer, n)
				}
				conn.Close()
				continue
			}
			conn.SetReadDeadline(time.Now().Add(muxHelloTimeout))
			c := m.addClient(conn, peer)
			if c == nil {
				m.pending.done(peer)
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				m.serveClient(c)
			}()
		}
	}()
	err := m.readAgent()
	if ctx.Err() != nil {
		err = ctx.Err()
	}
	stop()
	m.mu.Lock()
	m.closed = true
	clients := make([]*muxClient, 0, len(m.clients))
	for c := range m.clients {
		clients = append(clients, c)
	}
	m.mu.Unlock()
	for _, c := range clients {
		c.close()
	}
	wg.Wait()
	return err
}

type mux struct {
	agent io.ReadWriteCloser
	awmu  sync.Mutex // serialises frames to the agent
	log   io.Writer

	mu      sync.Mutex
	routes  map[uint32]route // agent-side id -> the client and its id
	nextID  uint32
	clients map[*muxClient]bool
	closed  bool
	pending peerCounts // connections of each client process before their first frame
}

// muxPeer names the process at the other end of a client's connection.
func muxPeer(conn net.Conn) string {
	if pid, ok := peerPID(conn); ok {
		return "pid " + strconv.Itoa(pid)
	}
	return "peer " + conn.RemoteAddr().String()
}

type route struct {
	c  *muxClient
	id uint32
}

type muxClient struct {
	conn net.Conn
	peer string            // muxPeer's; "" once its first frame came
	ids  map[uint32]uint32 // the client's ids -> agent-side ids; under mux.mu

	mu     sync.Mutex
	cond   *sync.Cond
	queue  [][]byte
	queued int
	closed bool
}

func (m *mux) logf(format string, args ...any) {
	if m.log != nil {
		fmt.Fprintf(m.log, "klasy mux: "+format+"\n", args...)
	}
}

func (m *mux) addClient(conn net.Conn, peer string) *muxClient {
	c := &muxClient{conn: conn, peer: peer, ids: map[uint32]uint32{}}
	c.cond = sync.NewCond(&c.mu)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		conn.Close()
		return nil
	}
	m.clients[c] = true
	return c
}

// toAgent writes one frame to the agent; its payload is as it came.
func (m *mux) toAgent(f wire.Frame, flags uint16) {
	b := wire.AppendFrameFlags(nil, f, flags)
	m.awmu.Lock()
	defer m.awmu.Unlock()
	if _, err := m.agent.Write(b); err != nil {
		// The read side sees the connection end and stops everything.
		m.logf("sending %s (id %d) to the agent: %v", f.Type, f.ID, err)
	}
}

// readAgent routes the agent's frames to their clients until the
// connection ends.
func (m *mux) readAgent() error {
	fr := wire.NewFrameReader(m.agent, wire.MaxPayload)
	fr.Raw = true
	var skipped int64
	for {
		f, err := fr.ReadFrame()
		if fr.Skipped != skipped {
			m.logf("skipped %d bytes of garbage from the agent", fr.Skipped-skipped)
			skipped = fr.Skipped
		}
		if err != nil {
			var fe *wire.FrameError
			if errors.As(err, &fe) && !errors.Is(err, wire.ErrTruncatedFrame) {
				m.logf("damaged frame from the agent: %v", fe)
				m.failDamaged(fe)
				continue
			}
			if err == io.EOF || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("reading from the agent: %w", err)
		}
		m.mu.Lock()
		r, ok := m.routes[f.ID]
		if ok && f.Type.Final() {
			delete(m.routes, f.ID)
			delete(r.c.ids, r.id)
		}
		m.mu.Unlock()
		if !ok {
			continue // a late answer to a request whose client is gone
		}
		f.ID = r.id
		r.c.enqueue(m, wire.AppendFrameFlags(nil, f, fr.Flags()))
	}
}

// failDamaged fails the request a damaged answer belonged to, or every
// request in flight when the damage hides which one it was, and cancels
// them on the agent.
func (m *mux) failDamaged(fe *wire.FrameError) {
	type failed struct {
		aid uint32
		r   route
	}
	var fs []failed
	m.mu.Lock()
	for aid, r := range m.routes {
		if fe.HasID && aid != fe.ID {
			continue
		}
		fs = append(fs, failed{aid, r})
		delete(m.routes, aid)
		delete(r.c.ids, r.id)
	}
	m.mu.Unlock()
	msg := "an answer from the agent arrived damaged: " + fe.Error()
	if !fe.HasID {
		msg = "an answer from the agent arrived damaged and may have been this request's: " + fe.Error()
	}
	for _, f := range fs {
		m.toAgent(wire.Frame{Type: wire.MsgCancel, ID: f.aid}, 0)
		f.r.c.enqueue(m, wire.AppendFrameFlags(nil, wire.Frame{Type: wire.MsgError, ID: f.r.id, Payload: wire.EncodeRemoteError(
			&wire.RemoteError{Op: "mux", Kind: wire.KindBadFrame, Msg: msg})}, 0))
	}
}

// serveClient forwards one client's frames to the agent until it goes,
// then cancels what it left in flight.
func (m *mux) serveClient(c *muxClient) {
	go c.writeLoop()
	fr := wire.NewFrameReader(c.conn, wire.MaxPayload)
	fr.Raw = true
	for {
		f, err := fr.ReadFrame()
		if err == nil && c.peer != "" {
			m.greeted(c)
		}
		if err != nil {
			if c.peer != "" && errors.Is(err, os.ErrDeadlineExceeded) {
				m.logf("closed a connection of %s that sent no request within %v", c.peer, muxHelloTimeout)
			}
			var fe *wire.FrameError
			if errors.As(err, &fe) && !errors.Is(err, wire.ErrTruncatedFrame) {
				m.logf("damaged frame from a client: %v", fe)
				if fe.HasID {
					m.cancelClientID(c, fe.ID)
					c.enqueue(m, wire.AppendFrameFlags(nil, wire.Frame{Type: wire.MsgError, ID: fe.ID, Payload: wire.EncodeRemoteError(
						&wire.RemoteError{Op: fe.Type.String(), Kind: wire.KindBadFrame, Msg: "request arrived damaged and was not run: " + fe.Error()})}, 0))
				}
				continue
			}
			break
		}
		m.fromClient(c, f, fr.Flags())
	}
	if c.peer != "" {
		m.pending.done(c.peer)
	}
	m.dropClient(c)
}

// greeted notes a client's first frame: it waits no longer, and may be
// idle as long as it likes.
func (m *mux) greeted(c *muxClient) {
	c.conn.SetReadDeadline(time.Time{})
	m.pending.done(c.peer)
	c.peer = ""
}

func (m *mux) fromClient(c *muxClient, f wire.Frame, flags uint16) {
	if f.Type >= wire.MsgResult {
		m.logf("dropped a %s frame a client sent (id %d)", f.Type, f.ID)
		return
	}
	m.mu.Lock()
	aid, inFlight := c.ids[f.ID]
	if f.Type.Continuation() {
		m.mu.Unlock()
		if inFlight {
			f.ID = aid
			m.toAgent(f, flags)
		}
		// else: for a request that has finished; nothing to do.
		return
	}
	if inFlight {
		m.mu.Unlock()
		c.enqueue(m, wire.AppendFrameFlags(nil, wire.Frame{Type: wire.MsgError, ID: f.ID, Payload: wire.EncodeRemoteError(
			badRequest(f.Type.String(), "request id %d is already in use", f.ID))}, 0))
		return
	}
	for {
		m.nextID++
		if _, used := m.routes[m.nextID]; m.nextID != 0 && !used {
			break
		}
	}
	aid = m.nextID
	m.routes[aid] = route{c, f.ID}
	c.ids[f.ID] = aid
	m.mu.Unlock()
	f.ID = aid
	m.toAgent(f, flags)
}

// cancelClientID cancels a client's request on the agent and forgets it.
func (m *mux) cancelClientID(c *muxClient, id uint32) {
	m.mu.Lock()
	aid, ok := c.ids[id]
	if ok {
		delete(c.ids, id)
		delete(m.routes, aid)
	}
	m.mu.Unlock()
	if ok {
		m.toAgent(wire.Frame{Type: wire.MsgCancel, ID: aid}, 0)
	}
}

// dropClient closes a client and cancels its requests in flight.
func (m *mux) dropClient(c *muxClient) {
	c.close()
	m.mu.Lock()
	delete(m.clients, c)
	var aids []uint32
	for _, aid := range c.ids {
		aids = append(aids, aid)
		delete(m.routes, aid)
	}
	c.ids = map[uint32]uint32{}
	closed := m.closed
	m.mu.Unlock()
	if closed {
		return // the agent's line is gone: nothing to cancel on
	}
	for _, aid := range aids {
		m.toAgent(wire.Frame{Type: wire.MsgCancel, ID: aid}, 0)
	}
}

// enqueue queues an encoded frame for the client without waiting for it
// to read. A client more than muxQueueMax bytes behind is closed.
func (c *muxClient) enqueue(m *mux, b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	if c.queued+len(b) > muxQueueMax {
		m.logf("a client is %d bytes behind; dropping it", c.queued)
		c.closed = true
		c.conn.Close() // its reader ends and dropClient cancels its requests
		c.cond.Broadcast()
		return
	}
	c.queue = append(c.queue, b)
	c.queued += len(b)
	c.cond.Signal()
}

func (c *muxClient) writeLoop() {
	for {
		c.mu.Lock()
		for len(c.queue) == 0 && !c.closed {
			c.cond.Wait()
		}
		if c.closed {
			c.mu.Unlock()
			return
		}
		b := c.queue[0]
		c.queue[0] = nil
		c.queue = c.queue[1:]
		c.queued -= len(b)
		c.mu.Unlock()
		if _, err := c.conn.Write(b); err != nil {
			c.close()
			return
		}
	}
}

func (c *muxClient) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		c.closed = true
		c.queue = nil
		c.cond.Broadcast()
	}
	c.conn.Close()
}
