package lab

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/klasy/klasy/agent"
	"github.com/klasy/klasy/agent/wire"
)

// Config says what lab to boot. Zero values take the defaults.
type Config struct {
	Name   string // default "default"
	Kernel string // Debian (default) or Built
	MemMB  int    // guest memory, default 512
	CPUs   int    // guest CPUs, default 1
	// LAN puts the lab on the labs' shared Ethernet (eth1, 10.33.0.SLOT/24,
	// a QEMU multicast socket), so labs can talk to each other.
	LAN bool
	// Agent is the static klasy binary run as the guest agent; default
	// AgentBinary().
	Agent string
	// BootTimeout bounds the wait for the agent; default 180 s (TCG on
	// a loaded machine is slow).
	BootTimeout time.Duration
	// Progress receives one line per boot step; nil discards them.
	Progress io.Writer
	// Xen boots a Xen lab instead, a *xenlab.Config (package
	// lab/xenlab): Xen 4.17 with a Domain 0 and Domain U guests, each
	// running Kernel (Debian's), an agent in each reached over mutual
	// TLS. LAN and ICount do not apply.
	Xen Booter
	// ICount runs the guest with QEMU's -icount: its clock counts the
	// instructions it executes (1 ns each), so that a benchmark timed
	// inside the guest gives the same figure run after run, whatever the
	// host's load. Slower, and for benchmarks only.
	ICount bool
	// System boots a Debian system lab (system.go): a debootstrap'd
	// bookworm root with systemd and Debian's headers, the kernel's -dbg
	// vmlinux shared from the host; default memory 2048 MB, boot timeout
	// 6 minutes. Debian's kernel only.
	System bool
	// DieWithCaller kills QEMU when the process that starts it dies
	// (tests: a test binary killed by a timeout or ^C must not leave a
	// guest spinning a CPU). Without it QEMU outlives `klasy lab up`.
	DieWithCaller bool
}

// Lab is a running lab.
type Lab struct {
	rec    record
	mu     sync.Mutex
	client *agent.Client
	conn   net.Conn
	exited chan struct{} // closed when QEMU exits, if this process started it
}

// Name returns the lab's name.
func (l *Lab) Name() string { return l.rec.Name }

// Kernel returns the kernel the lab booted.
func (l *Lab) Kernel() Kernel { return l.rec.Kernel }

// Dir returns the lab's state directory.
func (l *Lab) Dir() string { return l.rec.dir() }

// ConsoleLog returns the path of the file QEMU logs the guest console to.
func (l *Lab) ConsoleLog() string { return l.rec.consoleLog() }

// Addr returns the guest's eth0 address (QEMU user networking).
func (l *Lab) Addr() string { return l.rec.Addr }

// LANAddr returns the guest's address on the labs' LAN, "" when the lab
// is not on it.
func (l *Lab) LANAddr() string { return l.rec.LANAddr }

// PID returns QEMU's process id.
func (l *Lab) PID() int { return l.rec.PID }

// Client returns the agent client of the lab's connection. Any number of
// processes may hold a connection to a lab at once (the lab's mux shares
// the agent's line); Close it when done.
func (l *Lab) Client() *agent.Client {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.client
}

// Close drops the connection to the agent; the lab keeps running.
func (l *Lab) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.client == nil {
		return nil
	}
	err := l.client.Close()
	l.client, l.conn = nil, nil
	return err
}

const (
	// The labs' LAN is a multicast group bound to the loopback interface
	// (localaddr): its frames never leave this machine.
	lanGroup = "230.0.0.33:43133,localaddr=127.0.0.1"
	lanNet   = "10.33.0."
)

