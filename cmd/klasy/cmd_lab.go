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

	"golang.org/x/term"

	"github.com/klasy/klasy/agent/wire"
	"github.com/klasy/klasy/lab"
	"github.com/klasy/klasy/lab/xenlab"
)

const labHelp = `usage: klasy lab up [NAME] [--kernel debian|built] [--mem MB] [--cpus C] [--lan] [--timeout D]
       klasy lab up --xen [--domus N] [--plugin PATH] [--mem MB] [--timeout D] NAME
       klasy lab exec [--timeout D] [--stdin] [--domain D] NAME -- CMD [ARG...]
       klasy lab status [--json] [NAME]
       klasy lab down NAME
       klasy lab console NAME

A lab is a Linux kernel booted under QEMU (TCG) with a busybox initramfs
and the klasy agent listening on a virtio-serial port, so aspects can
be woven into a kernel that is not the host's.

  up       boot a lab and return once its agent answers. QEMU keeps
           running in the background, and with it the lab's mux, a
           process that shares the agent's line among the processes that
           use the lab;
           the console goes to a log file (see status). --kernel debian
           (default) is Debian's 6.1 kernel (make debian-kernel);
           --kernel built is linux-source-6.1 built with the klasy GCC
           plugin (make lab-kernel). --lan adds eth1 on a LAN shared by
           all --lan labs (10.33.0.SLOT/24); eth0 is QEMU user
           networking (10.0.2.15, host 10.0.2.2).
           Defaults: NAME default, --mem 512 (128..65536), --cpus 1
           (1..64), --timeout 3m. --name NAME is accepted for NAME.
           --xen boots a Xen lab: Xen 4.17 under QEMU with a PV Domain 0
           and --domus N PV Domain U guests (default 1, up to 8) on a
           bridge, xenbr0, every domain running Debian's 6.1 kernel with
           xen-netback (Domain 0) and xen-netfront (the guests) rebuilt
           with the klasy GCC plugin (--plugin, default gcc-patches/
           klasy.so of this checkout or $KLASY_PLUGIN; built once, about
           15 s). Its images come from make xen-lab. Each domain's agent
           listens on TCP with mutual TLS; the lab writes a domains file
           (status shows it) with its agents' addresses and this lab's
           own CA, certificates and keys. Booting takes 1-3 minutes under
           TCG; --mem defaults to what the domains need (1.5 GB for one
           guest), --timeout to 6m.
  exec     run a command in the lab through the agent. Its output is
           streamed back as it comes, and its exit status becomes klasy's
           (127 when the guest has no such command, 126 when it cannot
           run it, as in a shell). --stdin streams klasy's standard input
           to the command as it reads it. Neither input nor output has a
           size limit. Ctrl-C or SIGTERM kills the command in the guest,
           and klasy exits 130 or 143, as a shell does. Any number of
           processes may use a lab at once. Flags go before --: what
           follows it is the command, its flags included. In a Xen lab
           the command runs in Domain 0, or in --domain D (dom0,
           domU1...), through that domain's agent over mutual TLS.
  status   list labs: name, state, kernel, QEMU's pid, the mux's pid,
           address, console log. A lab whose QEMU died is "stale"; down
           or up removes it. A lab whose record (lab.json) is damaged is
           still found by its QEMU: status says what is wrong, and down
           stops it. --json prints one object per line.
  down     power the lab off cleanly (QEMU's quit command, then SIGKILL,
           if it does not go), stop its mux and remove its state.
  console  attach to the guest console (a shell on ttyS0; in a Xen lab,
           Xen's console, which carries Domain 0's and, prefixed with
           their names, the guests' output); Ctrl-] quits.
           With standard input not a terminal, send it and print the
           output until the guest is quiet for a second.

Flags go anywhere before --, as --flag value or --flag=value.

Examples:
  klasy lab up a
  klasy lab exec a -- cat /sys/kernel/debug/kprobes/list
  klasy lab down a
  klasy lab up --xen x
  klasy lab exec --domain domU1 x -- ip addr show eth0
  klasy lab down x
`

