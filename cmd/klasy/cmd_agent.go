package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/klasy/klasy/agent"
	"github.com/klasy/klasy/domains"
)

func init() {
	register(&command{
		Name:    "agent",
		Summary: "serve the klasy agent protocol on a serial or virtio port, or over mutual TLS (runs inside a guest)",
		Help: `usage: klasy agent [--device /dev/ttyS1] [--allow-run] [--log FILE]
       klasy agent --listen ADDR --tls-ca CA --tls-cert CERT --tls-key KEY [--allow-run] [--log FILE]
       klasy agent keys FILE

Runs inside a guest kernel (a lab's QEMU guest, a Xen lab's domain) and
answers requests from klasy on the host: read and write files, load and
unload kernel modules, list modules, stream records from a device or
file, and, with --allow-run, run commands.

On a serial line or virtio-serial port (--device, the default): the
device is opened, put in raw mode (no echo, no CR/LF translation) and
kept open: bytes the host sends while nobody holds the line open are lost.
A virtio-serial port (/dev/vportNpM) has no line settings; it reads as end
of file while no host is connected, and the agent waits for one.
Garbage on the line (console text, echoes from before raw mode) is skipped;
a damaged request is answered with an error and never executed. The agent
serves until it is killed; if the line fails it reopens it.

On the network (--listen): TCP with mutual TLS 1.3 (Go's crypto/tls).
Only a client whose certificate the CA (--tls-ca) issued to the
controller ("klasy controller", for client authentication) is served;
any other connection (no certificate, a certificate of another domains
file's CA, a domain's own certificate, plain TCP) is closed before a
request is read, and logged with the peer's address and the reason.
TLS protects each connection against replay (fresh keys per connection,
sequence numbers per record; no 0-RTT), so a recorded request replayed
on a new connection is refused too. Each connection is served on its
own; a klasy domains file (klasy help lab, klasy agent keys) names the
agent's address and keys.

Commands run only with --allow-run, which labs give their guests: an
agent outside a lab offers none and logs each refused attempt.

keys FILE makes the key material the domains FILE names and does not
have yet: its CA, the controller's certificate and key, and each
domain's (ECDSA P-256; private keys mode 0600); existing ones are kept.
One CA per domains file: a certificate of another file is refused by
every agent of this one.

Flags:
  --device PATH   serial device or virtio port to serve on (default /dev/ttyS1)
  --listen ADDR   serve on TCP ADDR (host:port, or :port) with mutual TLS
  --tls-ca FILE   the CA certificate of the domains file (with --listen)
  --tls-cert FILE this agent's certificate, --tls-key FILE its key
  --allow-run     allow clients to run arbitrary commands (lab guests only)
  --log FILE      also append the agent's log (refused requests) to FILE

Examples (a lab guest's /etc/klasy/agent; a Xen lab domain's):
  klasy agent --device /dev/vport0p1 --allow-run
  klasy agent --listen :7070 --tls-ca ca.crt --tls-cert dom0.crt --tls-key dom0.key
  klasy agent keys domains.yaml
`,
		Run: runAgent,
	})
}

func runAgent(s *stdio, args []string) error {
	if len(args) > 0 && args[0] == "keys" {
		return agentKeys(s, args[1:])
	}
	fs := newFlagSet("agent")
	device := fs.String("device", "/dev/ttyS1", "")
	allowRun := fs.Bool("allow-run", false, "")
	listen := fs.String("listen", "", "")
	var tf agent.TLSFiles
	fs.StringVar(&tf.CA, "tls-ca", "", "")
	fs.StringVar(&tf.Cert, "tls-cert", "", "")
	fs.StringVar(&tf.Key, "tls-key", "", "")
	logFile := fs.String("log", "", "")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usageError{Msg: fmt.Sprintf("unexpected argument %q", fs.Arg(0))}
	}
	deviceSet := false
	fs.Visit(func(f *flag.Flag) { deviceSet = deviceSet || f.Name == "device" })
	tlsSet := tf.CA != "" || tf.Cert != "" || tf.Key != ""
	switch {
	case *listen != "" && deviceSet:
		return usageError{Msg: "--listen and --device exclude each other"}
	case *listen != "" && (tf.CA == "" || tf.Cert == "" || tf.Key == ""):
		return usageError{Msg: "--listen needs --tls-ca, --tls-cert and --tls-key: the agent serves the network over mutual TLS only"}
	case *listen == "" && tlsSet:
		return usageError{Msg: "--tls-ca, --tls-cert and --tls-key go with --listen"}
	}
	logw := io.Writer(s.Err)
	if *logFile != "" {
		f, err := os.OpenFile(*logFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			return fmt.Errorf("opening the agent's log: %w", err)
		}
		defer f.Close()
		logw = io.MultiWriter(s.Err, f)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	opts := agent.ServerOptions{AllowRun: *allowRun, Log: logw}
	run := map[bool]string{true: "allowed", false: "refused"}[*allowRun]
	if *listen != "" {
		cfg, err := agent.ServerTLSConfig(tf)
		if err != nil {
			return fmt.Errorf("agent: %w", err)
		}
		ln, err := net.Listen("tcp", *listen)
		if err != nil {
			return fmt.Errorf("agent: %w", err)
		}
		fmt.Fprintf(logw, "klasy agent: serving on %s with mutual TLS (run %s)\n", ln.Addr(), run)
		if err := agent.ServeTLS(ctx, ln, cfg, opts); err != nil && ctx.Err() == nil {
			return err
		}
		return nil
	}
	first := true
	for {
		f, err := agent.OpenPort(*device)
		if err != nil {
			if first {
				// A wrong --device is a mistake to report, not to retry.
				return err
			}
			fmt.Fprintf(logw, "klasy agent: %v; retrying\n", err)
		} else {
			if first {
				fmt.Fprintf(logw, "klasy agent: serving on %s (run %s)\n", *device, run)
			}
			err = agent.Serve(ctx, f, opts)
			f.Close()
			if ctx.Err() != nil {
				return nil
			}
			if err == nil {
				err = errors.New("end of file")
			}
			fmt.Fprintf(logw, "klasy agent: %s: %v; reopening\n", *device, err)
		}
		first = false
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
}

// agentKeys is klasy agent keys FILE.
func agentKeys(s *stdio, args []string) error {
	fs := newFlagSet("agent keys")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError{Msg: "keys takes one domains file"}
	}
	data, err := os.ReadFile(fs.Arg(0))
	if err != nil {
		return fmt.Errorf("reading the domains file: %w", err)
	}
	f, err := domains.Parse(fs.Arg(0), data)
	if err != nil {
		return err
	}
	wrote, err := domains.GenerateKeys(f)
	for _, w := range wrote {
		fmt.Fprintf(s.Out, "wrote %s\n", w)
	}
	if err != nil {
		return fmt.Errorf("making the keys of %s: %w", fs.Arg(0), err)
	}
	if len(wrote) == 0 {
		fmt.Fprintf(s.Err, "klasy: %s has all its keys already\n", fs.Arg(0))
	}
	return nil
}
