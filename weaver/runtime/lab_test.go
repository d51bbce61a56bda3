package runtime_test

import (
	"bufio"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/klasy/klasy/agent"
	"github.com/klasy/klasy/internal/testenv"
	"github.com/klasy/klasy/kmod"
	"github.com/klasy/klasy/lab"
	"github.com/klasy/klasy/weaver/records"
	"github.com/klasy/klasy/weaver/runtime"
	"golang.org/x/arch/x86/x86asm"
)

const (
	adviceModule = "klasy_test_advice"
	magic        = 0x6b6c617379 // KLASY_TEST_MAGIC
	probed       = "__x64_sys_getppid"
)

// guest wraps the agent client with the few things this test does often.
type guest struct {
	t   *testing.T
	ctx context.Context
	c   *agent.Client
}

func (g guest) run(argv ...string) string {
	g.t.Helper()
	res, err := g.c.Run(g.ctx, argv, nil)
	if err != nil || res.ExitCode != 0 {
		g.t.Fatalf("guest: %q: %v, exit %d: %s%s", argv, err, res.ExitCode, res.Stdout, res.Stderr)
	}
	return string(res.Stdout)
}

func (g guest) read(path string) string {
	g.t.Helper()
	b, err := g.c.ReadFile(g.ctx, path)
	if err != nil {
		g.t.Fatalf("guest: reading %s: %v", path, err)
	}
	return string(b)
}

func (g guest) status() *records.Status {
	g.t.Helper()
	text := g.read(runtime.StatusPath)
	s, err := records.ParseStatus([]byte(text))
	if err != nil {
		g.t.Fatalf("%v\n%s", err, text)
	}
	return s
}

// drain consumes every record. Each read(2) must hold whole records.
func (g guest) drain() []records.Record {
	g.t.Helper()
	var all []records.Record
	err := g.c.Stream(g.ctx, runtime.RecordsPath, func(chunk []byte) error {
		rs, err := records.Decode(chunk)
		if err != nil {
			return fmt.Errorf("one read of %d bytes: %w", len(chunk), err)
		}
		all = append(all, rs...)
		return nil
	})
	if err != nil {
		g.t.Fatalf("reading %s: %v", runtime.RecordsPath, err)
	}
	return all
}

func (g guest) load(ko, params string) error {
	g.t.Helper()
	b, err := os.ReadFile(ko)
	if err != nil {
		g.t.Fatal(err)
	}
	_, err = kmod.Load(g.ctx, g.c, b, params)
	return err
}

func (g guest) mustLoad(ko, params string) {
	g.t.Helper()
	if err := g.load(ko, params); err != nil {
		g.t.Fatalf("loading %s %s: %v\n%s", filepath.Base(ko), params, err, lastLines(g.run("dmesg"), 10))
	}
}

func (g guest) unload(name string) {
	g.t.Helper()
	if err := kmod.Unload(g.ctx, g.c, name); err != nil {
		g.t.Fatal(err)
	}
}

// klasyModules lists the klasy modules in the guest's /proc/modules.
func (g guest) klasyModules() []string {
	g.t.Helper()
	ms, err := g.c.Modules(g.ctx)
	if err != nil {
		g.t.Fatal(err)
	}
	var names []string
	for _, m := range ms {
		if strings.HasPrefix(m.Name, "klasy") {
			names = append(names, m.Name)
		}
	}
	return names
}

// cost returns the time per getppid call of the fastest of 5 runs of
// 2000 calls, reading the records after each run (with the runtime
// loaded) so none is lost.
func (g guest) cost(runtimeLoaded bool) float64 {
	g.t.Helper()
	best := 0.0
	for i := 0; i < 5; i++ {
		_, _, ns := g.loop(2000, 1)
		if i == 0 || ns < best {
			best = ns
		}
		if runtimeLoaded {
			g.drain()
		}
	}
	return best
}