func init() {
	register(&command{
		Name:    "lab",
		Summary: "boot a test kernel under QEMU and run commands in it",
		Help:    labHelp,
		Run:     runLab,
	})
}

// labSubcommands are klasy lab's subcommands; each takes its lab name
// as a positional argument.
var labSubcommands = map[string]func(ctx context.Context, s *stdio, args []string) error{
	"up":      labUp,
	"exec":    labExec,
	"status":  labStatus,
	"down":    labDown,
	"console": labConsole,
}

func runLab(s *stdio, args []string) error {
	if len(args) == 0 {
		return usageError{Msg: "missing subcommand (up, exec, status, down, console)"}
	}
	sub, ok := labSubcommands[args[0]]
	if !ok {
		return usageError{Msg: fmt.Sprintf("unknown subcommand %q (up, exec, status, down, console)", args[0])}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return sub(ctx, s, args[1:])
}

// oneName takes the lab name that must be the only positional argument.
func oneName(fs *flagSet) (string, error) {
	if fs.NArg() != 1 {
		return "", usageError{Msg: fmt.Sprintf("%s takes one lab name, got %d arguments", fs.cmd, fs.NArg())}
	}
	if err := lab.CheckName(fs.Arg(0)); err != nil {
		return "", usageError{Msg: err.Error()}
	}
	return fs.Arg(0), nil
}

func labUp(ctx context.Context, s *stdio, args []string) error {
	fs := newFlagSet("lab up")
	var cfg lab.Config
	fs.StringVar(&cfg.Name, "name", "", "lab name (the positional NAME, for older scripts)")
	fs.StringVar(&cfg.Kernel, "kernel", lab.Debian, "kernel flavor: debian or built")
	fs.IntVar(&cfg.MemMB, "mem", 512, "guest memory in MB")
	fs.IntVar(&cfg.CPUs, "cpus", 1, "guest CPUs")
	fs.BoolVar(&cfg.LAN, "lan", false, "join the labs' shared LAN (eth1)")
	fs.DurationVar(&cfg.BootTimeout, "timeout", 3*time.Minute, "how long to wait for the agent")
	xen := fs.Bool("xen", false, "boot a Xen lab")
	var xc xenlab.Config
	fs.IntVar(&xc.DomUs, "domus", 1, "Domain U guests of a Xen lab")
	fs.StringVar(&xc.Plugin, "plugin", "", "the klasy GCC plugin the Xen drivers are built with")
	if err := fs.Parse(args); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *xen {
		for _, f := range []string{"lan", "kernel", "cpus"} {
			if set[f] {
				return usageError{Msg: fmt.Sprintf("--%s does not apply to a Xen lab", f)}
			}
		}
		if xc.DomUs < 1 || xc.DomUs > 8 {
			return usageError{Msg: fmt.Sprintf("--domus %d: want 1..8", xc.DomUs)}
		}
		cfg.Xen = &xc
		if !set["mem"] {
			cfg.MemMB = 0 // what the domains need
		}
		if !set["timeout"] {
			cfg.BootTimeout = 6 * time.Minute
		}
	} else if set["domus"] || set["plugin"] {
		return usageError{Msg: "--domus and --plugin go with --xen"}
	}
	switch {
	case fs.NArg() > 1:
		return usageError{Msg: fmt.Sprintf("unexpected argument %q (up takes one lab name)", fs.Arg(1))}
	case fs.NArg() == 1 && cfg.Name != "" && cfg.Name != fs.Arg(0):
		return usageError{Msg: fmt.Sprintf("two names: %q and --name %q", fs.Arg(0), cfg.Name)}
	case fs.NArg() == 1:
		cfg.Name = fs.Arg(0)
	case cfg.Name == "":
		cfg.Name = "default"
	}
	if cfg.Kernel != lab.Debian && cfg.Kernel != lab.Built {
		return usageError{Msg: fmt.Sprintf("--kernel %q: want debian or built", cfg.Kernel)}
	}
	// lab.Config takes 0 for the default: the range is checked here.
	if (cfg.MemMB < 128 && cfg.Xen == nil) || cfg.MemMB > 65536 {
		return usageError{Msg: fmt.Sprintf("--mem %d: want 128..65536 (MB)", cfg.MemMB)}
	}
	if cfg.CPUs < 1 || cfg.CPUs > 64 {
		return usageError{Msg: fmt.Sprintf("--cpus %d: want 1..64", cfg.CPUs)}
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
	if l.IsXen() {
		fmt.Fprintf(s.Out, "lab %s is up: Xen with %s kernel %s, pid %d, console log %s\n", l.Name(), l.Kernel().Flavor, l.Kernel().Release, l.PID(), l.ConsoleLog())
		for _, d := range l.Domains() {
			fmt.Fprintf(s.Out, "  %-6s %-14s agent %s (mutual TLS)\n", d.Name, d.GuestAddr, d.AgentAddr)
		}
		fmt.Fprintf(s.Out, "domains file %s\n", l.DomainsFile())
		return nil
	}
	fmt.Fprintf(s.Out, "lab %s is up: %s kernel %s, pid %d, console log %s\n", l.Name(), l.Kernel().Flavor, l.Kernel().Release, l.PID(), l.ConsoleLog())
	return nil
}

func labExec(ctx context.Context, s *stdio, args []string) error {
	fs := newFlagSet("lab exec")
	timeout := fs.Duration("timeout", 0, "give up on the command after this long (0: no limit)")
	withStdin := fs.Bool("stdin", false, "pass standard input to the command")
	domain := fs.String("domain", "", "the domain of a Xen lab to run in (default dom0)")
	if err := fs.Parse(args); err != nil {
		var ue usageError
		if errors.As(err, &ue) && strings.HasPrefix(ue.Msg, "flag provided but not defined") {
			ue.Msg += " (the command and its flags go after --: klasy lab exec N -- CMD ARG...)"
			return ue
		}
		return err
	}
	rest := fs.Args()
	if len(rest) == 0 {
		return usageError{Msg: "exec needs a lab name and a command: klasy lab exec N -- CMD"}
	}
	name, argv := rest[0], rest[1:]
	if len(argv) == 0 {
		return usageError{Msg: "exec needs a command after the lab name: klasy lab exec " + name + " -- CMD"}
	}
	if err := lab.CheckName(name); err != nil {
		return usageError{Msg: err.Error()}
	}
	// Which signal stopped us decides the exit status, as in a shell.
	sigc := make(chan os.Signal, 1)
	signal.Notify(sigc, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigc)
	interrupted := func(doing string) error {
		code, name := 130, "SIGINT"
		select {
		case sig := <-sigc:
			if sig == syscall.SIGTERM {
				code, name = 143, "SIGTERM"
			}
		case <-time.After(time.Second):
		}
		fmt.Fprintf(s.Err, "klasy: %s: interrupted by %s\n", doing, name)
		return exitError{Code: code}
	}
	// The lab first: nothing is read from stdin for a lab that is not
	// there.
	l, err := lab.Get(ctx, name)
	if err != nil {
		if ctx.Err() != nil {
			return interrupted("connecting to lab " + name)
		}
		return err
	}
	defer l.Close()
	client := l.Client()
	if *domain != "" {
		if !l.IsXen() {
			return fmt.Errorf("lab %s is not a Xen lab: --domain does not apply", name)
		}
		c, err := l.Dial(ctx, *domain)
		if err != nil {
			if ctx.Err() != nil {
				return interrupted("connecting to " + *domain + " of lab " + name)
			}
			return err
		}
		defer c.Close()
		client = c
	}
	parent := ctx
	if *timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *timeout)
		defer cancel()
	}
	// stdin goes to the guest as the command takes it, and the output
	// comes back as it is made: neither is held whole, nor bounded.
	var stdin io.Reader
	if *withStdin {
		stdin = s.In
	}
	code, err := client.Exec(ctx, argv, stdin, s.Out, s.Err)
	if err != nil {
		if parent.Err() != nil {
			return interrupted(fmt.Sprintf("running %s in lab %s", argv[0], name))
		}
		err = fmt.Errorf("running %s in lab %s: %w", argv[0], name, l.Explain(err))
		// A command that could not start exits as in a shell (and ssh):
		// 127 when it does not exist, 126 when it cannot be run.
		var re *wire.RemoteError
		if errors.As(err, &re) && re.Kind == wire.KindErrno {
			fmt.Fprintf(s.Err, "klasy: %v\n", err)
			if errors.Is(err, os.ErrNotExist) {
				return exitError{Code: 127}
			}
			return exitError{Code: 126}
		}
		return err
	}
	if code != 0 {
		return exitError{Code: code}
	}
	return nil
}

