package agent_test

// The agent over mutual TLS, on the loopback: with the key material
// klasy generates for a domains file, the controller is served; every
// other peer (no certificate, another domains file's, a domain's own,
// plain TCP, a replayed recording of the controller's session) is
// refused before a request is read, logged, and changes nothing.

import (
	"bytes"
	"context"
	"crypto/tls"
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

	"github.com/klasy/klasy/agent"
	"github.com/klasy/klasy/agent/wire"
	"github.com/klasy/klasy/domains"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// domainsFile writes a domains file with domains dom0 and domU1 (the
// given addresses) into a new directory and generates its keys.
func domainsFile(t *testing.T, addr string) *domains.File {
	t.Helper()
	dir := t.TempDir()
	text := fmt.Sprintf(`ca: {cert: keys/ca.crt, key: keys/ca.key}
controller: {cert: keys/controller.crt, key: keys/controller.key}
domains:
  - {name: dom0, address: %q, cert: keys/dom0.crt, key: keys/dom0.key}
  - {name: domU1, address: "127.0.0.1:1", cert: keys/domU1.crt, key: keys/domU1.key}
`, addr)
	path := filepath.Join(dir, "domains.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := domains.Parse(path, []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := domains.GenerateKeys(f); err != nil {
		t.Fatal(err)
	}
	return f
}

// tlsAgent serves dom0's agent of a new domains file on the loopback
// with opts (its Log the one returned) through a listener that records
// what each client sends, and returns the file, the agent's log and the
// recordings.
func tlsAgent(t *testing.T, opts agent.ServerOptions) (*domains.File, *lockedBuffer, *recorder) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := domainsFile(t, ln.Addr().String())
	files, err := f.AgentTLS("dom0")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := agent.ServerTLSConfig(files)
	if err != nil {
		t.Fatal(err)
	}
	log := &lockedBuffer{}
	rec := &recorder{Listener: ln}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	opts.Log = log
	go func() { done <- agent.ServeTLS(ctx, rec, cfg, opts) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("ServeTLS returned %v, want context.Canceled", err)
		}
	})
	return f, log, rec
}

// recorder is a listener whose connections keep a copy of what they read.
type recorder struct {
	net.Listener
	mu    sync.Mutex
	conns []*recConn
}

type recConn struct {
	net.Conn
	mu  sync.Mutex
	got bytes.Buffer
}

func (c *recConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	c.got.Write(p[:n])
	c.mu.Unlock()
	return n, err
}

func (r *recorder) Accept() (net.Conn, error) {
	c, err := r.Listener.Accept()
	if err != nil {
		return nil, err
	}
	rc := &recConn{Conn: c}
	r.mu.Lock()
	r.conns = append(r.conns, rc)
	r.mu.Unlock()
	return rc, nil
}

