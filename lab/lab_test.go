package lab

import (
	"bytes"
	"context"
	"crypto/rand"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/klasy/klasy/kmod"
	"github.com/klasy/klasy/lab/initramfs"
)

func testName(suffix string) string { return fmt.Sprintf("t%d-%s", os.Getpid(), suffix) }

func run(t *testing.T, ctx context.Context, l *Lab, argv ...string) string {
	t.Helper()
	res, err := l.Client().Run(ctx, argv, nil)
	if err != nil {
		t.Fatalf("lab %s: run %q: %v", l.Name(), argv, err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("lab %s: %q exited %d: %s%s", l.Name(), argv, res.ExitCode, res.Stdout, res.Stderr)
	}
	return string(res.Stdout)
}

// TestDebianLab is the lab's end-to-end test: two labs of Debian's
// kernel at once on a shared LAN; through the agent: uname, the kprobes
// list, two modules built with package kbuild against the lab's headers
// (the second calling the first's export) loaded and unloaded with
// package kmod, refused in the wrong order with the reason;
// reconnecting from a new client; a crashed lab detected as stale; a
// clean shutdown leaving no state.
func TestDebianLab(t *testing.T) {
	k := needLab(t, Debian)
	agent := testAgent(t)
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	start := time.Now()

	type built struct {
		labModules
		err error
	}
	modc := make(chan built, 1)
	go func() {
		mods, err := buildModules(ctx, k.BuildDir)
		modc <- built{mods, err}
	}()

	names := []string{testName("a"), testName("b")}
	labs := make([]*Lab, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i, n := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var progress bytes.Buffer
			labs[i], errs[i] = Up(ctx, Config{Name: n, Kernel: Debian, Agent: agent, LAN: true, Progress: &progress})
			t.Logf("%s", progress.String())
		}()
	}
	wg.Wait()
	for i, l := range labs {
		if l != nil {
			t.Cleanup(func() { l.Down(context.Background()) })
		}
		if errs[i] != nil {
			t.Fatalf("Up(%s): %v", names[i], errs[i])
		}
	}
	a, b := labs[0], labs[1]
	t.Logf("two labs up after %.1fs", time.Since(start).Seconds())
	defer func() {
		if t.Failed() {
			t.Logf("console of %s:\n%s", a.Name(), consoleTail(a.ConsoleLog(), 40))
		}
	}()

	for _, l := range labs {
		if got := strings.TrimSpace(run(t, ctx, l, "uname", "-r")); got != k.Release {
			t.Errorf("lab %s: uname -r = %q, want %q", l.Name(), got, k.Release)
		}
		if got := strings.TrimSpace(run(t, ctx, l, "hostname")); got != l.Name() {
			t.Errorf("lab %s: hostname = %q", l.Name(), got)
		}
	}
	// The agent's line is the virtio-serial port (Debian's kernel has
	// virtio_console), which moves a MiB each way in well under a second;
	// the UART fallback would take about a minute at its tens of KB/s.
	if dev := a.rec.AgentDevice; !strings.HasPrefix(dev, "/dev/vport") {
		t.Errorf("lab %s: agent serves on %q, want the virtio-serial port /dev/vport*", a.Name(), dev)
	}
	mib := make([]byte, 1<<20)
	rand.Read(mib)
	xferStart := time.Now()
	if err := a.Client().WriteFile(ctx, "/tmp/mib", mib, 0o600); err != nil {
		t.Fatalf("writing 1 MiB into lab %s: %v", a.Name(), err)
	}
	if got, err := a.Client().ReadFile(ctx, "/tmp/mib"); err != nil || !bytes.Equal(got, mib) {
		t.Fatalf("reading 1 MiB back from lab %s: %v (same bytes: %v)", a.Name(), err, bytes.Equal(got, mib))
	}
	if d := time.Since(xferStart); d > 15*time.Second {
		t.Errorf("1 MiB to lab %s and back took %v, want a few seconds at most", a.Name(), d)
	} else {
		t.Logf("1 MiB to the lab and back in %.2fs", d.Seconds())
	}
	if sts, err := List(); err != nil {
		t.Fatal(err)
	} else {
		running := map[string]bool{}
		for _, s := range sts {
			running[s.Name] = s.State == "running"
		}
		if !running[a.Name()] || !running[b.Name()] {
			t.Errorf("List() = %+v, want both labs running", sts)
		}
	}

	// The labs' LAN: a reaches b.
	bAddr, _, _ := strings.Cut(b.LANAddr(), "/")
	// ARP and the first packet may race a link coming up: allow retries.
	res, err := a.Client().Run(ctx, []string{"sh", "-c", "for i in 1 2 3 4 5; do ping -c 1 -W 2 " + bAddr + " && exit 0; done; exit 1"}, nil)
	if err != nil || res.ExitCode != 0 || !strings.Contains(string(res.Stdout), "1 packets received") {
		t.Errorf("ping from %s to %s over the lab LAN: %v %+v\n%s%s", a.Name(), bAddr, err, res, res.Stdout, res.Stderr)
	}

	// Modules built with kbuild against the lab's headers, loaded and
	// unloaded with kmod: klasy_lab_user calls klasy_lab_test's export.
	m := <-modc
	if m.err != nil {
		t.Fatalf("%+v", m.err)
	}
	t.Logf("modules built (%d and %d bytes) after %.1fs", len(m.test), len(m.user), time.Since(start).Seconds())
	c := a.Client()
	if _, err := kmod.Load(ctx, c, m.user, ""); !errors.Is(err, syscall.ENOENT) || !strings.Contains(err.Error(), "load klasy_lab_test first") {
		t.Errorf("loading klasy_lab_user before klasy_lab_test: %v, want ENOENT saying to load klasy_lab_test first", err)
	}
	loadStart := time.Now()
	if _, err := kmod.Load(ctx, c, m.test, "symbol=do_sys_openat2"); err != nil {
		t.Fatalf("loading the test module: %v", err)
	}
	t.Logf("module loaded in %.1fs", time.Since(loadStart).Seconds())
	if _, err := kmod.Load(ctx, c, m.test, ""); !errors.Is(err, syscall.EEXIST) {
		t.Errorf("loading klasy_lab_test twice: %v, want EEXIST", err)
	}
	list, err := c.ReadFile(ctx, "/sys/kernel/debug/kprobes/list")
	if err != nil {
		t.Fatalf("reading the kprobes list: %v", err)
	}
	if !strings.Contains(string(list), "do_sys_openat2+0x0") || !strings.Contains(string(list), "[FTRACE]") {
		t.Errorf("kprobes list lacks the module's probe on do_sys_openat2:\n%s", list)
	}
	run(t, ctx, a, "cat", "/proc/version") // opens a file: fires the probe
	if _, err := kmod.Load(ctx, c, m.user, ""); err != nil {
		t.Fatalf("loading the module that uses the test module: %v", err)
	}
	// /proc/modules: name size refs used-by state address.
	mods := procModules(run(t, ctx, a, "cat", "/proc/modules"))
	if got := mods["klasy_lab_test"]; len(got) < 2 || got[0] != "1" || got[1] != "klasy_lab_user," {
		t.Errorf("/proc/modules: klasy_lab_test %q, want 1 reference, used by klasy_lab_user", got)
	}
	if _, ok := mods["klasy_lab_user"]; !ok {
		t.Errorf("/proc/modules lacks klasy_lab_user after loading")
	}
	err = kmod.Unload(ctx, c, "klasy_lab_test")
	var inUse *kmod.InUseError
	if !errors.As(err, &inUse) || inUse.Refs != 1 || !strings.Contains(err.Error(), "in use (1 reference)") {
		t.Errorf("unloading klasy_lab_test while klasy_lab_user uses it: %v, want an *InUseError with 1 reference", err)
	}
	for _, name := range []string{"klasy_lab_user", "klasy_lab_test"} {
		if err := kmod.Unload(ctx, c, name); err != nil {
			t.Fatalf("unloading %s: %v", name, err)
		}
	}
	mods = procModules(run(t, ctx, a, "cat", "/proc/modules"))
	for _, name := range []string{"klasy_lab_user", "klasy_lab_test"} {
		if _, ok := mods[name]; ok {
			t.Errorf("/proc/modules still lists %s after unloading", name)
		}
	}
	dmesg := run(t, ctx, a, "dmesg")
	if !strings.Contains(dmesg, "klasy_lab_test: probing do_sys_openat2") || !strings.Contains(dmesg, "klasy_lab_test: unloaded after") ||
		strings.Contains(dmesg, "unloaded after 0 hits") || !regexp.MustCompile(`klasy_lab_user: klasy_lab_test has [1-9]\d* hits`).MatchString(dmesg) {
		t.Errorf("dmesg lacks the modules' load and unload messages (with hits):\n%s", lastLines(dmesg, 15))
	}
	if list, _ := c.ReadFile(ctx, "/sys/kernel/debug/kprobes/list"); strings.Contains(string(list), "do_sys_openat2") {
		t.Errorf("kprobe still listed after unloading:\n%s", list)
	}

	t.Logf("module checked and unloaded after %.1fs", time.Since(start).Seconds())

	// While a holds its connection, more clients use the lab at once.
	checkConcurrentClients(t, ctx, a)
	t.Logf("concurrent clients checked after %.1fs", time.Since(start).Seconds())
	checkMuxRestart(t, ctx, a)

	// Another client (as another klasy process would) reaches the lab by name.
	a.Close()
	a2, err := Get(ctx, a.Name())
	if err != nil {
		t.Fatalf("Get(%s): %v", a.Name(), err)
	}
	res, err = a2.Client().Run(ctx, []string{"sh", "-c", "echo out; echo err >&2; exit 7"}, nil)
	if err != nil || res.ExitCode != 7 || string(res.Stdout) != "out\n" || string(res.Stderr) != "err\n" {
		t.Errorf("Run through Get: %+v, %v; want exit 7 with out/err", res, err)
	}
	a2.Close()

	// A lab whose QEMU dies under a running command: the command fails
	// saying the lab's QEMU exited, with the console, not merely that
	// the connection went.
	runErr := make(chan error, 1)
	go func() {
		_, err := b.Client().Run(ctx, []string{"sleep", "60"}, nil)
		runErr <- b.Explain(err)
	}()
	time.Sleep(time.Second)
	// A lab whose QEMU dies is stale: detected, then cleaned.
	bMux := muxPID(b.Dir())
	if bMux == 0 {
		t.Errorf("lab %s has no mux running", b.Name())
	}
	syscall.Kill(b.PID(), syscall.SIGKILL)
	<-b.exited
	// Its mux does not outlive it.
	if !processGone(bMux, 3*time.Second) {
		t.Errorf("the mux (pid %d) of lab %s still runs 3s after its QEMU was killed", bMux, b.Name())
	}
	if err := <-runErr; err == nil || !strings.Contains(err.Error(), "QEMU exited") || !strings.Contains(err.Error(), "--- console (last lines) ---") {
		t.Errorf("Run while the lab's QEMU was killed: %v\nwant an error saying QEMU exited, with the console's last lines", err)
	}
	if sts, _ := List(); !hasState(sts, b.Name(), "stale") {
		t.Errorf("List() after killing %s's QEMU = %+v, want it stale", b.Name(), sts)
	}
	if _, err := Get(ctx, b.Name()); err == nil || !strings.Contains(err.Error(), "not running") {
		t.Errorf("Get of a dead lab: %v, want a 'not running' error", err)
	}
	if _, err := os.Stat(labDir(b.Name())); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stale state of %s left behind: %v", b.Name(), err)
	}

	t.Logf("stale lab detected and cleaned after %.1fs", time.Since(start).Seconds())

	// Clean shutdown: QEMU exits by itself, nothing is left.
	downStart := time.Now()
	pid, aMux := a.PID(), muxPID(a.Dir())
	if err := Down(ctx, a.Name(), nil); err != nil {
		t.Fatalf("Down(%s): %v", a.Name(), err)
	}
	<-a.exited
	if _, err := os.Stat(labDir(a.Name())); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state of %s left after Down: %v", a.Name(), err)
	}
	if syscall.Kill(pid, 0) == nil {
		t.Errorf("QEMU pid %d still exists after Down", pid)
	}
	if aMux == 0 || !processGone(aMux, 0) {
		t.Errorf("the mux (pid %d) of lab %s still runs after Down, or had not run", aMux, a.Name())
	}
	t.Logf("down in %.1fs; whole test %.1fs", time.Since(downStart).Seconds(), time.Since(start).Seconds())
}

