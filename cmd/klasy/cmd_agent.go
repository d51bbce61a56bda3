package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/klasy/klasy/agent"
)

func init() {
	register(&command{
		Name:    "agent",
		Summary: "serve the klasy agent protocol on a serial or virtio port (runs inside a guest)",
		Help: `usage: klasy agent [--device /dev/ttyS1] [--allow-run]

Runs inside a guest kernel (the lab's QEMU guests) and answers requests
from klasy on the host over a serial line or a virtio-serial port: read
and write files, load and unload kernel modules, list modules, stream
records from a device or file, and, with --allow-run, run commands.

The device is opened, put in raw mode (no echo, no CR/LF translation) and
kept open: bytes the host sends while nobody holds the line open are lost.
A virtio-serial port (/dev/vportNpM) has no line settings; it reads as end
of file while no host is connected, and the agent waits for one.
Garbage on the line (console text, echoes from before raw mode) is skipped;
a damaged request is answered with an error and never executed. The agent
serves until it is killed; if the line fails it reopens it.

Flags:
  --device PATH   serial device or virtio port to serve on (default /dev/ttyS1)
  --allow-run     allow clients to run arbitrary commands (lab guests only)

Example (the lab guest's /etc/klasy/agent):
  klasy agent --device /dev/vport0p1 --allow-run
`,
		Run: runAgent,
	})
}

func runAgent(s *stdio, args []string) error {
	fs := newFlagSet("agent")
	device := fs.String("device", "/dev/ttyS1", "")
	allowRun := fs.Bool("allow-run", false, "")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usageError{Msg: fmt.Sprintf("unexpected argument %q", fs.Arg(0))}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	opts := agent.ServerOptions{AllowRun: *allowRun, Log: s.Err}
	first := true
	for {
		f, err := agent.OpenPort(*device)
		if err != nil {
			if first {
				// A wrong --device is a mistake to report, not to retry.
				return err
			}
			fmt.Fprintf(s.Err, "klasy agent: %v; retrying\n", err)
		} else {
			if first {
				fmt.Fprintf(s.Err, "klasy agent: serving on %s (run %s)\n", *device, map[bool]string{true: "allowed", false: "refused"}[*allowRun])
			}
			err = agent.Serve(ctx, f, opts)
			f.Close()
			if ctx.Err() != nil {
				return nil
			}
			if err == nil {
				err = errors.New("end of file")
			}
			fmt.Fprintf(s.Err, "klasy agent: %s: %v; reopening\n", *device, err)
		}
		first = false
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
}