func (c *Config) defaults() {
	if c.Name == "" {
		c.Name = "default"
	}
	if c.Kernel == "" {
		c.Kernel = Debian
	}
	if c.MemMB == 0 && c.System {
		c.MemMB = 2048
	}
	if c.MemMB == 0 && c.Xen == nil { // a Xen lab's depends on its domains
		c.MemMB = 512
	}
	if c.CPUs == 0 {
		c.CPUs = 1
	}
	if c.BootTimeout == 0 && c.System {
		c.BootTimeout = 6 * time.Minute
	}
	if c.BootTimeout == 0 {
		c.BootTimeout = 180 * time.Second
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
}

// Up boots a lab and returns once the agent inside answers a ping. A lab
// of the same name must not be running; a stale one (its QEMU died) is
// cleaned up first. On failure nothing is left running and the error
// carries the tail of the console.
func Up(ctx context.Context, cfg Config) (*Lab, error) {
	cfg.defaults()
	if err := CheckName(cfg.Name); err != nil {
		return nil, err
	}
	if cfg.Xen != nil {
		qemu, err := exec.LookPath("qemu-system-x86_64")
		if err != nil {
			return nil, errors.New("qemu-system-x86_64 not found (install qemu-system-x86, or run make lab-setup)")
		}
		return cfg.Xen.Boot(ctx, cfg, qemu)
	}
	if cfg.MemMB < 128 || cfg.MemMB > 65536 {
		return nil, fmt.Errorf("guest memory %d MB out of range (128..65536)", cfg.MemMB)
	}
	if cfg.CPUs < 1 || cfg.CPUs > 64 {
		return nil, fmt.Errorf("guest CPUs %d out of range (1..64)", cfg.CPUs)
	}
	qemu, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		return nil, errors.New("qemu-system-x86_64 not found (install qemu-system-x86, or run make lab-setup)")
	}
	// Said before the slow steps, and checked again under the lock.
	if err := CheckNotRunning(cfg.Name); err != nil {
		return nil, err
	}
	k, err := FindKernel(cfg.Kernel)
	if err != nil {
		return nil, err
	}
	if cfg.Agent == "" {
		if cfg.Agent, err = AgentBinary(); err != nil {
			return nil, err
		}
	}
	progress := func(format string, a ...any) {
		fmt.Fprintf(cfg.Progress, "lab %s: %s\n", cfg.Name, fmt.Sprintf(format, a...))
	}
	what := fmt.Sprintf("%s kernel %s, %d MB, %d CPU(s)", k.Flavor, k.Release, cfg.MemMB, cfg.CPUs)
	sysImage := ""
	if cfg.System {
		if sysImage, err = FindSystemImage(k); err != nil {
			return nil, err
		}
		what += ", Debian system " + sysImage
	}
	initrd, err := buildInitramfs(k, cfg.Agent, cfg.System)
	if err != nil {
		return nil, fmt.Errorf("building the guest initramfs: %w", err)
	}

	rec := record{
		Name: cfg.Name, Kernel: k, MemMB: cfg.MemMB, CPUs: cfg.CPUs, ICount: cfg.ICount,
		Addr: "10.0.2.15/24", Initramfs: initrd, System: sysImage,
	}
	if cfg.System {
		if rec.SystemPort, err = freePort(); err != nil {
			return nil, err
		}
	}
	l, fail, err := launch(cfg, qemu, rec, "", record.qemuArgs, what)
	if err != nil {
		return nil, err
	}
	rec, start := l.rec, l.rec.Started

	bootCtx, cancel := context.WithTimeout(ctx, cfg.BootTimeout)
	defer cancel()
	watch := consoleWatcher{path: rec.consoleLog()}
	agentStarting := false
	lastTry := time.Time{}
	lastSaid := time.Now()
	for {
		for _, line := range watch.newLines() {
			if msg, ok := strings.CutPrefix(line, "klasy-init: "); ok {
				progress("%.1fs %s", time.Since(start).Seconds(), msg)
				lastSaid = time.Now()
				if dev, ok := strings.CutPrefix(msg, "starting agent on "); ok && !agentStarting {
					agentStarting = true
					l.rec.AgentDevice, l.rec.Mux = dev, true
					if err := l.startMux(); err != nil {
						return fail(err)
					}
					progress("%.1fs mux started (pid %d)", time.Since(start).Seconds(), muxPID(l.rec.dir()))
				}
				// The guest's agent wrapper says this when the agent
				// dies; init would only respawn it to die again.
				if status, ok := strings.CutPrefix(msg, "error: agent exited with status "); ok {
					return fail(fmt.Errorf("the agent in the guest exited with status %s before answering", status))
				}
			} else if strings.Contains(line, "Kernel panic") {
				return fail(errors.New("guest kernel panicked"))
			}
		}
		select {
		case <-l.exited:
			return fail(errors.New("QEMU exited while the guest was booting"))
		case <-bootCtx.Done():
			if ctx.Err() != nil { // the caller's: Ctrl-C, its own deadline
				return fail(fmt.Errorf("boot interrupted after %.1fs: %w", time.Since(start).Seconds(), ctx.Err()))
			}
			return fail(fmt.Errorf("agent did not answer within %v: %w", cfg.BootTimeout, bootCtx.Err()))
		default:
		}
		if time.Since(lastSaid) > 10*time.Second {
			progress("%.0fs still booting (TCG is slow on a busy host; console: %s)", time.Since(start).Seconds(), rec.consoleLog())
			lastSaid = time.Now()
		}
		// Bytes sent to the serial port before the agent opens it are
		// lost, so try only once init says the agent starts, and not
		// more often than twice a second.
		if agentStarting && time.Since(lastTry) > 500*time.Millisecond {
			lastTry = time.Now()
			if err := l.connect(bootCtx, time.Second); err == nil {
				progress("%.1fs agent answered; lab is up", time.Since(start).Seconds())
				return l, nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// consoleReport is the console's last lines (and QEMU's own messages, if
// any) for an error saying why a lab failed.
func (r record) consoleReport() string {
	tail := consoleTail(r.consoleLog(), 25)
	if strings.TrimSpace(tail) == "" {
		tail = "(nothing yet)"
	}
	if q := strings.TrimSpace(consoleTail(r.qemuLog(), 10)); q != "" {
		tail += "\n--- qemu.log ---\n" + q
	}
	return "\n--- console (last lines) ---\n" + tail
}

// Explain adds to err, an error from the lab's agent, what became of the
// lab when the connection was lost because its QEMU exited (a guest
// panic, a poweroff, a kill): err then says so and carries the console's
// last lines. Other errors, and nil, come back unchanged.
func (l *Lab) Explain(err error) error {
	if err == nil || !errors.Is(err, agent.ErrConnLost) {
		return err
	}
	// The socket closes as QEMU exits, a moment before its pid is gone.
	for deadline := time.Now().Add(time.Second); l.rec.alive(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			return err
		}
	}
	return fmt.Errorf("%w: lab %s's QEMU exited%s", err, l.rec.Name, l.rec.consoleReport())
}

// runningError says the lab runs and how to stop it.
func (r record) runningError() error {
	if r.problem != "" {
		return fmt.Errorf("lab %s is already running (pid %d), although %s; stop it with: klasy lab down %s", r.Name, r.PID, r.problem, r.Name)
	}
	return fmt.Errorf("lab %s is already running (pid %d); stop it with: klasy lab down %s", r.Name, r.PID, r.Name)
}

// startMux records that the lab has a mux and starts it, under the lock,
// so that a Get at the same time does not start a second.
func (l *Lab) startMux() error {
	unlock, err := lockRoot()
	if err != nil {
		return err
	}
	defer unlock()
	if err := l.rec.save(); err != nil {
		return err
	}
	return l.rec.startMux()
}

// ensureMux starts the mux of a lab if none runs: it has died (killed,
// or crashed: QEMU's socket is free again for a new one), or the lab has
// never had one (its lab up was killed before it started the mux, or an
// older klasy started the lab). A lab whose guest has not said yet which
// line its agent serves on is left as it is.
func (r *record) ensureMux() error {
	if r.Xen != nil || muxPID(r.dir()) > 0 { // a Xen lab's agents are on the network
		return nil
	}
	dev := r.AgentDevice
	if dev == "" {
		dev = agentDeviceFromConsole(r.consoleLog())
	}
	if dev == "" {
		return nil
	}
	unlock, err := lockRoot()
	if err != nil {
		return err
	}
	defer unlock()
	cur, err := loadRecord(r.Name)
	if err != nil || cur.PID != r.PID || !cur.alive() {
		return fmt.Errorf("lab %s changed or stopped while its mux was being started", r.Name)
	}
	if !cur.Mux || cur.AgentDevice != dev {
		cur.AgentDevice, cur.Mux = dev, true
		if err := cur.save(); err != nil {
			return err
		}
	}
	*r = cur
	return r.startMux()
}

// agentDeviceFromConsole returns the line the guest said its agent
// serves on, from the console log; "" if it has not said so yet.
func agentDeviceFromConsole(path string) string {
	data, _ := os.ReadFile(path)
	dev := ""
	for _, line := range strings.Split(strings.ReplaceAll(string(data), "\r", ""), "\n") {
		if d, ok := strings.CutPrefix(line, "klasy-init: starting agent on "); ok {
			dev = strings.TrimSpace(d)
		}
	}
	return dev
}

// clientSocket is the socket a client dials: the mux's while it runs,
// else the agent's own (a lab from an older klasy, or down with a dead
// mux: QEMU's socket is free then).
func (r record) clientSocket() string {
	if muxPID(r.dir()) > 0 {
		return r.muxSocket()
	}
	return r.agentConn()
}

// connect dials the agent (through the mux, if the lab has one) and pings
// the agent; on success the connection becomes the lab's client.
func (l *Lab) connect(ctx context.Context, timeout time.Duration) error {
	if l.rec.Xen != nil {
		return l.connectXen(ctx, timeout)
	}
	sock := l.rec.clientSocket()
	conn, err := net.DialTimeout("unix", sock, timeout)
	if err != nil {
		return fmt.Errorf("connecting to the agent of lab %s: %w", l.rec.Name, err)
	}
	c := agent.NewClient(conn)
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// A reply meant for an earlier connection (the agent cannot tell
	// connections apart on a serial line) can still answer the first ping
	// with an error if the random ids collide; a second ping has a new id.
	for try := 1; ; try++ {
		err = c.Ping(pctx)
		var re *wire.RemoteError
		if err == nil || try == 3 || !errors.As(err, &re) {
			break
		}
	}
	if err != nil {
		// The agent did not answer: it would not answer the ping with
		// which Close makes sure it has read the canceled pings either.
		conn.Close()
		c.Close()
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil && sock != l.rec.muxSocket() {
			return fmt.Errorf("the agent of lab %s did not answer within %v; QEMU serves one connection at a time, so another klasy command may be using the lab: %w", l.rec.Name, timeout, err)
		}
		return fmt.Errorf("pinging the agent of lab %s: %w", l.rec.Name, err)
	}
	l.mu.Lock()
	if l.client != nil {
		l.client.Close()
	}
	l.client, l.conn = c, conn
	l.mu.Unlock()
	return nil
}

// freeSlot returns the smallest slot number (1..200) no running lab has;
// it numbers MAC and LAN addresses.
func freeSlot() (int, error) {
	used := map[int]bool{}
	sts, err := List()
	if err != nil {
		return 0, err
	}
	for _, s := range sts {
		if s.State != "stale" {
			used[s.rec.Slot] = true
		}
	}
	for i := 1; i <= 200; i++ {
		if !used[i] {
			return i, nil
		}
	}
	return 0, errors.New("too many labs running (200)")
}

func (r record) qemuArgs() []string {
	app := []string{"console=ttyS0", "panic=-1", "quiet", "klasy.name=" + r.Name, "klasy.ip=" + r.Addr, "klasy.gw=10.0.2.2"}
	if r.LANAddr != "" {
		app = append(app, "klasy.lan="+r.LANAddr)
	}
	mac := func(nic int) string { return fmt.Sprintf("52:54:00:4b:%02x:%02x", nic, r.Slot) }
	args := []string{
		"-name", "klasy-lab-" + r.Name,
		"-accel", "tcg", "-m", strconv.Itoa(r.MemMB), "-smp", strconv.Itoa(r.CPUs),
		"-nodefaults", "-display", "none", "-no-reboot",
		"-kernel", r.Kernel.Image, "-initrd", r.Initramfs, "-append", strings.Join(app, " "),
		// ttyS0: the console, logged to a file and reachable through a
		// socket for `klasy lab console`.
		"-chardev", "socket,id=con,path=" + r.consoleSock() + ",server=on,wait=off,logfile=" + r.consoleLog(),
		"-serial", "chardev:con",
		// The agent's line: a virtio-serial port named klasy.agent, or
		// ttyS1 for a kernel without virtio_console (see guest/rcS).
		"-device", "virtio-serial-pci",
		"-chardev", "socket,id=agent,path=" + r.agentSocket() + ",server=on,wait=off",
		"-device", "virtserialport,chardev=agent,name=klasy.agent",
		"-chardev", "socket,id=agentser,path=" + r.serialSocket() + ",server=on,wait=off",
		"-serial", "chardev:agentser",
		"-qmp", "unix:" + r.qmpSocket() + ",server=on,wait=off",
		// QEMU's own record of its pid, kept apart from lab.json: it
		// finds QEMU even when lab.json is damaged (findLab).
		"-pidfile", r.qemuPidfile(),
		"-netdev", "user,id=net0" + r.systemForward(),
		"-device", "virtio-net-pci,netdev=net0,mac=" + mac(0),
	}
	if r.LANAddr != "" {
		args = append(args,
			"-netdev", "socket,id=lan,mcast="+lanGroup,
			"-device", "e1000,netdev=lan,mac="+mac(1))
	}
	if r.System != "" {
		args = append(args, r.systemArgs()...)
	}
	if r.ICount {
		// shift=0: one instruction is one nanosecond of guest time;
		// sleep=on lets the clock follow real time while the guest idles.
		args = append(args, "-icount", "shift=0,sleep=on")
	}
	return args
}

// Get returns the running lab called name, connected to its agent.
func Get(ctx context.Context, name string) (*Lab, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	rec, err := findLab(name)
	if err != nil {
		return nil, fmt.Errorf("%w (start it with: klasy lab up %s)", err, name)
	}
	if !rec.alive() {
		cleanStale(name)
		return nil, fmt.Errorf("lab %s is not running any more (its QEMU is gone; stale state removed)", name)
	}
	if rec.problem != "" {
		return nil, fmt.Errorf("lab %s runs (QEMU pid %d), but %s; stop it with: klasy lab down %s", name, rec.PID, rec.problem, name)
	}
	if err := rec.ensureMux(); err != nil {
		return nil, err
	}
	l := &Lab{rec: rec}
	if err := l.connect(ctx, 10*time.Second); err != nil {
		// A kernel that stopped answers nothing: its console says why.
		if report := lastHangReport(rec.consoleLog()); report != "" && ctx.Err() == nil {
			return nil, fmt.Errorf("%w; lab %s looks hung, its console says: %s ('klasy lab down %s' and 'up' restart it)", err, name, report, name)
		}
		return nil, err
	}
	return l, nil
}

// KernelOf returns the kernel of the lab called name as its record
// names it, reaching no agent: the image the source-level queries read
// (klasy lines --lab NAME). A lab whose QEMU is gone still names its
// kernel until its state is removed.
func KernelOf(name string) (Kernel, error) {
	if err := CheckName(name); err != nil {
		return Kernel{}, err
	}
	rec, err := findLab(name)
	if err != nil {
		return Kernel{}, fmt.Errorf("%w (start it with: klasy lab up %s)", err, name)
	}
	if rec.Kernel.Vmlinux == "" {
		why := "its lab.json names no vmlinux"
		if rec.problem != "" {
			why = rec.problem
		}
		return Kernel{}, fmt.Errorf("lab %s: %s; give the image instead", name, why)
	}
	return rec.Kernel, nil
}

// cleanStale removes the state of a lab whose QEMU is gone.
func cleanStale(name string) {
	unlock, err := lockRoot()
	if err != nil {
		return
	}
	defer unlock()
	if rec, err := findLab(name); err == nil && rec.alive() {
		return
	}
	stopMux(labDir(name), 0)
	os.RemoveAll(labDir(name))
}

// Status describes one lab for `klasy lab status`.
type Status struct {
	Name  string `json:"name"`
	State string `json:"state"` // "running", "hung" (Problem says why) or "stale" (QEMU gone)
	PID   int    `json:"pid"`
	// MuxPID is the lab's mux process, which owns the agent's socket
	// and shares it among clients; 0 when none runs.
	MuxPID int `json:"mux_pid,omitempty"`
	// Problem says what is wrong with the lab's state (a damaged or
	// missing lab.json, a QEMU whose directory is gone); the rest was
	// rebuilt from the running QEMU.
	Problem    string    `json:"problem,omitempty"`
	Kernel     string    `json:"kernel"`
	Release    string    `json:"release"`
	MemMB      int       `json:"mem_mb"`
	CPUs       int       `json:"cpus"`
	Addr       string    `json:"addr"`
	LANAddr    string    `json:"lan_addr,omitempty"`
	Started    time.Time `json:"started"`
	ConsoleLog string    `json:"console_log"`
	AgentSock  string    `json:"agent_socket"`
	Dir        string    `json:"dir"`
	// Xen is the hypervisor's version for a Xen lab, whose Domains
	// are listed with the domains file their agents are reached by.
	Xen         string         `json:"xen,omitempty"`
	Domains     []DomainStatus `json:"domains,omitempty"`
	DomainsFile string         `json:"domains_file,omitempty"`
	rec         record
}

// DomainStatus is one domain of a Xen lab in Status.
type DomainStatus struct {
	Name      string `json:"name"`
	GuestAddr string `json:"guest_addr"`
	Agent     string `json:"agent"` // host:port, mutual TLS
}

// List describes every lab with state under Root(), sorted by name.
// Labs whose QEMU is gone are reported as "stale"; Clean removes them.
func List() ([]Status, error) {
	ents, err := os.ReadDir(Root())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	names := map[string]bool{}
	for _, e := range ents {
		if e.IsDir() && CheckName(e.Name()) == nil {
			names[e.Name()] = true
		}
	}
	// A QEMU whose directory is gone is listed too: nothing else would
	// show it.
	for name := range labQEMUs(Root()) {
		names[name] = true
	}
	var out []Status
	for name := range names {
		rec, err := findLab(name)
		if err != nil {
			continue // gone meanwhile
		}
		st, problem := "stale", rec.problem
		if rec.alive() {
			st = "running"
			if problem == "" && rec.Xen == nil {
				if why := rec.hungReason(); why != "" {
					st, problem = "hung", why
				}
			}
		}
		s := Status{
			Name: rec.Name, State: st, PID: rec.PID, MuxPID: muxPID(rec.dir()), Problem: problem,
			Kernel: rec.Kernel.Flavor, Release: rec.Kernel.Release,
			MemMB: rec.MemMB, CPUs: rec.CPUs, Addr: rec.Addr, LANAddr: rec.LANAddr, Started: rec.Started,
			ConsoleLog: rec.consoleLog(), AgentSock: rec.clientSocket(), Dir: rec.dir(), rec: rec,
		}
		if x := rec.Xen; x != nil {
			s.Xen, s.DomainsFile, s.AgentSock = orUnknown(x.Version), rec.domainsFile(), ""
			for _, d := range x.Domains {
				s.Domains = append(s.Domains, DomainStatus{Name: d.Name, GuestAddr: d.GuestAddr, Agent: fmt.Sprintf("127.0.0.1:%d", d.HostPort)})
			}
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// CleanStale removes the state of every lab whose QEMU is gone and
// returns their names.
func CleanStale() ([]string, error) {
	sts, err := List()
	if err != nil {
		return nil, err
	}
	var names []string
	for _, s := range sts {
		if s.State == "stale" {
			cleanStale(s.Name)
			names = append(names, s.Name)
		}
	}
	return names, nil
}

// Down stops the lab called name: a clean poweroff through the agent,
// then QEMU's quit command, then SIGKILL, each after a timeout; then its
// mux, and its state directory is removed. A stale lab is just cleaned
// up. A lab whose record is damaged or missing is stopped all the same
// (see findLab).
func Down(ctx context.Context, name string, progress io.Writer) error {
	if err := CheckName(name); err != nil {
		return err
	}
	rec, err := findLab(name)
	if err != nil {
		return err
	}
	l := &Lab{rec: rec}
	// Without an agent, poweroff falls back to QMP, then SIGKILL. A lab
	// whose record is damaged goes that way unless its mux runs: which
	// line its agent serves on is not known.
	if rec.alive() && (rec.problem == "" || muxPID(rec.dir()) > 0) {
		l.connect(ctx, 5*time.Second)
	}
	return l.down(ctx, progress)
}

// Down powers the lab off (see the function Down) and removes its state.
func (l *Lab) Down(ctx context.Context) error { return l.down(ctx, io.Discard) }

func (l *Lab) down(ctx context.Context, progress io.Writer) error {
	if progress == nil {
		progress = io.Discard
	}
	say := func(f string, a ...any) { fmt.Fprintf(progress, "lab %s: %s\n", l.rec.Name, fmt.Sprintf(f, a...)) }
	start := time.Now()
	if l.rec.problem != "" && l.rec.alive() {
		say("%s; stopping its QEMU (pid %d) all the same", l.rec.problem, l.rec.PID)
	}
	if l.rec.alive() {
		how := "powered off"
		asked := false
		if c := l.Client(); c != nil {
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err := c.Run(pctx, []string{"poweroff"}, nil)
			cancel()
			if err != nil {
				say("poweroff through the agent failed (%v)", err)
			}
			asked = true
		} else {
			say("the agent does not answer; stopping QEMU")
		}
		if !asked || !l.waitExit(ctx, 30*time.Second) {
			how = "stopped by QEMU's quit command (the guest did not power off)"
			if !l.qmpQuit() || !l.waitExit(ctx, 5*time.Second) {
				how = "killed (QEMU did not quit)"
				l.kill()
			}
		}
		say("%s in %.1fs", how, time.Since(start).Seconds())
	} else {
		say("QEMU was already gone; removing stale state")
	}
	l.Close()
	// The mux exits once QEMU has closed its socket.
	stopMux(l.rec.dir(), 3*time.Second)
	unlock, err := lockRoot()
	if err != nil {
		return err
	}
	defer unlock()
	if cur, err := loadRecord(l.rec.Name); err == nil && cur.PID != l.rec.PID && cur.alive() {
		return nil // a new lab of the same name started meanwhile
	}
	if err := os.RemoveAll(l.rec.dir()); err != nil {
		return fmt.Errorf("removing state of lab %s: %w", l.rec.Name, err)
	}
	return nil
}

// waitExit waits up to d for QEMU to exit.
func (l *Lab) waitExit(ctx context.Context, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if !l.rec.alive() {
			if l.exited != nil {
				<-l.exited
			}
			return true
		}
		if l.exited != nil {
			select {
			case <-l.exited:
				return true
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		time.Sleep(100 * time.Millisecond)
	}
	return !l.rec.alive()
}

// qmpQuit asks QEMU to quit through its QMP socket.
// It reports false when QEMU's QMP socket cannot be reached.
func (l *Lab) qmpQuit() bool {
	conn, err := net.DialTimeout("unix", l.rec.qmpSocket(), 2*time.Second)
	if err != nil {
		return false
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(3 * time.Second))
	r := bufio.NewReader(conn)
	r.ReadString('\n') // greeting
	fmt.Fprint(conn, `{"execute":"qmp_capabilities"}`+"\n")
	r.ReadString('\n')
	fmt.Fprint(conn, `{"execute":"quit"}`+"\n")
	r.ReadString('\n')
	return true
}

// kill ends QEMU with SIGKILL and waits for it.
func (l *Lab) kill() {
	if l.exited != nil {
		select {
		case <-l.exited:
			return // reaped: the pid may belong to someone else now
		default:
		}
		syscall.Kill(l.rec.PID, syscall.SIGKILL)
		select {
		case <-l.exited:
		case <-time.After(5 * time.Second):
		}
		return
	}
	if l.rec.alive() {
		syscall.Kill(l.rec.PID, syscall.SIGKILL)
	}
	l.waitExit(context.Background(), 5*time.Second)
}

// ConsoleSocket returns the socket the guest console (ttyS0) is
// reachable on; QEMU accepts one connection at a time.
func (l *Lab) ConsoleSocket() string { return l.rec.consoleSock() }

// ConsoleSocketOf returns the console socket of the running lab called
// name.
func ConsoleSocketOf(name string) (string, error) {
	if err := CheckName(name); err != nil {
		return "", err
	}
	rec, err := findLab(name)
	if err != nil {
		return "", err
	}
	if !rec.alive() {
		return "", fmt.Errorf("lab %s is not running (its QEMU is gone)", name)
	}
	return rec.consoleSock(), nil
}
