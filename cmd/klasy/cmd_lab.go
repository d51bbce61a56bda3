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

	"github.com/klasy/klasy/agent/wire"
	"github.com/klasy/klasy/cmd/klasy/internal/console"
	"github.com/klasy/klasy/cmd/klasy/internal/labview"
	"github.com/klasy/klasy/lab"
	"github.com/klasy/klasy/lab/xenlab"
)

var labHelp = helpText("lab")

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
	fs.StringVar(&cfg.Kernel, "kernel", lab.Debian, "kernel flavor: debian, debian-rt (PREEMPT_RT), built, or debug (built + lockdep, KASAN)")
	fs.IntVar(&cfg.MemMB, "mem", 512, "guest memory in MB")
	fs.IntVar(&cfg.CPUs, "cpus", 1, "guest CPUs")
	fs.BoolVar(&cfg.LAN, "lan", false, "join the labs' shared LAN (eth1)")
	fs.DurationVar(&cfg.BootTimeout, "timeout", 3*time.Minute, "how long to wait for the agent")
	xen := fs.Bool("xen", false, "boot a Xen lab")
	fs.BoolVar(&cfg.System, "system", false, "boot a Debian system lab: systemd, gcc, headers, the -dbg vmlinux (make system-lab)")
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
	if cfg.System && (*xen || cfg.Kernel != lab.Debian) {
		return usageError{Msg: "--system boots Debian's kernel, without --xen"}
	}
	if cfg.System && !set["mem"] {
		cfg.MemMB = 0 // the system lab's default
	}
	if cfg.System && !set["timeout"] {
		cfg.BootTimeout = 0
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
	if cfg.Kernel != lab.Debian && cfg.Kernel != lab.DebianRT && cfg.Kernel != lab.Built && cfg.Kernel != lab.Debug {
		return usageError{Msg: fmt.Sprintf("--kernel %q: want debian, debian-rt, built or debug", cfg.Kernel)}
	}
	// lab.Config takes 0 for the default: the range is checked here.
	if (cfg.MemMB < 128 && cfg.Xen == nil && !(cfg.System && cfg.MemMB == 0)) || cfg.MemMB > 65536 {
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
	labview.Table(s.Out, s.Err, sts)
	return nil
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
	return console.Attach(ctx, conn, "lab "+name, s.In, s.Out, s.Err, s.flush)
}