func (r *recorder) last() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.conns[len(r.conns)-1]
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]byte(nil), c.got.Bytes()...)
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestTLSController(t *testing.T) {
	f, log, _ := tlsAgent(t, agent.ServerOptions{})
	ctx := ctxT(t)
	c, err := f.Dial(ctx, "dom0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	path := filepath.Join(t.TempDir(), "written")
	if err := c.WriteFile(ctx, path, []byte("by the controller"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := c.ReadFile(ctx, path); err != nil || string(got) != "by the controller" {
		t.Fatalf("ReadFile = %q, %v", got, err)
	}
	// Outside a lab (no --allow-run) no command runs, and the refusal is
	// logged.
	if _, err := c.Exec(ctx, []string{"touch", path + ".ran"}, nil, io.Discard, io.Discard); !errors.Is(err, wire.ErrRunDisabled) {
		t.Errorf("Exec on an agent without AllowRun: %v, want ErrRunDisabled", err)
	}
	if _, err := os.Stat(path + ".ran"); err == nil {
		t.Error("the command ran")
	}
	if !strings.Contains(log.String(), "refused to run a command") {
		t.Errorf("the agent's log does not say it refused the command:\n%s", log)
	}
	if !strings.Contains(log.String(), "(klasy controller)") {
		t.Errorf("the agent's log does not name the controller's connection:\n%s", log)
	}
}

// TestTLSRefused: each peer that is not this domains file's controller is
// refused before its request is read; the agent logs it with the peer's
// address, and the file the request would have written does not appear.
func TestTLSRefused(t *testing.T) {
	f, log, _ := tlsAgent(t, agent.ServerOptions{AllowRun: true})
	other := domainsFile(t, "127.0.0.1:1")
	dom0, _ := f.Domain("dom0")
	load := func(cert, key string) []tls.Certificate {
		c, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			t.Fatal(err)
		}
		return []tls.Certificate{c}
	}
	good, err := f.ClientTLS("dom0")
	if err != nil {
		t.Fatal(err)
	}
	// The client presents its certificate whatever CAs the agent says
	// it accepts (Go's client would otherwise send none of another CA).
	withCerts := func(certs []tls.Certificate) *tls.Config {
		c := good.Clone()
		c.Certificates = nil
		if len(certs) > 0 {
			c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &certs[0], nil }
		}
		return c
	}
	domU1, _ := f.Domain("domU1")
	for _, tc := range []struct {
		name string
		cfg  *tls.Config // nil: plain TCP
		why  string      // in the agent's log
	}{
		{"no client certificate", withCerts(nil), "certificate"},
		{"another domains file's controller", withCerts(load(other.Controller.Cert, other.Controller.Key)), "unknown authority"},
		{"another domains file's domain", withCerts(load(other.Domains[0].Cert, other.Domains[0].Key)), "unknown authority"},
		{"a domain's own certificate", withCerts(load(domU1.Cert, domU1.Key)), "incompatible key usage"},
		{"plain TCP", nil, "does not look like a TLS handshake"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctxT(t)
			target := filepath.Join(t.TempDir(), "must-not-exist")
			var conn net.Conn
			var err error
			if tc.cfg == nil {
				conn, err = net.Dial("tcp", dom0.Address)
			} else {
				conn, err = tls.Dial("tcp", dom0.Address, tc.cfg)
			}
			if err != nil {
				t.Fatalf("the client could not even connect: %v", err)
			}
			local := conn.LocalAddr().String()
			c := agent.NewClient(conn)
			defer c.Close()
			werr := c.WriteFile(ctx, target, []byte("x"), 0o644)
			_, rerr := c.Run(ctx, []string{"touch", target}, nil)
			if werr == nil {
				t.Error("WriteFile was answered")
			}
			if rerr == nil {
				t.Error("Run was answered")
			}
			if _, err := os.Stat(target); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the refused request changed something: %s exists (%v)", target, err)
			}
			waitLog(t, log, "refused a connection from "+local+": ", tc.why)
		})
	}

	// The controller checks the agent too: one that is not the domain
	// dialed, or of another CA, is not talked to.
	ctx := ctxT(t)
	wrongName, _ := f.ClientTLS("domU1")
	if _, err := agent.DialTLS(ctx, dom0.Address, wrongName); err == nil || !strings.Contains(err.Error(), "domU1") {
		t.Errorf("dialing dom0's agent as domU1: %v, want a certificate name error", err)
	}
	otherCA, _ := other.ClientTLS("dom0")
	if _, err := agent.DialTLS(ctx, dom0.Address, otherCA); err == nil || !strings.Contains(err.Error(), "unknown authority") {
		t.Errorf("dialing with another file's CA: %v, want an unknown authority error", err)
	}
}

// TestTLSReplay: the bytes a controller sent, replayed on a new
// connection, run nothing: the handshake they hold was for another
// connection's keys.
func TestTLSReplay(t *testing.T) {
	f, log, rec := tlsAgent(t, agent.ServerOptions{AllowRun: true})
	ctx := ctxT(t)
	c, err := f.Dial(ctx, "dom0")
	if err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(t.TempDir(), "written-once")
	if err := c.WriteFile(ctx, target, []byte("once"), 0o644); err != nil {
		t.Fatal(err)
	}
	c.Close()
	recorded := rec.last()
	if err := os.Remove(target); err != nil {
		t.Fatal(err)
	}
	dom0, _ := f.Domain("dom0")
	conn, err := net.Dial("tcp", dom0.Address)
	if err != nil {
		t.Fatal(err)
	}
	local := conn.LocalAddr().String()
	conn.Write(recorded)
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	io.Copy(io.Discard, conn) // until the agent closes it
	conn.Close()
	waitLog(t, log, "refused a connection from "+local+": ", "")
	if _, err := os.Stat(target); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the replayed session wrote %s again (%v)", target, err)
	}
	if len(recorded) < 500 {
		t.Errorf("recorded only %d bytes of the controller's session", len(recorded))
	}
}

// waitLog waits for a line of the agent's log holding both fragments.
func waitLog(t *testing.T, log *lockedBuffer, a, b string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		for _, l := range strings.Split(log.String(), "\n") {
			if strings.Contains(l, a) && strings.Contains(l, b) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the agent's log has no line with %q and %q:\n%s", a, b, log)
		}
	}
}

// TestTLSNoAnswer: an agent address where a peer accepts and never
// answers fails the dial by the caller's deadline, with nothing sent.
func TestTLSNoAnswer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan []byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		b, _ := io.ReadAll(c) // the client's hello, then nothing
		got <- b
	}()
	f := domainsFile(t, ln.Addr().String())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start := time.Now()
	c, err := f.Dial(ctx, "dom0")
	if err == nil {
		c.Close()
		t.Fatal("Dial to a silent peer succeeded")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Dial gave up after %v, past its 2 s deadline", d)
	}
	if !strings.Contains(err.Error(), "dom0") || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Dial error %v does not name the domain and the deadline", err)
	}
	// One TLS record, of type handshake: the client's hello and nothing
	// else (no request).
	b := <-got
	if len(b) < 5 || b[0] != 0x16 || 5+int(b[3])<<8+int(b[4]) != len(b) {
		t.Errorf("the client sent %d bytes to a peer that never answered, not one handshake record: % x", len(b), b[:min(len(b), 8)])
	}
}
