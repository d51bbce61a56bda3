package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"github.com/klasy/klasy/agent"
	"github.com/klasy/klasy/lab"
)

const labHelp = `usage: klasy lab up [--name N] [--kernel debian|built] [--mem MB] [--cpus C] [--lan] [--timeout D]
       klasy lab exec [--timeout D] [--stdin] N -- CMD [ARG...]
       klasy lab status [--json] [N]
       klasy lab down [--timeout D] N
       klasy lab console N

A lab is a Linux kernel booted under QEMU (TCG) with a busybox initramfs
and the klasy agent listening on a virtio-serial port, so aspects can
be woven into a kernel that is not the host's.

  up       boot a lab and return once its agent answers. QEMU keeps
           running in the background; its console goes to a log file
           (see status). --kernel debian (default) is Debian's 6.1 kernel
           (make debian-kernel); --kernel built is linux-source-6.1 built
           with the klasy GCC plugin (make lab-kernel). --lan adds eth1 on
           a LAN shared by all --lan labs (10.33.0.SLOT/24); eth0 is QEMU
           user networking (10.0.2.15, host 10.0.2.2).
           Defaults: --name default --mem 512 --cpus 1 --timeout 3m.
  exec     run a command in the lab through the agent; its output is
           printed and its exit status becomes klasy's (127 when the
           guest has no such command, 126 when it cannot run it, as in a
           shell). --stdin passes klasy's standard input to it.
  status   list labs: name, state, kernel, pid, address, console log.
           A lab whose QEMU died is "stale"; down or up removes it.
           --json prints one object per line.
  down     power the lab off cleanly (QEMU's quit command, then SIGKILL,
           if it does not go) and remove its state.
  console  attach to the guest console (a shell on ttyS0); Ctrl-] quits.
           With standard input not a terminal, send it and print the
           output until the guest is quiet for a second.

Example:
  klasy lab up --name a
  klasy lab exec a -- cat /sys/kernel/debug/kprobes/list
  klasy lab down a
`

func init() {
	register(&command{
		Name:    "lab",
		Summary: "boot a test kernel under QEMU and run commands in it",
		Help:    labHelp,
		Run:     runLab,
	})
}

func runLab(s *stdio, args []string) error {
	if len(args) == 0 {
		return usageError{Msg: "missing subcommand (up, exec, status, down, console)"}
	}
	sub, rest := args[0], args[1:]
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	switch sub {
	case "up":
		return labUp(ctx, s, rest)
	case "exec":
		return labExec(ctx, s, rest)
	case "status":
		return labStatus(s, rest)
	case "down":
		return labDown(ctx, s, rest)
	case "console":
		return labConsole(ctx, s, rest)
	}
	return usageError{Msg: fmt.Sprintf("unknown subcommand %q (up, exec, status, down, console)", sub)}
}

func newFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("klasy lab "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return usageError{Msg: err.Error()}
	}
	return nil
}

// oneName takes the lab name that must be the only positional argument.
func oneName(fs *flag.FlagSet) (string, error) {
	if fs.NArg() != 1 {
		return "", usageError{Msg: fmt.Sprintf("%s takes one lab name, got %d arguments", fs.Name(), fs.NArg())}
	}
	return fs.Arg(0), lab.CheckName(fs.Arg(0))
}

func labUp(ctx context.Context, s *stdio, args []string) error {
	fs := newFlags("up")
	var cfg lab.Config
	fs.StringVar(&cfg.Name, "name", "default", "lab name")
	fs.StringVar(&cfg.Kernel, "kernel", lab.Debian, "kernel flavor: debian or built")
	fs.IntVar(&cfg.MemMB, "mem", 512, "guest memory in MB")
	fs.IntVar(&cfg.CPUs, "cpus", 1, "guest CPUs")
	fs.BoolVar(&cfg.LAN, "lan", false, "join the labs' shared LAN (eth1)")
	fs.DurationVar(&cfg.BootTimeout, "timeout", 3*time.Minute, "how long to wait for the agent")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usageError{Msg: fmt.Sprintf("unexpected argument %q (the name goes in --name)", fs.Arg(0))}
	}
	if cfg.Kernel != lab.Debian && cfg.Kernel != lab.Built {
		return usageError{Msg: fmt.Sprintf("--kernel %q: want debian or built", cfg.Kernel)}
	}
	if err := lab.CheckName(cfg.Name); err != nil {
		return usageError{Msg: err.Error()}
	}
	cfg.Progress = s.Err
	l, err := lab.Up(ctx, cfg)
	if err != nil {
		return err
	}
	defer l.Close()
	fmt.Fprintf(s.Out, "lab %s is up: %s kernel %s, pid %d, console log %s\n", l.Name(), l.Kernel().Flavor, l.Kernel().Release, l.PID(), l.ConsoleLog())
	return nil
}