func labStatus(_ context.Context, s *stdio, args []string) error {
	fs := newFlagSet("lab status")
	asJSON := fs.Bool("json", false, "one JSON object per lab and line")
	if err := fs.Parse(args); err != nil {
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
	fmt.Fprintf(s.Out, "%-12s %-8s %-7s %-18s %-8s %-8s %-6s %-5s %-16s %s\n", "NAME", "STATE", "KERNEL", "RELEASE", "PID", "MUX", "MEM", "CPUS", "ADDR", "CONSOLE LOG")
	for _, st := range sts {
		addr := st.Addr
		if st.LANAddr != "" {
			addr += "," + st.LANAddr
		}
		mux := "-"
		if st.MuxPID > 0 {
			mux = fmt.Sprint(st.MuxPID)
		}
		mem, cpus := "-", "-"
		if st.MemMB > 0 {
			mem, cpus = fmt.Sprintf("%dM", st.MemMB), fmt.Sprint(st.CPUs)
		}
		fmt.Fprintf(s.Out, "%-12s %-8s %-7s %-18s %-8d %-8s %-6s %-5s %-16s %s\n", st.Name, st.State, orDash(st.Kernel), orDash(st.Release), st.PID,
			mux, mem, cpus, orDash(addr), st.ConsoleLog)
		for _, d := range st.Domains {
			fmt.Fprintf(s.Out, "  %-10s %-14s agent %s (mutual TLS, %s)\n", d.Name, d.GuestAddr, d.Agent, st.DomainsFile)
		}
		switch {
		case st.State == "running" && st.Problem != "":
			fmt.Fprintf(s.Err, "lab %s: %s; its QEMU runs as pid %d: klasy lab down %s stops it\n", st.Name, st.Problem, st.PID, st.Name)
		case st.State == "stale":
			fmt.Fprintf(s.Err, "lab %s: QEMU is gone; klasy lab down %s removes its state\n", st.Name, st.Name)
		}
	}
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func labDown(ctx context.Context, s *stdio, args []string) error {
	fs := newFlagSet("lab down")
	if err := fs.Parse(args); err != nil {
		return err
	}
	name, err := oneName(fs)
	if err != nil {
		return err
	}
	return lab.Down(ctx, name, s.Err)
}

func labConsole(ctx context.Context, s *stdio, args []string) error {
	fs := newFlagSet("lab console")
	if err := fs.Parse(args); err != nil {
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
	if in, isFile := s.In.(*os.File); isFile && term.IsTerminal(int(in.Fd())) {
		old, err := term.MakeRaw(int(in.Fd()))
		if err != nil {
			return fmt.Errorf("putting the terminal in raw mode: %w", err)
		}
		defer term.Restore(int(in.Fd()), old)
		fmt.Fprintf(s.Err, "connected to the console of lab %s; Ctrl-] quits\r\n", name)
		conn.Write([]byte("\n")) // a fresh prompt
		return interactive(conn, in, flushing{s})
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
