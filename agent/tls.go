package agent

// The agent over the network: the same frames inside a TLS 1.3
// connection with certificates on both sides (mutual TLS, Go's
// crypto/tls), so an agent answers only the controller its domains file
// names and the controller talks only to the agent it meant.
//
// Who may ask: the agent requires a client certificate signed by the CA
// it was given and marked for client authentication (extended key usage
// clientAuth) with the common name ControllerName. The domains' own
// certificates are marked for server authentication only, so one domain
// cannot command another with its own certificate, and a certificate of
// another domains file (another CA) is refused. A connection that does
// not complete that handshake, or not within DefaultAuthTimeout, is
// closed before a single frame is read from it, and the agent logs who
// it refused and why.
//
// Replay: TLS protects each connection against replayed, reordered or
// dropped records (per-connection keys from fresh ephemeral key
// exchanges, and record sequence numbers under the AEAD). Bytes recorded
// from one connection and replayed on another fail the handshake, since
// the server's random and key share differ each time; Go's TLS server has
// no 0-RTT (early data), the one TLS 1.3 mode open to replay. No request
// is therefore accepted twice from a recording, and the protocol needs no
// nonces of its own.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"
)

// ControllerName is the common name of the controller's certificate, the
// one client an agent serves.
const ControllerName = "klasy controller"

// handshakeTimeout bounds the controller's TLS handshake with an agent.
const handshakeTimeout = 15 * time.Second

// DefaultAuthTimeout bounds how long a connection to an agent may take to
// complete the mutual TLS handshake: a peer that connects and sends
// nothing, or too little, is closed then, so that idle connections
// cannot hold the agent's descriptors.
const DefaultAuthTimeout = 10 * time.Second

// TLSFiles are the PEM files of one side of a mutual TLS connection.
type TLSFiles struct {
	CA   string // the CA certificate both sides' certificates chain to
	Cert string // this side's certificate
	Key  string // its private key
}

func loadTLS(f TLSFiles) (*x509.CertPool, tls.Certificate, error) {
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, tls.Certificate{}, fmt.Errorf("loading the certificate %s and key %s: %w", f.Cert, f.Key, err)
	}
	pool, err := loadCA(f.CA)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	return pool, cert, nil
}

func loadCA(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the CA certificate: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	return pool, nil
}

// ServerTLSConfig is an agent's side: its certificate, and only clients
// with a certificate that the CA signed for client authentication and
// that names ControllerName.
func ServerTLSConfig(f TLSFiles) (*tls.Config, error) {
	pool, cert, err := loadTLS(f)
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
		// The chain is verified (CA, validity, clientAuth usage) before
		// this runs; it adds who the client must be.
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("no client certificate")
			}
			if cn := cs.PeerCertificates[0].Subject.CommonName; cn != ControllerName {
				return fmt.Errorf("client certificate is %q's, not the controller's", cn)
			}
			return nil
		},
	}, nil
}

// ClientTLSConfig is the controller's side for the agent of domain
// server: the controller's certificate, and only a server certificate
// the CA signed for that domain name.
func ClientTLSConfig(f TLSFiles, server string) (*tls.Config, error) {
	pool, cert, err := loadTLS(f)
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		RootCAs:      pool,
		ServerName:   server,
	}, nil
}

// DialTLS connects to the agent at addr (host:port) over mutual TLS and
// returns a client on that connection once the handshake has succeeded.
// A handshake the agent refuses, or a server that is not the domain cfg
// names, fails here, before any request is sent.
func DialTLS(ctx context.Context, addr string, cfg *tls.Config) (*Client, error) {
	d := tls.Dialer{NetDialer: &net.Dialer{Timeout: handshakeTimeout, KeepAlive: 15 * time.Second}, Config: cfg}
	hctx, cancel := context.WithTimeout(ctx, handshakeTimeout)
	defer cancel()
	conn, err := d.DialContext(hctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("connecting to the agent of %s at %s: %w", cfg.ServerName, addr, err)
	}
	// In TLS 1.3 the client finishes its handshake before the server has
	// checked the client's certificate: a refusal arrives as an alert on
	// the first read. A ping reads it, so a refused client fails here.
	c := NewClient(conn)
	pctx, cancel2 := context.WithTimeout(ctx, handshakeTimeout)
	defer cancel2()
	if err := c.Ping(pctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("the agent of %s at %s: %w", cfg.ServerName, addr, err)
	}
	return c, nil
}

// ServeTLS serves the agent protocol to every client on ln that passes
// the mutual TLS handshake of cfg (ServerTLSConfig), each connection in
// its own goroutine and its own Serve, until ctx is done; it then closes
// ln and the connections and returns ctx.Err(). A connection that fails
// the handshake, or has not completed it within opts.AuthTimeout, is
// closed unread and logged to opts.Log with the peer's address and the
// reason. Accept errors that pass (descriptors run out) are waited out
// with a back-off (acceptRetry) rather than ending the agent.
func ServeTLS(ctx context.Context, ln net.Listener, cfg *tls.Config, opts ServerOptions) error {
	authTimeout := opts.AuthTimeout
	if authTimeout <= 0 {
		authTimeout = DefaultAuthTimeout
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	logf := func(format string, a ...any) {
		if opts.Log != nil {
			fmt.Fprintf(opts.Log, "klasy agent: "+format+"\n", a...)
		}
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	retry := acceptRetry{logf: logf, what: "connections"}
	pending := peerCounts{max: MaxPendingPerPeer}
	for {
		raw, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if retry.wait(ctx, err) {
				continue
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("agent: accepting connections: %w", err)
		}
		retry.ok()
		host := peerHost(raw.RemoteAddr())
		if n, ok := pending.add(host); !ok {
			// One peer cannot take every descriptor from the others:
			// its connections past the limit are closed unread.
			if n == MaxPendingPerPeer {
				logf("refusing connections from %s: %d already waiting for the handshake", host, n)
			}
			raw.Close()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			peer := raw.RemoteAddr().String()
			conn := tls.Server(raw, cfg)
			raw.SetDeadline(time.Now().Add(authTimeout))
			err := conn.HandshakeContext(ctx)
			pending.done(host)
			if err != nil {
				logf("refused a connection from %s: %v", peer, err)
				conn.Close()
				return
			}
			raw.SetDeadline(time.Time{})
			cn := conn.ConnectionState().PeerCertificates[0].Subject.CommonName
			logf("connection from %s (%s)", peer, cn)
			if err := Serve(ctx, conn, opts); err != nil && ctx.Err() == nil {
				logf("connection from %s: %v", peer, err)
			}
		}()
	}
}

// MaxPendingPerPeer bounds the connections one peer host may have
// waiting for the TLS handshake at once: more are closed at once.
const MaxPendingPerPeer = 32

// peerHost is the host part of a peer's address.
func peerHost(a net.Addr) string {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	return a.String()
}

// peerCounts counts the connections of each peer host, up to max.
type peerCounts struct {
	mu  sync.Mutex
	n   map[string]int
	max int
}

// add counts one more connection of host, unless it has max already;
// it returns the count before and whether it was taken.
func (p *peerCounts) add(host string) (int, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.n == nil {
		p.n = map[string]int{}
	}
	n := p.n[host]
	if n >= p.max {
		// Said once per burst: n stays at max until one ends.
		p.n[host] = p.max + 1
		return n, false
	}
	p.n[host] = n + 1
	return n, true
}

// done counts a connection of host as ended.
func (p *peerCounts) done(host string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.n[host] > p.max {
		p.n[host] = p.max
	}
	if p.n[host]--; p.n[host] <= 0 {
		delete(p.n, host)
	}
}