func labExec(ctx context.Context, s *stdio, args []string) error {
	fs := newFlags("exec")
	timeout := fs.Duration("timeout", 0, "give up on the command after this long (0: no limit)")
	withStdin := fs.Bool("stdin", false, "pass standard input to the command")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	rest := fs.Args()
	if len(rest) == 0 {
		return usageError{Msg: "exec needs a lab name and a command: klasy lab exec N -- CMD"}
	}
	name, argv := rest[0], rest[1:]
	if len(argv) > 0 && argv[0] == "--" {
		argv = argv[1:]
	}
	if len(argv) == 0 {
		return usageError{Msg: "exec needs a command after the lab name: klasy lab exec " + name + " -- CMD"}
	}
	if err := lab.CheckName(name); err != nil {
		return usageError{Msg: err.Error()}
	}
	var stdin []byte
	if *withStdin {
		var err error
		if stdin, err = io.ReadAll(s.In); err != nil {
			return fmt.Errorf("reading standard input: %w", err)
		}
	}
	l, err := lab.Get(ctx, name)
	if err != nil {
		return err
	}
	defer l.Close()
	if *timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *timeout)
		defer cancel()
	}
	res, err := l.Client().Run(ctx, argv, stdin)
	if err != nil {
		err = fmt.Errorf("running %s in lab %s: %w", argv[0], name, l.Explain(err))
		// A command that could not start exits as in a shell (and ssh):
		// 127 when it does not exist, 126 when it cannot be run.
		var re *agent.RemoteError
		if errors.As(err, &re) && re.Kind == agent.KindErrno {
			fmt.Fprintf(s.Err, "klasy: %v\n", err)
			if errors.Is(err, os.ErrNotExist) {
				return exitError{Code: 127}
			}
			return exitError{Code: 126}
		}
		return err
	}
	s.Out.Write(res.Stdout)
	s.Err.Write(res.Stderr)
	if res.ExitCode != 0 {
		return exitError{Code: res.ExitCode}
	}
	return nil
}

func labStatus(s *stdio, args []string) error {
	fs := newFlags("status")
	asJSON := fs.Bool("json", false, "one JSON object per lab and line")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 1 {
		return usageError{Msg: "status takes at most one lab name"}
	}
	sts, err := lab.List()
	if err != nil {
		return err
	}
	if fs.NArg() == 1 {
		var one []lab.Status
		for _, st := range sts {
			if st.Name == fs.Arg(0) {
				one = append(one, st)
			}
		}
		if len(one) == 0 {
			return fmt.Errorf("no lab called %q (klasy lab status lists them)", fs.Arg(0))
		}
		sts = one
	}
	if *asJSON {
		enc := json.NewEncoder(s.Out)
		for _, st := range sts {
			if err := enc.Encode(st); err != nil {
				return err
			}
		}
		return nil
	}
	if len(sts) == 0 {
		fmt.Fprintln(s.Err, "no labs (start one with: klasy lab up)")
		return nil
	}
	fmt.Fprintf(s.Out, "%-12s %-8s %-7s %-18s %-8s %-6s %-5s %-16s %s\n", "NAME", "STATE", "KERNEL", "RELEASE", "PID", "MEM", "CPUS", "ADDR", "CONSOLE LOG")
	for _, st := range sts {
		addr := st.Addr
		if st.LANAddr != "" {
			addr += "," + st.LANAddr
		}
		fmt.Fprintf(s.Out, "%-12s %-8s %-7s %-18s %-8d %-6s %-5d %-16s %s\n", st.Name, st.State, st.Kernel, st.Release, st.PID,
			fmt.Sprintf("%dM", st.MemMB), st.CPUs, addr, st.ConsoleLog)
		if st.State == "stale" {
			fmt.Fprintf(s.Err, "lab %s: QEMU is gone; klasy lab down %s removes its state\n", st.Name, st.Name)
		}
	}
	return nil
}

