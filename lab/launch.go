package lab

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"github.com/klasy/klasy/agent"
)

// A Booter boots a lab of another kind than the busybox guest Up boots
// itself: *xenlab.Config (package lab/xenlab) boots a Xen lab. Up calls
// Boot with cfg's defaults filled in, its name checked, and the path of
// qemu-system-x86_64; Boot checks the rest, builds what the lab boots,
// starts it with Launch and returns once its agents answer. On failure
// nothing is left running.
type Booter interface {
	Boot(ctx context.Context, cfg Config, qemu string) (*Lab, error)
}

// CheckNotRunning returns an error saying how to stop it when a lab
// called name runs. Up and Booters call it before the slow steps of a
// boot; Launch checks again, under the labs' lock.
func CheckNotRunning(name string) error {
	if old, err := findLab(name); err == nil && old.alive() {
		return old.runningError()
	}
	return nil
}

// Machine is what Launch starts for a Booter.
type Machine struct {
	// Kernel is the lab's kernel (every domain's, for a Xen lab).
	Kernel Kernel
	// Addr is the guest's address (Domain 0's), with its prefix.
	Addr string
	// Initramfs is the path of what QEMU boots as the initramfs.
	Initramfs string
	// Xen is the record of a Xen lab.
	Xen *XenRecord
	// Staging, when not "", is a directory under Root() that becomes
	// the lab's directory, with what the booter put in it.
	Staging string
	// Args is QEMU's command line, given the lab's files.
	Args func(Files) []string
	// What says what starts, for the progress line.
	What string
}

// Files are the paths in a lab's directory that QEMU is started with.
type Files struct {
	Dir           string
	ConsoleLog    string // the console, logged (QEMU's logfile)
	ConsoleSocket string // the console's socket (klasy lab console)
	// AgentSocket must be named by a chardev of QEMU's command line,
	// "socket,id=agent,path=AgentSocket,...": that is how the lab's QEMU
	// is told from others (a Xen lab has no device on it).
	AgentSocket string
	QMPSocket   string // QMP, through which Down asks QEMU to quit
	Pidfile     string // QEMU's own record of its pid
}

func (r record) files() Files {
	return Files{Dir: r.dir(), ConsoleLog: r.consoleLog(), ConsoleSocket: r.consoleSock(),
		AgentSocket: r.agentSocket(), QMPSocket: r.qmpSocket(), Pidfile: r.qemuPidfile()}
}

// Launch starts QEMU for a new lab a Booter boots, named cfg.Name, with
// cfg's memory and CPUs: as Up does (see launch), under the labs' lock,
// it refuses a lab of that name that runs, removes a stale one's state,
// records the lab and starts QEMU. The lab is booting then: the Booter
// waits for its agents and ends the boot with Up or Fail. On error
// nothing is left running.
func Launch(cfg Config, qemu string, m Machine) (*Booting, error) {
	rec := record{Name: cfg.Name, Kernel: m.Kernel, MemMB: cfg.MemMB, CPUs: cfg.CPUs, Addr: m.Addr,
		Initramfs: m.Initramfs, Xen: m.Xen}
	l, fail, err := launch(cfg, qemu, rec, m.Staging, func(r record) []string { return m.Args(r.files()) }, m.What)
	if err != nil {
		return nil, err
	}
	return &Booting{l: l, fail: fail, watch: consoleWatcher{path: l.rec.consoleLog()}}, nil
}

// Booting is a lab Launch started: its QEMU runs and other processes see
// the lab, but its agents have not answered yet.
type Booting struct {
	l     *Lab
	fail  func(error) (*Lab, error)
	watch consoleWatcher
}

// Lab returns the lab that boots.
func (b *Booting) Lab() *Lab { return b.l }

// Started returns when QEMU started.
func (b *Booting) Started() time.Time { return b.l.rec.Started }

// Exited returns a channel closed when QEMU exits.
func (b *Booting) Exited() <-chan struct{} { return b.l.exited }