// loop runs the getppid program and returns its pid, its parent's pid
// and the time per call of its fastest round.
func (g guest) loop(n, rounds int) (pid, ppid uint32, ns float64) {
	g.t.Helper()
	out := g.run("/tmp/getppid_loop", strconv.Itoa(n), strconv.Itoa(rounds))
	if _, err := fmt.Sscanf(out, "pid=%d ppid=%d n=%d ns_per_call=%g", &pid, &ppid, &n, &ns); err != nil {
		g.t.Fatalf("getppid_loop printed %q: %v", out, err)
	}
	return pid, ppid, ns
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(l[max(0, len(l)-n):], "\n")
}

// imageFunc returns a function's address in the vmlinux (before KASLR)
// and its code.
func imageFunc(vmlinux, name string) (uint64, []byte, error) {
	f, err := elf.Open(vmlinux)
	if err != nil {
		return 0, nil, err
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil {
		return 0, nil, err
	}
	for _, s := range syms {
		if s.Name != name || elf.ST_TYPE(s.Info) != elf.STT_FUNC {
			continue
		}
		text := f.Section(".text")
		if text == nil || s.Value < text.Addr || s.Value+s.Size > text.Addr+text.Size {
			return 0, nil, fmt.Errorf("%s: %s is not in .text", vmlinux, name)
		}
		code := make([]byte, s.Size)
		if _, err := text.ReadAt(code, int64(s.Value-text.Addr)); err != nil {
			return 0, nil, err
		}
		return s.Value, code, nil
	}
	return 0, nil, fmt.Errorf("%s: no function %s", vmlinux, name)
}

// probeSites returns two offsets in code, past the 5-byte ftrace call at
// its entry: one where the kernel can put a jump (the instructions in
// the 5 bytes from there neither call, jump nor return), and a call,
// where a kprobe stays a breakpoint (a relative call is not boostable).
func probeSites(code []byte) (jump, int3 int, err error) {
	var offs []int
	var ops []x86asm.Op
	for off := 0; off < len(code); {
		inst, err := x86asm.Decode(code[off:], 64)
		if err != nil {
			return 0, 0, fmt.Errorf("decoding at +%#x: %v", off, err)
		}
		offs, ops = append(offs, off), append(ops, inst.Op)
		off += inst.Len
	}
	branch := func(op x86asm.Op) bool {
		s := op.String()
		return op == x86asm.CALL || op == x86asm.RET || s[0] == 'J' || s == "LOOP"
	}
	jump, int3 = -1, -1
	for i, off := range offs {
		if off < 5 {
			continue
		}
		if int3 < 0 && ops[i] == x86asm.CALL {
			int3 = off
		}
		if jump < 0 {
			ok := true
			for j := i; j < len(offs) && offs[j] < off+5; j++ {
				ok = ok && !branch(ops[j])
			}
			if ok && off+5 <= len(code) {
				jump = off
			}
		}
	}
	if jump < 0 || int3 < 0 {
		return 0, 0, fmt.Errorf("no site for a jump (%d) or a breakpoint (%d)", jump, int3)
	}
	return jump, int3, nil
}

// kallsyms returns a symbol's address in the running guest kernel.
func (g guest) kallsyms(name string) uint64 {
	g.t.Helper()
	out := g.run("grep", "-m1", " "+name+"$", "/proc/kallsyms")
	a, err := strconv.ParseUint(strings.Fields(out)[0], 16, 64)
	if err != nil || a == 0 {
		g.t.Fatalf("/proc/kallsyms line %q: %v", out, err)
	}
	return a
}

// blacklisted returns the start and name of a function the kernel
// refuses to probe, with kprobes and with ftrace alike: exc_int3, in
// .noinstr.text (do_int3, only NOKPROBE, has an ftrace site, and an
// entry hook there goes on the aspect's ftrace_ops).
func (g guest) blacklisted() (uint64, string) {
	g.t.Helper()
	sc := bufio.NewScanner(strings.NewReader(g.read("/sys/kernel/debug/kprobes/blacklist")))
	for sc.Scan() {
		// 0xffffffff81000000-0xffffffff81000020	do_int3
		rng, name, ok := strings.Cut(sc.Text(), "\t")
		start, _, _ := strings.Cut(rng, "-")
		a, err := strconv.ParseUint(strings.TrimPrefix(start, "0x"), 16, 64)
		if ok && err == nil && name == "exc_int3" {
			return a, name
		}
	}
	g.t.Fatal("exc_int3 is not in /sys/kernel/debug/kprobes/blacklist")
	return 0, ""
}

// TestRuntimeInLab loads the runtime and a hand-written advice module on
// getppid into Debian's kernel under QEMU (2 CPUs) and checks, through
// the agent: records and status after a program's getppid calls, the
// per-call cost, the flow tables (a scenario's exact counts, tasks freed
// without quit), an aspect refused in the middle leaving nothing behind,
// a flooded tiny buffer counting lost records and still reading whole
// ones, and unloading leaving no kprobe and no klasy module.
func TestRuntimeInLab(t *testing.T) { runtimeInLab(t, debianKernel(t)) }

// TestRuntimeInRTLab (issue 20 #6) is the same on Debian's PREEMPT_RT
// kernel of the same ABI, where a lock that sleeps or an allocation in a
// handler is invalid: make test-rt.
func TestRuntimeInRTLab(t *testing.T) {
	k, err := lab.FindKernel(lab.DebianRT)
	testenv.Need(t, "debian-rt", err)
	runtimeInLab(t, k)
}

func runtimeInLab(t *testing.T, k lab.Kernel) {
	_, err := exec.LookPath("qemu-system-x86_64")
	testenv.Need(t, "lab", err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()

	tmp := t.TempDir()
	agentBin := filepath.Join(tmp, "klasy")
	build := exec.Command("go", "build", "-o", agentBin, "github.com/klasy/klasy/cmd/klasy")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the static agent: %v\n%s", err, out)
	}
	type upResult struct {
		l   *lab.Lab
		err error
	}
	up := make(chan upResult, 1)
	go func() {
		l, err := lab.Up(ctx, lab.Config{Name: fmt.Sprintf("t%d-runtime", os.Getpid()), Kernel: k.Flavor, Agent: agentBin, CPUs: 2, DieWithCaller: true})
		up <- upResult{l, err}
	}()
	var l *lab.Lab
	defer func() {
		if l == nil {
			if r := <-up; r.l != nil {
				r.l.Down(context.Background())
			}
		}
	}()

	// Meanwhile, on the host: the modules, the program, the image address.
	rtKo := filepath.Join(buildRuntime(t, k), runtime.ModuleName+".ko")
	advKo := buildAdvice(t, k)
	prog := filepath.Join(tmp, "getppid_loop")
	if out, err := exec.Command("gcc", "-static", "-O2", "-o", prog, "testdata/getppid_loop.c").CombinedOutput(); err != nil {
		t.Fatalf("gcc -static getppid_loop.c: %v\n%s", err, out)
	}
	image, code, err := imageFunc(k.Vmlinux, probed)
	if err != nil {
		t.Fatal(err)
	}
	jumpOff, int3Off, err := probeSites(code)
	if err != nil {
		t.Fatalf("%s in %s: %v", probed, k.Vmlinux, err)
	}

	r := <-up
	if r.err != nil {
		t.Fatalf("lab up: %v", r.err)
	}
	l = r.l
	defer l.Down(context.Background())
	t.Logf("lab up and modules built after %.1fs", time.Since(start).Seconds())
	g := guest{t, ctx, l.Client()}
	defer func() {
		if t.Failed() {
			t.Logf("guest dmesg:\n%s", lastLines(g.run("dmesg"), 30))
		}
	}()

	progBytes, err := os.ReadFile(prog)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.c.WriteFile(ctx, "/tmp/getppid_loop", progBytes, 0o755); err != nil {
		t.Fatal(err)
	}
	const kprobesList = "/sys/kernel/debug/kprobes/list"
	const enabledFunctions = "/sys/kernel/debug/tracing/enabled_functions"
	efBefore := g.read(enabledFunctions)
	listBefore := g.read(kprobesList)
	if ms := g.klasyModules(); len(ms) != 0 {
		t.Fatalf("klasy modules before the test: %v", ms)
	}
	entry := g.kallsyms(probed)
	advParams := fmt.Sprintf("entry=%#x entry_image=%#x", entry, image)

	// The cost of getppid without hooks, for the cost with them below.
	bare := g.cost(false)

	// Records and status of one aspect: a kprobe and a kretprobe.
	g.mustLoad(rtKo, "")
	g.mustLoad(advKo, advParams+" wide=1")
	s := g.status()
	if len(s.Aspects) != 1 || len(s.Aspects[0].Hooks) != 2 {
		t.Fatalf("status after loading one aspect of 2 hooks: %+v", s)
	}
	a := s.Aspects[0]
	if a.ID != 1 || a.Name != "getppid" || a.Module != adviceModule || s.BufferKB != 1024 || s.CPUs < 2 || s.Unread != 0 {
		t.Errorf("status: runtime %+v, aspect %+v", s, a)
	}
	wantHook := func(h records.Hook, index int, kind, mech string, advice []int) {
		t.Helper()
		if h.Index != index || h.Kind != kind || h.Mech != mech || h.Addr != entry || h.Image != image ||
			!reflect.DeepEqual(h.Advice, advice) || h.Function != probed || h.InlinedIn != "" || h.File != "kernel/sys.c" || h.Line != 968 {
			t.Errorf("status hook %d: %+v\nwant %s, mech %s, addr %#x, image %#x, advice %v, %s at kernel/sys.c:968",
				index, h, kind, mech, entry, image, advice, probed)
		}
	}
	// The aspect hooks getppid's return too: its entry hook stays a
	// kprobe on ftrace, off the aspect's ftrace_ops (klasy_fops.c:
	// klasy_fops_returns_too; TestWeaveInLab's ftrace-ops steps test the
	// ops).
	wantHook(a.Hooks[0], 0, records.KindKprobe, records.MechFtrace, []int{1})
	wantHook(a.Hooks[1], 1, records.KindKretprobe, records.MechKretprobe, []int{2, 3})

	const n = 1000
	pid, ppid, _ := g.loop(n, 1)
	s = g.status()
	unread := s.Unread
	for i, h := range s.Aspects[0].Hooks {
		if h.Hits < n {
			t.Errorf("hook %d: %d hits after %d getppid calls", i, h.Hits, n)
		}
	}
	if s.TotalLost() != 0 {
		t.Errorf("lost records: %v", s.Lost)
	}
	recs := g.drain()
	if uint64(len(recs)) < unread || unread < 3*n {
		t.Errorf("read %d records; status said %d unread after %d calls of 3 records", len(recs), unread, n)
	}
	var mine []records.Record
	for _, r := range recs {
		if r.PID == pid {
			mine = append(mine, r)
		}
		if int(r.CPU) >= s.CPUs || r.Aspect != a.ID {
			t.Errorf("record %+v: CPU or aspect out of range", r)
		}
	}
	if len(mine) != 3*n {
		t.Errorf("%d records of pid %d, want %d (3 per getppid call)", len(mine), pid, 3*n)
	}
	cpus := map[uint16]bool{}
	for i, r := range mine {
		cpus[r.CPU] = true
		var want records.Record
		switch i % 3 {
		case 0:
			want = records.Record{Hook: 0, Advice: 1, Values: []uint64{uint64(pid), magic}}
		case 1:
			want = records.Record{Hook: 1, Advice: 2, Values: []uint64{uint64(ppid)}}
		case 2:
			want = records.Record{Hook: 1, Advice: 3, Dropped: 2, Values: []uint64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}}
		}
		want.TimeNS, want.Aspect, want.PID, want.CPU, want.Comm = r.TimeNS, a.ID, pid, r.CPU, "getppid_loop"
		if !reflect.DeepEqual(r, want) {
			t.Errorf("record %d of the program:\n%+v\nwant\n%+v", i, r, want)
			break
		}
		// One task's records were written one after the other: read
		// oldest first across CPUs, they come in that order.
		if i > 0 && r.TimeNS < mine[i-1].TimeNS {
			t.Errorf("record %d (cpu %d) at %d ns is older than the one read before it (cpu %d, %d ns)", i, r.CPU, r.TimeNS, mine[i-1].CPU, mine[i-1].TimeNS)
			break
		}
	}
	t.Logf("%d records read (%d of the program, written on CPUs %v)", len(recs), len(mine), cpus)
	if s := g.status(); s.Unread != 0 {
		t.Errorf("status after reading every record: unread=%d", s.Unread)
	}

	// The runtime cannot go while an advice module uses it.
	if err := kmod.Unload(ctx, g.c, runtime.ModuleName); !errors.Is(err, kmod.ErrInUse) {
		t.Fatalf("unloading the runtime under a loaded advice module: %v, want it refused as in use", err)
	}

	// The cost per call with the entry hook alone, then with the
	// kretprobe too, one record per hook.
	g.unload(adviceModule)
	g.mustLoad(advKo, advParams+" ret=0")
	entryOnly := g.cost(true)
	g.unload(adviceModule)
	g.mustLoad(advKo, advParams)
	both := g.cost(true)
	s = g.status()
	if len(s.Aspects) != 1 || s.Aspects[0].ID != 3 || s.TotalLost() != 0 {
		t.Errorf("status of the aspect loaded a third time: %+v, want id 3 (ids are not reused) and nothing lost", s)
	}
	t.Logf("getppid under TCG, best of 5 runs of 2000 calls: %.0f ns bare, %.0f ns with the entry hook (ftrace), %.0f ns with the kretprobe too; one record per hook: entry hook %.0f ns, return hook %.0f ns",
		bare, entryOnly, both, entryOnly-bare, both-entryOnly)
	g.unload(adviceModule)

	// mech in status is what the kernel's kprobes list shows: a jump
	// (optimized, asynchronously) and a breakpoint inside the function.
	g.mustLoad(advKo, fmt.Sprintf("%s mid=%#x,%#x", advParams, entry+uint64(jumpOff), entry+uint64(int3Off)))
	wantMech := []string{records.MechFtrace, records.MechJump, records.MechInt3, records.MechKretprobe}
	var mechs []string
	mechStart := time.Now()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		mechs = nil
		for _, h := range g.status().Aspects[0].Hooks {
			mechs = append(mechs, h.Mech)
		}
		if reflect.DeepEqual(mechs, wantMech) || time.Now().After(deadline) {
			break
		}
	}
	if !reflect.DeepEqual(mechs, wantMech) {
		t.Errorf("mechanisms of hooks at +0, +%#x, +%#x and the return: %v, want %v", jumpOff, int3Off, mechs, wantMech)
	}
	list := g.read(kprobesList)
	t.Logf("hooks at +0, +%#x, +%#x, return: %v after %.1fs; kprobes list:\n%s", jumpOff, int3Off, mechs, time.Since(mechStart).Seconds(), list)
	// The entry hook is a kprobe on ftrace (the return is hooked too).
	for i, want := range map[uint64]string{entry: "[FTRACE]", entry + uint64(jumpOff): "[OPTIMIZED]", entry + uint64(int3Off): ""} {
		var line string
		for _, l := range strings.Split(list, "\n") {
			if strings.HasPrefix(l, fmt.Sprintf("%016x  k ", i)) {
				line = l
			}
		}
		if want == "none" {
			if line != "" {
				t.Errorf("kprobes list line for the entry hook at 0x%x: %q, want none", i, line)
			}
			continue
		}
		if line == "" || strings.Contains(line, "[") != (want != "") || !strings.Contains(line, want) {
			t.Errorf("kprobes list line for 0x%x: %q, want one with %q", i, line, want)
		}
	}
	if ef := g.read(enabledFunctions); !strings.Contains(ef, "__do_sys_getppid (1) R") {
		// One ftrace_ops with registers there: kprobes', for the entry
		// kprobe and the kretprobe's.
		t.Errorf("ftrace's enabled_functions lacks getppid's one user:\n%s", ef)
	}
	g.loop(100, 1)
	for i, h := range g.status().Aspects[0].Hooks {
		if h.Hits < 100 {
			t.Errorf("hook %d (%s): %d hits after 100 getppid calls", i, h.Mech, h.Hits)
		}
	}
	g.drain()
	g.unload(adviceModule)
	if s := g.status(); len(s.Aspects) != 0 {
		t.Errorf("status after unloading the advice module: %+v", s.Aspects)
	}
	if got := g.read(kprobesList); got != listBefore {
		t.Errorf("kprobes after unloading the advice module:\n%s\nbefore:\n%s", got, listBefore)
	}
	if got := g.read(enabledFunctions); got != efBefore {
		t.Errorf("ftrace's enabled functions after unloading the advice module:\n%s\nbefore:\n%s", got, efBefore)
	}

	// Flows: the advice module's init plays a scenario on "labinit" and
	// fails if a lookup answers wrong (a copy, a move, a quit, an ID cut
	// while another live one shares its low 12 bits, an object freed
	// without quit); advice 1 registers each getppid caller's task in
	// "labtask", whose entry the free hook drops when the task is freed.
	g.mustLoad(advKo, advParams+" ret=0 flow=1")
	s = g.status()
	wantInit := records.Flow{Name: "labinit", Limit: 16 << 12, Hits: 3, Misses: 3, Freed: 1, Ambiguous: 1}
	if len(s.Flows) != 2 || s.Flows[0] != wantInit || s.Flows[1].Name != "labtask" {
		t.Errorf("flows after the scenario: %+v\nwant %+v and labtask", s.Flows, wantInit)
	}
	g.loop(n, 1)
	var task records.Flow
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if s = g.status(); len(s.Flows) == 2 {
			task = s.Flows[1]
		}
		// The loop's task, gone when its last reference goes after an
		// RCU grace period.
		if task.Freed >= 1 || time.Now().After(deadline) {
			break
		}
	}
	if task.Hits < n-1 || task.Misses < 1 || task.Freed < 1 || task.Evictions != 0 || task.Dropped != 0 || task.Entries > task.Limit {
		t.Errorf("labtask after %d getppid calls of one task that then exited: %+v, want hits >= %d, misses and freed >= 1", n, task, n-1)
	}
	t.Logf("flows: %+v", s.Flows)
	g.unload(adviceModule)
	if s := g.status(); len(s.Flows) != 0 {
		t.Errorf("flows after unloading the advice module: %+v", s.Flows)
	}

	// An aspect whose middle hook the kernel refuses: nothing stays.
	bl, blName := g.blacklisted()
	for _, tt := range []struct {
		what        string
		addr, image uint64
		function    string
		errno       syscall.Errno
	}{
		{"not an instruction boundary", entry + 1, image + 1, probed, syscall.EILSEQ},
		{"blacklisted", bl, 0, blName, syscall.EINVAL},
	} {
		err := g.load(advKo, fmt.Sprintf("%s bad=%#x bad_image=%#x bad_function=%s", advParams, tt.addr, tt.image, tt.function))
		if !errors.Is(err, tt.errno) {
			t.Errorf("loading an aspect with a hook %s in the middle: %v, want %v", tt.what, err, tt.errno)
		}
		if s := g.status(); len(s.Aspects) != 0 {
			t.Errorf("status after a refused aspect (%s): %+v", tt.what, s.Aspects)
		}
		if got := g.read(kprobesList); got != listBefore {
			t.Errorf("kprobes after a refused aspect (%s):\n%s\nbefore:\n%s", tt.what, got, listBefore)
		}
		if got := g.read(enabledFunctions); got != efBefore {
			t.Errorf("ftrace's enabled functions after a refused aspect (%s):\n%s\nbefore:\n%s", tt.what, got, efBefore)
		}
		want := fmt.Sprintf("klasy_runtime: aspect getppid: registering hook 1 (%s at 0x%x, image 0x%x): error %d",
			tt.function, tt.addr, tt.image, -int(tt.errno))
		if dmesg := g.run("dmesg"); !strings.Contains(dmesg, want) {
			t.Errorf("dmesg lacks %q:\n%s", want, lastLines(dmesg, 8))
		}
	}
	if ms := g.klasyModules(); !reflect.DeepEqual(ms, []string{runtime.ModuleName}) {
		t.Errorf("modules after the refused aspects: %v, want only the runtime", ms)
	}

	// A tiny buffer, flooded and not read: lost records are counted, and
	// what is left still reads as whole records.
	g.unload(runtime.ModuleName)
	g.mustLoad(rtKo, fmt.Sprintf("%s=%d", runtime.BufferKBParam, runtime.BufferKBMin))
	g.mustLoad(advKo, advParams)
	g.loop(5000, 1)
	s = g.status()
	if s.BufferKB != runtime.BufferKBMin || s.TotalLost() == 0 || s.Unread == 0 {
		t.Errorf("status after flooding a %d KiB buffer: buffer_kb=%d lost=%v unread=%d, want records both lost and kept",
			runtime.BufferKBMin, s.BufferKB, s.Lost, s.Unread)
	}
	if s.Aspects[0].ID != 1 {
		t.Errorf("first aspect of a new runtime has id %d, want 1", s.Aspects[0].ID)
	}
	// A read too small for one record fails; one of 100 bytes gets one.
	res, err := g.c.Run(ctx, []string{"dd", "if=" + runtime.RecordsPath, "bs=16", "count=1"}, nil)
	if err != nil || res.ExitCode == 0 || len(res.Stdout) != 0 || !strings.Contains(string(res.Stderr), "Invalid argument") {
		t.Errorf("a 16-byte read of records: %v %+v, want EINVAL", err, res)
	}
	res, err = g.c.Run(ctx, []string{"dd", "if=" + runtime.RecordsPath, "bs=100", "count=1"}, nil)
	if rs, derr := records.Decode(res.Stdout); err != nil || res.ExitCode != 0 || derr != nil || len(rs) != 1 {
		t.Errorf("a 100-byte read of records: %v, exit %d, %d bytes: %d records, %v; want one whole record", err, res.ExitCode, len(res.Stdout), len(rs), derr)
	}
	if recs := g.drain(); uint64(len(recs))+1 < s.Unread {
		t.Errorf("read %d records after one, status said %d unread", len(recs), s.Unread)
	}
	t.Logf("flooded %d KiB buffer: lost %v, kept %d", s.BufferKB, s.Lost, s.Unread)

	// Unloading leaves no kprobe of ours and no klasy module.
	g.unload(adviceModule)
	g.unload(runtime.ModuleName)
	if ms := g.klasyModules(); len(ms) != 0 {
		t.Errorf("klasy modules after unloading: %v", ms)
	}
	if got := g.read(kprobesList); got != listBefore {
		t.Errorf("kprobes after unloading:\n%s\nbefore:\n%s", got, listBefore)
	}
	if _, err := g.c.ReadFile(ctx, runtime.StatusPath); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("reading %s after unloading the runtime: %v, want it gone", runtime.StatusPath, err)
	}
	if dmesg := g.run("dmesg"); strings.Contains(dmesg, "WARNING:") || strings.Contains(dmesg, "BUG:") || strings.Contains(dmesg, "Call Trace") {
		t.Errorf("the kernel complained:\n%s", dmesg)
	}
	t.Logf("done after %.1fs", time.Since(start).Seconds())
}
