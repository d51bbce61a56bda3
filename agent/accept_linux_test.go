package agent_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/klasy/klasy/agent"
)

// TestTLSIdleConnectionsClosed: a peer that connects and never completes
// the handshake is closed after AuthTimeout, unread, and logged.
func TestTLSIdleConnectionsClosed(t *testing.T) {
	f, log, ln := tlsAgent(t, agent.ServerOptions{AuthTimeout: 300 * time.Millisecond})
	var idle []net.Conn
	for range 10 {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		idle = append(idle, c)
	}
	start := time.Now()
	for i, c := range idle {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if n, err := c.Read(make([]byte, 1)); n != 0 || err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("idle connection %d: read %d bytes, %v; want it closed by the agent", i, n, err)
		}
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("idle connections closed after %v, want about 300 ms", d)
	}
	waitLog(t, log, "refused a connection from 127.0.0.1", "timeout")
	// The controller is still served.
	c, err := f.Dial(ctxT(t), "dom0")
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}

// TestTLSOutOfDescriptors: an agent whose descriptors are all held by
// idle connections (issue 21: it ended on "accept4: too many open files"
// after about 1,000 idle connects under a limit of 1,024) waits until
// they time out and keeps serving the controller. The agent runs in a
// process of its own, this test binary again, under a limit of 64
// descriptors.
func TestTLSOutOfDescriptors(t *testing.T) {
	if os.Getenv("KLASY_TEST_AGENT_NOFILE") != "" {
		agentUnderLimit(t)
		return
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	addr := ln.Addr().String()
	f := domainsFile(t, addr)
	files, err := f.AgentTLS("dom0")
	if err != nil {
		t.Fatal(err)
	}
	lf, err := ln.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^TestTLSOutOfDescriptors$")
	cmd.Env = append(os.Environ(), "KLASY_TEST_AGENT_NOFILE=64",
		"KLASY_TEST_AGENT_TLS="+strings.Join([]string{files.CA, files.Cert, files.Key}, string(filepath.ListSeparator)))
	cmd.ExtraFiles = []*os.File{lf} // fd 3
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	logc := make(chan string, 1)
	go func() { b, _ := io.ReadAll(stderr); logc <- string(b) }()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		stdin.Close()
		select {
		case err := <-exited:
			log := <-logc
			if err != nil {
				t.Errorf("the agent exited: %v; its log:\n%s", err, log)
			} else if !strings.Contains(log, "too many open files") || !strings.Contains(log, "accepting connections again") {
				t.Errorf("the agent's log does not say it ran out of descriptors and recovered:\n%s", log)
			}
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			t.Errorf("the agent did not exit after its stdin closed")
		}
	}()
	// 200 idle connections: the agent accepts until its 64 descriptors
	// are gone; the others wait in the listen backlog.
	var idle []net.Conn
	// From 8 hosts of 127/8, each under MaxPendingPerPeer: what runs
	// the agent out of descriptors is many peers, not one.
	for i := range 200 {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(2+i%8))}}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		idle = append(idle, c)
	}
	defer func() {
		for _, c := range idle {
			c.Close()
		}
	}()
	ctx := ctxT(t)
	c, err := f.Dial(ctx, "dom0")
	if err != nil {
		select {
		case werr := <-exited:
			exited <- werr
			t.Fatalf("Dial: %v; the agent exited: %v", err, werr)
		default:
		}
		t.Fatalf("Dial: %v", err)
	}
	defer c.Close()
	path := filepath.Join(t.TempDir(), "written")
	if err := c.WriteFile(ctx, path, []byte("served"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "served" {
		t.Errorf("the agent wrote %q, %v", b, err)
	}
}

// agentUnderLimit is TestTLSOutOfDescriptors's agent: ServeTLS on the
// listener at fd 3 with at most KLASY_TEST_AGENT_NOFILE descriptors and
// an AuthTimeout of 500 ms, until its standard input closes; its log on
// standard error.
func agentUnderLimit(t *testing.T) {
	var n uint64
	fmt.Sscan(os.Getenv("KLASY_TEST_AGENT_NOFILE"), &n)
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	lim.Cur = n
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	ln, err := net.FileListener(os.NewFile(3, "listener"))
	if err != nil {
		t.Fatal(err)
	}
	tf := strings.Split(os.Getenv("KLASY_TEST_AGENT_TLS"), string(filepath.ListSeparator))
	cfg, err := agent.ServerTLSConfig(agent.TLSFiles{CA: tf[0], Cert: tf[1], Key: tf[2]})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		io.Copy(io.Discard, bufio.NewReader(os.Stdin))
		cancel()
	}()
	err = agent.ServeTLS(ctx, ln, cfg, agent.ServerOptions{Log: os.Stderr, AuthTimeout: 500 * time.Millisecond})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("ServeTLS: %v", err)
	}
}

// TestTLSPerPeerLimit: one peer host past MaxPendingPerPeer connections
// waiting for the handshake has its further ones closed at once, said in
// the log once, while another host's controller is still served.
func TestTLSPerPeerLimit(t *testing.T) {
	f, log, ln := tlsAgent(t, agent.ServerOptions{AuthTimeout: time.Minute})
	// The flooding peer: 127.0.0.2, which Linux routes to lo like all of
	// 127/8.
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
	const extra = 8
	var conns []net.Conn
	for range agent.MaxPendingPerPeer + extra {
		c, err := d.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns = append(conns, c)
	}
	closed := 0
	for _, c := range conns {
		c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		if _, err := c.Read(make([]byte, 1)); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			closed++
		}
	}
	if closed != extra {
		t.Errorf("%d of %d connections from one host closed at once, want the %d past %d", closed, len(conns), extra, agent.MaxPendingPerPeer)
	}
	waitLog(t, log, "refusing connections from 127.0.0.2", fmt.Sprintf("%d already waiting", agent.MaxPendingPerPeer))
	if n := strings.Count(log.String(), "refusing connections from"); n != 1 {
		t.Errorf("the refusal logged %d times, want once:\n%s", n, log.String())
	}
	// The controller, from 127.0.0.1, is served.
	c, err := f.Dial(ctxT(t), "dom0")
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}