// ConsoleLines returns the console's complete lines logged since the
// last call.
func (b *Booting) ConsoleLines() []string { return b.watch.newLines() }

// Fail stops QEMU, removes the lab's state and returns err, saying which
// lab and with the console's last lines.
func (b *Booting) Fail(err error) (*Lab, error) { return b.fail(err) }

// Up ends the boot: the lab is up, with c as its Client.
func (b *Booting) Up(c *agent.Client) *Lab {
	b.l.mu.Lock()
	b.l.client = c
	b.l.mu.Unlock()
	return b.l
}

// launch starts QEMU with args(rec) for a new lab: under the labs'
// lock it refuses a lab of that name that runs, removes a stale one's
// state, gives rec a slot (and a LAN address when cfg.LAN), makes its
// directory (the staging directory, when not "", becomes it), starts
// QEMU and records the lab; from then on other processes see it. fail
// stops QEMU and removes the lab's state, and returns err with the tail
// of the console. On error nothing is left running.
func launch(cfg Config, qemu string, rec record, staging string, args func(record) []string, what string) (l *Lab, fail func(error) (*Lab, error), err error) {
	progress := func(format string, a ...any) {
		fmt.Fprintf(cfg.Progress, "lab %s: %s\n", cfg.Name, fmt.Sprintf(format, a...))
	}
	unlock, err := lockRoot()
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		if unlock != nil {
			unlock()
		}
	}()
	if old, err := findLab(cfg.Name); err == nil {
		if old.alive() {
			return nil, nil, old.runningError()
		}
		progress("removing stale state of a lab whose QEMU is gone")
		stopMux(old.dir(), 0)
	}
	if err := os.RemoveAll(labDir(cfg.Name)); err != nil {
		return nil, nil, err
	}
	if rec.Slot, err = freeSlot(); err != nil {
		return nil, nil, err
	}
	if cfg.LAN {
		rec.LANAddr = lanNet + strconv.Itoa(rec.Slot) + "/24"
	}
	if staging != "" {
		err = os.Rename(staging, rec.dir())
	} else {
		err = os.MkdirAll(rec.dir(), 0o755)
	}
	if err != nil {
		return nil, nil, err
	}
	if n := len(rec.serialSocket()); n > 100 {
		os.RemoveAll(rec.dir())
		return nil, nil, fmt.Errorf("lab directory %s too long for a unix socket path (%d bytes); set KLASY_LAB_DIR to a shorter one", rec.dir(), n)
	}
	qlog, err := os.Create(rec.qemuLog())
	if err != nil {
		os.RemoveAll(rec.dir())
		return nil, nil, err
	}
	cmd := exec.Command(qemu, args(rec)...)
	cmd.Stdout, cmd.Stderr = qlog, qlog
	// Its own session: QEMU outlives `klasy lab up` and ignores the
	// terminal's signals.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if cfg.DieWithCaller {
		// The signal follows the thread that forks, not the process;
		// Go ends a thread only when a goroutine locked to it exits,
		// which no caller of Up does.
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	}
	progress("starting QEMU: %s, console log %s", what, rec.consoleLog())
	start := time.Now()
	if err := cmd.Start(); err != nil {
		qlog.Close()
		os.RemoveAll(rec.dir())
		return nil, nil, fmt.Errorf("starting QEMU: %w", err)
	}
	qlog.Close()
	rec.PID = cmd.Process.Pid
	rec.Started = start
	l = &Lab{rec: rec, exited: make(chan struct{})}
	go func() { cmd.Wait(); close(l.exited) }()
	fail = func(err error) (*Lab, error) {
		l.kill()
		stopMux(rec.dir(), time.Second)
		report := rec.consoleReport()
		os.RemoveAll(rec.dir())
		return nil, fmt.Errorf("lab %s: %w%s", cfg.Name, err, report)
	}
	if err := rec.save(); err != nil {
		_, err = fail(err)
		return nil, nil, err
	}
	// The lab is recorded: others see it as running from here on.
	return l, fail, nil
}
