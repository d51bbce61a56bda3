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
		Help:    helpText("agent"),
		Run:     runAgent,
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
	data, err := domains.ReadFile(fs.Arg(0))
	if err != nil {
		return err
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