func labDown(ctx context.Context, s *stdio, args []string) error {
	fs := newFlags("down")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	name, err := oneName(fs)
	if err != nil {
		return err
	}
	return lab.Down(ctx, name, s.Err)
}

func labConsole(ctx context.Context, s *stdio, args []string) error {
	fs := newFlags("console")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	name, err := oneName(fs)
	if err != nil {
		return err
	}
	sock, err := lab.ConsoleSocketOf(name)
	if err != nil {
		return err
	}
	conn, err := net.DialTimeout("unix", sock, 5*time.Second)
	if err != nil {
		return fmt.Errorf("connecting to the console of lab %s: %w", name, err)
	}
	defer conn.Close()
	in, isFile := s.In.(*os.File)
	if isFile {
		if restore, err := makeRaw(int(in.Fd())); err == nil {
			defer restore()
			fmt.Fprintf(s.Err, "connected to the console of lab %s; Ctrl-] quits\r\n", name)
			conn.Write([]byte("\n")) // a fresh prompt
			return interactive(conn, in, flushing{s})
		}
	}
	// Not a terminal: send the input, print until a second of quiet.
	done := make(chan struct{})
	go func() {
		io.Copy(conn, s.In)
		close(done)
	}()
	buf := make([]byte, 4096)
	inputDone := false
	for {
		if inputDone {
			conn.SetReadDeadline(time.Now().Add(time.Second))
		} else {
			conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		}
		n, err := conn.Read(buf)
		s.Out.Write(buf[:n])
		if err := s.flush(); err != nil {
			return err
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			if inputDone {
				return nil
			}
			select {
			case <-done:
				inputDone = true
			case <-ctx.Done():
				return nil
			default:
			}
			continue
		}
		if err != nil {
			return nil
		}
	}
}

// interactive copies between the terminal and the console until Ctrl-]
// or until QEMU closes the console.
func interactive(conn net.Conn, in *os.File, out io.Writer) error {
	errc := make(chan error, 2)
	go func() {
		_, err := io.Copy(out, conn)
		errc <- err
	}()
	go func() {
		buf := make([]byte, 256)
		for {
			n, err := in.Read(buf)
			if i := strings.IndexByte(string(buf[:n]), 0x1d); i >= 0 {
				conn.Write(buf[:i])
				errc <- nil
				return
			}
			if _, werr := conn.Write(buf[:n]); werr != nil {
				errc <- werr
				return
			}
			if err != nil {
				errc <- nil
				return
			}
		}
	}()
	<-errc
	fmt.Fprint(out, "\r\n")
	return nil
}

// flushing writes to s.Out and flushes it at once: the console is
// interactive.
type flushing struct{ s *stdio }

func (f flushing) Write(p []byte) (int, error) {
	n, err := f.s.Out.Write(p)
	if err == nil {
		err = f.s.flush()
	}
	return n, err
}

// makeRaw puts a terminal into raw mode (cfmakeraw) and returns the
// function restoring it; it fails when fd is not a terminal.
func makeRaw(fd int) (func(), error) {
	var old syscall.Termios
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.TCGETS, uintptr(unsafe.Pointer(&old))); e != 0 {
		return nil, e
	}
	raw := old
	raw.Iflag &^= syscall.IGNBRK | syscall.BRKINT | syscall.PARMRK | syscall.ISTRIP | syscall.INLCR | syscall.IGNCR | syscall.ICRNL | syscall.IXON
	raw.Oflag &^= syscall.OPOST
	raw.Lflag &^= syscall.ECHO | syscall.ECHONL | syscall.ICANON | syscall.ISIG | syscall.IEXTEN
	raw.Cflag &^= syscall.CSIZE | syscall.PARENB
	raw.Cflag |= syscall.CS8
	raw.Cc[syscall.VMIN] = 1
	raw.Cc[syscall.VTIME] = 0
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.TCSETS, uintptr(unsafe.Pointer(&raw))); e != 0 {
		return nil, e
	}
	return func() {
		syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.TCSETS, uintptr(unsafe.Pointer(&old)))
	}, nil
}