// procModules maps each module in the text of /proc/modules to its
// fields after name and size: refs, used-by, state, address.
func procModules(text string) map[string][]string {
	m := map[string][]string{}
	for _, line := range strings.Split(text, "\n") {
		if f := strings.Fields(line); len(f) >= 2 {
			m[f[0]] = f[2:]
		}
	}
	return m
}

func hasState(sts []Status, name, state string) bool {
	for _, s := range sts {
		if s.Name == name {
			return s.State == state
		}
	}
	return false
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

// TestBuiltLab boots the `built` flavor when `make lab-kernel` has put it
// in the cache; it is not built by every make test run, so its absence
// skips even under make test.
func TestBuiltLab(t *testing.T) {
	k, err := FindKernel(Built)
	if err != nil {
		t.Skipf("no built lab kernel: %v", err)
	}
	needLab(t, Debian) // QEMU and busybox
	agent := testAgent(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	modc := make(chan error, 1)
	var mods labModules
	go func() {
		var err error
		mods, err = buildModules(ctx, k.BuildDir)
		modc <- err
	}()
	l, err := Up(ctx, Config{Name: testName("built"), Kernel: Built, Agent: agent})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Down(context.Background())
	if got := strings.TrimSpace(run(t, ctx, l, "uname", "-r")); got != k.Release {
		t.Errorf("uname -r = %q, want %q", got, k.Release)
	}
	plugin, _ := os.ReadFile(filepath.Join(filepath.Dir(k.Image), "plugin"))
	if p := strings.TrimSpace(string(plugin)); p != "none" {
		f, err := elf.Open(k.Vmlinux)
		if err != nil {
			t.Fatal(err)
		}
		if s := f.Section(".debug_klasy"); s == nil || s.Size == 0 {
			t.Errorf("%s was built with the plugin but has no .debug_klasy section", k.Vmlinux)
		}
		f.Close()
	} else {
		t.Logf("note: %s was built without the klasy plugin", k.Vmlinux)
	}
	if err := <-modc; err != nil {
		t.Fatalf("%+v", err)
	}
	if _, err := kmod.Load(ctx, l.Client(), mods.test, ""); err != nil {
		t.Fatalf("loading the test module into the built kernel: %v", err)
	}
	// Without ftrace in this config the probe is jump-optimized, which
	// the kernel does asynchronously.
	var list []byte
	for deadline := time.Now().Add(10 * time.Second); ; {
		list, err = l.Client().ReadFile(ctx, "/sys/kernel/debug/kprobes/list")
		if err != nil || strings.Contains(string(list), "[OPTIMIZED]") || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil || !strings.Contains(string(list), "do_sys_openat2+0x0") || !strings.Contains(string(list), "[OPTIMIZED]") {
		t.Errorf("kprobes list: want do_sys_openat2 [OPTIMIZED]: %v\n%s", err, list)
	}
	if err := kmod.Unload(ctx, l.Client(), "klasy_lab_test"); err != nil {
		t.Fatal(err)
	}
	if err := l.Down(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestFailedBootReportsConsole boots a guest whose agent cannot start
// (busybox in place of klasy): Up must give up, say why, show the
// console's last lines, and leave no QEMU and no state behind.
func TestFailedBootReportsConsole(t *testing.T) {
	needLab(t, Debian)
	bb, err := initramfs.FindBusybox()
	if err != nil {
		t.Fatal(err)
	}
	t.Parallel()
	name := testName("fail")
	start := time.Now()
	_, err = Up(context.Background(), Config{Name: name, Agent: bb, BootTimeout: 3 * time.Minute})
	if err == nil {
		Down(context.Background(), name, nil)
		t.Fatal("Up with an agent that cannot start succeeded")
	}
	msg := err.Error()
	for _, want := range []string{"agent in the guest exited with status 127 before answering", "--- console (last lines) ---", "klasy: applet not found"} {
		if !strings.Contains(msg, want) {
			t.Errorf("Up error lacks %q:\n%s", want, msg)
		}
	}
	if _, err := os.Stat(labDir(name)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state of the failed lab left behind: %v", err)
	}
	if sts, _ := List(); hasState(sts, name, "running") || hasState(sts, name, "stale") {
		t.Errorf("failed lab still listed: %+v", sts)
	}
	// The agent's exit is on the console: Up must not sit out its timeout.
	if took := time.Since(start); took > 90*time.Second {
		t.Errorf("failed boot reported after %v, want well under the 3m boot timeout", took)
	}
	t.Logf("failed boot reported after %.1fs", time.Since(start).Seconds())
}

// progressFunc calls fn with each progress line Up writes.
type progressFunc func(line string)

func (f progressFunc) Write(p []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		f(line)
	}
	return len(p), nil
}

// qemuRunning reports whether a QEMU of the lab called name runs.
func qemuRunning(name string) bool {
	cmdlines, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range cmdlines {
		data, err := os.ReadFile(p)
		if err == nil && bytes.Contains(data, []byte("\x00klasy-lab-"+name+"\x00")) {
			return true
		}
	}
	return false
}

// TestInterruptedUp is Ctrl-C during `klasy lab up`: Up says it was
// interrupted (not that the agent timed out) and leaves neither QEMU nor
// state behind.
func TestInterruptedUp(t *testing.T) {
	needLab(t, Debian)
	agent := testAgent(t)
	t.Parallel()
	name := testName("intr")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	progress := progressFunc(func(line string) {
		if strings.Contains(line, "starting QEMU") {
			time.AfterFunc(time.Second, cancel)
		}
	})
	l, err := Up(ctx, Config{Name: name, Agent: agent, Progress: progress})
	if err == nil {
		l.Down(context.Background())
		t.Fatal("Up succeeded although its context was canceled a second into the boot")
	}
	if !errors.Is(err, context.Canceled) || strings.Contains(err.Error(), "did not answer within") {
		t.Errorf("Up error = %v\nwant one that says the boot was interrupted (context.Canceled)", err)
	}
	if qemuRunning(name) {
		t.Error("QEMU of the interrupted lab still runs")
	}
	if _, err := os.Stat(labDir(name)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state of the interrupted lab left behind: %v", err)
	}
}

// processGone reports whether process pid ends (or is a zombie) within d.
func processGone(pid int, d time.Duration) bool {
	for deadline := time.Now().Add(d); ; time.Sleep(20 * time.Millisecond) {
		if procArgs(pid) == nil {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// checkConcurrentClients runs eight execs of mixed length at once, each
// through a client of its own (as eight klasy processes would), while a
// stream follows the kernel log (as klasy trace --follow will): long
// sleeps, input larger than a frame, output larger than Run's limit, and
// short commands that must not wait behind the long ones.
func checkConcurrentClients(t *testing.T, ctx context.Context, l *Lab) {
	get := func() *Lab {
		c, err := Get(ctx, l.Name())
		if err != nil {
			t.Fatalf("Get(%s) while other clients hold the lab: %v", l.Name(), err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	const marker = "klasy-concurrent-clients"
	seen := make(chan struct{})
	sctx, stopStream := context.WithCancel(ctx)
	defer stopStream()
	streamErr := make(chan error, 1)
	go func() {
		once := false
		streamErr <- get().Client().Stream(sctx, "/dev/kmsg", func(b []byte) error {
			if !once && bytes.Contains(b, []byte(marker)) {
				once = true
				close(seen)
			}
			return nil
		})
	}()

	type result struct {
		what       string
		took       time.Duration
		start, end time.Time
		err        error
	}
	results := make(chan result, 8)
	exec := func(what string, argv []string, stdin []byte, check func(out []byte) error) {
		go func() {
			c := get()
			start := time.Now()
			var out bytes.Buffer
			var in io.Reader
			if stdin != nil {
				in = bytes.NewReader(stdin)
			}
			code, err := c.Client().Exec(ctx, argv, in, &out, io.Discard)
			if err == nil && code != 0 {
				err = fmt.Errorf("exit status %d", code)
			}
			if err == nil {
				err = check(out.Bytes())
			}
			results <- result{what, time.Since(start), start, time.Now(), err}
		}()
	}
	want := func(s string) func([]byte) error {
		return func(out []byte) error {
			if strings.TrimSpace(string(out)) != s {
				return fmt.Errorf("output %.80q, want %q", out, s)
			}
			return nil
		}
	}
	const long = 8 * time.Second
	for i := 0; i < 4; i++ {
		exec("long", []string{"sh", "-c", fmt.Sprintf("sleep %d; echo long", long/time.Second)}, nil, want("long"))
	}
	big := make([]byte, 20<<20) // above a frame's 16 MiB
	rand.Read(big)
	exec("stdin-20MiB", []string{"wc", "-c"}, big, want(fmt.Sprint(len(big))))
	const outN = 12 << 20
	exec("output-12MiB", []string{"head", "-c", fmt.Sprint(outN), "/dev/zero"}, nil, func(out []byte) error {
		if len(out) != outN {
			return fmt.Errorf("%d bytes of output, want %d", len(out), outN)
		}
		return nil
	})
	time.Sleep(time.Second) // the long ones run
	exec("short", []string{"echo", "short"}, nil, want("short"))
	exec("short-kmsg", []string{"sh", "-c", "echo " + marker + " >/dev/kmsg; echo done"}, nil, want("done"))

	var longEnd time.Time
	var shorts []result
	for i := 0; i < 8; i++ {
		r := <-results
		if r.err != nil {
			t.Errorf("concurrent exec %s: %v", r.what, r.err)
		}
		t.Logf("concurrent exec %-12s took %.2fs", r.what, r.took.Seconds())
		switch {
		case r.what == "long" && (longEnd.IsZero() || r.end.Before(longEnd)):
			longEnd = r.end
		case strings.HasPrefix(r.what, "short"):
			shorts = append(shorts, r)
		}
	}
	// A short exec that waited behind a long one would take most of the
	// long one's sleep; one that ran beside it takes what the guest's
	// emulated CPU, busy with the transfers, leaves it.
	for _, r := range shorts {
		if !r.start.Before(longEnd) {
			t.Errorf("exec %s started after the long ones ended: the test proves nothing", r.what)
		}
		if r.took > long/2 {
			t.Errorf("exec %s took %.2fs beside execs sleeping %v: it waited behind them", r.what, r.took.Seconds(), long)
		}
	}
	select {
	case <-seen:
	case <-time.After(30 * time.Second):
		t.Errorf("the stream of /dev/kmsg did not see %q written while the execs ran", marker)
	}
	stopStream()
	if err := <-streamErr; !errors.Is(err, context.Canceled) {
		t.Errorf("Stream(/dev/kmsg) = %v, want context.Canceled", err)
	}
}

// checkMuxRestart kills the lab's mux: status shows none, and the next
// Get starts a new one, shown by status.
func checkMuxRestart(t *testing.T, ctx context.Context, l *Lab) {
	muxOf := func() int {
		sts, err := List()
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range sts {
			if s.Name == l.Name() {
				return s.MuxPID
			}
		}
		t.Fatalf("List() lacks lab %s", l.Name())
		return 0
	}
	old := muxOf()
	if old == 0 {
		t.Fatalf("List() shows no mux for lab %s", l.Name())
	}
	syscall.Kill(old, syscall.SIGKILL)
	if !processGone(old, 3*time.Second) || muxOf() != 0 {
		t.Fatalf("the killed mux %d still shows", old)
	}
	l2, err := Get(ctx, l.Name())
	if err != nil {
		t.Fatalf("Get(%s) after its mux was killed: %v", l.Name(), err)
	}
	defer l2.Close()
	if got := strings.TrimSpace(run(t, ctx, l2, "hostname")); got != l.Name() {
		t.Errorf("hostname through the new mux = %q", got)
	}
	if p := muxOf(); p == 0 || p == old {
		t.Errorf("mux after Get = %d, want a new one (the old was %d)", p, old)
	}
}

// TestKilledCallerTakesQEMU is a test binary killed mid-boot (go test's
// timeout, ^C): with DieWithCaller, as the tests' labs are started, its
// QEMU dies with it instead of spinning a CPU for hours.
func TestKilledCallerTakesQEMU(t *testing.T) {
	if name := os.Getenv("KLASY_LAB_CALLER"); name != "" {
		// The caller: boot and wait to be killed.
		Up(context.Background(), Config{Name: name, Agent: os.Getenv("KLASY_LAB_CALLER_AGENT"), DieWithCaller: true})
		select {}
	}
	needLab(t, Debian)
	agent := testAgent(t)
	t.Parallel()
	name := testName("orphan")
	caller := exec.Command(os.Args[0], "-test.run=^TestKilledCallerTakesQEMU$")
	caller.Env = append(os.Environ(), "KLASY_LAB_CALLER="+name, "KLASY_LAB_CALLER_AGENT="+agent)
	if err := caller.Start(); err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(labDir(name))
	var qemu int
	for deadline := time.Now().Add(time.Minute); qemu == 0; time.Sleep(50 * time.Millisecond) {
		if rec, err := findLab(name); err == nil && rec.PID > 0 {
			qemu = rec.PID
		} else if time.Now().After(deadline) {
			caller.Process.Kill()
			t.Fatalf("the caller started no QEMU within a minute: %v", err)
		}
	}
	caller.Process.Kill()
	caller.Wait()
	if !processGone(qemu, 10*time.Second) {
		syscall.Kill(qemu, syscall.SIGKILL)
		t.Fatalf("QEMU (pid %d) still runs 10 s after the process that started it was killed", qemu)
	}
}
