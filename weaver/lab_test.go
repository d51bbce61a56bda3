package weaver_test

// The weaver against a real kernel: Debian's 6.1 in a lab, woven through
// the agent with the same calls klasy weave/trace/status/unweave make.
// A static program run in the guest makes system calls with known values,
// and the records must show exactly those.

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/klasy/klasy/aspect"
	"github.com/klasy/klasy/kbuild"
	"github.com/klasy/klasy/kmod"
	"github.com/klasy/klasy/lab"
	"github.com/klasy/klasy/lab/labboot"
	"github.com/klasy/klasy/weaver"
	"github.com/klasy/klasy/weaver/records"
	"github.com/klasy/klasy/weaver/resolve"
	"github.com/klasy/klasy/weaver/runtime"
	"github.com/klasy/klasy/weaver/target"
)

func TestMain(m *testing.M) {
	code := m.Run()
	labboot.Cleanup()
	os.Exit(code)
}

const prog = "/tmp/klasy_prog"

// guest is the lab under test with the weaver's session on it.
type guest struct {
	t    *testing.T
	l    *lab.Lab
	ctx  context.Context
	sess *weaver.Session
	// before are the kernel's modules, kprobes and ftrace users before
	// any weave: every test leaves them so.
	modules, kprobes, ftrace string
}

func (g *guest) run(argv ...string) string {
	g.t.Helper()
	res, err := g.l.Client().Run(g.ctx, argv, nil)
	if err != nil || res.ExitCode != 0 {
		g.t.Fatalf("guest: %q: %v, exit %d: %s%s", argv, err, res.ExitCode, res.Stdout, res.Stderr)
	}
	return string(res.Stdout)
}

// prog runs klasy_prog and returns its pid and output.
func (g *guest) prog(args ...string) (int, string) {
	g.t.Helper()
	out := g.run(append([]string{prog}, args...)...)
	first, rest, _ := strings.Cut(out, "\n")
	pid, err := strconv.Atoi(strings.TrimPrefix(first, "pid "))
	if err != nil {
		g.t.Fatalf("klasy_prog printed %q first, want its pid", first)
	}
	return pid, rest
}

func (g *guest) kernelState() (modules, kprobes, ftrace string) {
	g.t.Helper()
	ms, err := g.l.Client().Modules(g.ctx)
	if err != nil {
		g.t.Fatal(err)
	}
	var names []string
	for _, m := range ms {
		names = append(names, m.Name)
	}
	slices.Sort(names)
	// A kernel without ftrace (the built one) has no enabled_functions.
	ftrace = g.run("sh", "-c", "cat "+enabledFunctions+" 2>/dev/null || true")
	return strings.Join(names, " "), g.run("cat", target.KprobesList), ftrace
}

// enabledFunctions lists the functions ftrace calls out from, with how
// many ftrace_ops each.
const enabledFunctions = "/sys/kernel/debug/tracing/enabled_functions"

// checkClean fails if modules or kprobes differ from before any weave.
func (g *guest) checkClean() {
	g.t.Helper()
	m, k, f := g.kernelState()
	if f != g.ftrace {
		g.t.Errorf("ftrace's enabled functions now:\n%s\nbefore the weaves:\n%s", f, g.ftrace)
	}
	if m != g.modules {
		g.t.Errorf("modules now %q, before the weaves %q", m, g.modules)
	}
	if k != g.kprobes {
		g.t.Errorf("kprobes now:\n%s\nbefore the weaves:\n%s", k, g.kprobes)
	}
}

func (g *guest) weave(name string) *weaver.Report {
	g.t.Helper()
	path := filepath.Join("testdata", name+".klasy")
	src, err := os.ReadFile(path)
	if err != nil {
		g.t.Fatal(err)
	}
	rep, err := weaver.Weave(g.ctx, g.sess, mustAspect(path, src))
	if err != nil {
		g.t.Fatalf("weaving %s: %v", path, err)
	}
	return rep
}

func (g *guest) unweave(names ...string) *weaver.UnweaveReport {
	g.t.Helper()
	rep, err := weaver.Unweave(g.ctx, g.sess, names, false)
	if err != nil {
		g.t.Fatalf("unweaving %q: %v", names, err)
	}
	return rep
}

// recordsOf drains the records and keeps those of pid.
func (g *guest) recordsOf(pid int) []records.TraceRecord {
	g.t.Helper()
	rs, _, err := g.sess.Drain(g.ctx)
	if err != nil {
		g.t.Fatal(err)
	}
	return slices.DeleteFunc(rs, func(r records.TraceRecord) bool { return r.PID != pid })
}

func (g *guest) aspects() []string {
	g.t.Helper()
	st, err := g.sess.Status(g.ctx)
	if err != nil {
		g.t.Fatal(err)
	}
	if st == nil {
		return nil
	}
	var names []string
	for _, a := range st.Aspects {
		names = append(names, a.Name)
	}
	return names
}

func TestWeaveInLab(t *testing.T) {
	l := labboot.Boot(t, lab.Config{Name: labboot.Name("weave"), Kernel: lab.Debian})
	labboot.Install(t, l, prog, labboot.StaticProgram(t, "testdata/prog/klasy_prog.c"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	sess, err := weaver.OpenSession(ctx, weaver.SessionOptions{TargetOptions: target.TargetOptions{Lab: l.Name()}})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	g := &guest{t: t, l: l, ctx: ctx, sess: sess}
	g.modules, g.kprobes, g.ftrace = g.kernelState()
	if !sess.SlideKnown {
		t.Errorf("KASLR slide not found from the kprobe blacklist")
	}

	step := func(name string, f func(g *guest)) {
		t.Run(name, func(t *testing.T) {
			sub := *g
			sub.t = t
			f(&sub)
			sub.checkClean()
		})
	}

	step("argument/every inlined copy", func(g *guest) {
		rep := g.weave("pread")
		var where []string
		for _, jp := range rep.JoinPoints {
			where = append(where, jp.Function+" in "+jp.InlinedIn)
			if jp.Skipped != "" {
				g.t.Errorf("%s skipped: %s", jp.Where(), jp.Skipped)
			}
		}
		for _, want := range []string{"ksys_pread64 in ", "ksys_pread64 in __x64_sys_pread64", "ksys_pread64 in __ia32_sys_pread64"} {
			if !slices.Contains(where, want) {
				g.t.Errorf("join points %q lack %q", where, want)
			}
		}
		pid, _ := g.prog("pread", "/proc/self/stat", "7", "12345", "5")
		rs := g.recordsOf(pid)
		if len(rs) != 5 {
			g.t.Fatalf("%d records of pid %d, want 5 (one per pread): %+v", len(rs), pid, rs)
		}
		for _, r := range rs {
			if r.InlinedIn != "__x64_sys_pread64" || r.Function != "ksys_pread64" {
				g.t.Errorf("record from %s in %q, want the copy in __x64_sys_pread64 the program's syscall went through", r.Function, r.InlinedIn)
			}
			if !slices.Equal(r.Ints(), []int64{7, 12345}) {
				g.t.Errorf("values %v, want [7 12345] (count, pos the program passed)", r.Values)
			}
		}
		g.unweave("pread")
	})

	step("line/every inlined copy, within_function, after", func(g *guest) {
		rep := g.weave("line")
		copies := map[int][]string{}
		for _, jp := range rep.JoinPoints {
			copies[jp.Advice] = append(copies[jp.Advice], jp.Function+" in "+jp.InlinedIn)
			if jp.Skipped != "" {
				g.t.Errorf("%s skipped: %s", jp.Where(), jp.Skipped)
			}
		}
		if len(copies[1]) != 3 || len(copies[2]) != 1 || len(copies[3]) != 1 {
			g.t.Errorf("join points per advice %v: want ksys_pread64's line in its body and 2 inlined copies, IS_ERR's line once in do_mkdirat, the vfs_mkdir line once", copies)
		}
		pid, _ := g.prog("pread", "/proc/self/stat", "7", "12345", "5")
		const dir = "/tmp/klasy-line-dir"
		mpid, out := g.prog("mkdir", dir, "3")
		g.run("rmdir", dir)
		if strings.TrimSpace(out) != "made 1" {
			g.t.Fatalf("klasy_prog mkdir %s 3 printed %q, want one made", dir, out)
		}
		rs, _, err := g.sess.Drain(g.ctx)
		if err != nil {
			g.t.Fatal(err)
		}
		byAdvice := map[int][]records.TraceRecord{}
		for _, r := range rs {
			if r.PID == pid || r.PID == mpid {
				byAdvice[r.Advice] = append(byAdvice[r.Advice], r)
			}
		}
		// ksys_pread64's line 664 (ret = -ESPIPE) on each pread, in the
		// copy the syscall went through, with that copy's count and ret
		// as DWARF gives it there: GCC's location list binds the line's
		// constant to its first instruction (the mov that sets it), so
		// -ESPIPE, not the -EBADF of before.
		if len(byAdvice[1]) != 5 {
			g.t.Errorf("%d records of line 664 from pid %d, want 5 (one per pread): %+v", len(byAdvice[1]), pid, byAdvice[1])
		}
		for _, r := range byAdvice[1] {
			if r.PID != pid || r.Function != "ksys_pread64" || r.InlinedIn != "__x64_sys_pread64" || r.Line != 664 {
				g.t.Errorf("line 664 record from pid %d, %s in %q at line %d; want pid %d, the copy in __x64_sys_pread64", r.PID, r.Function, r.InlinedIn, r.Line, pid)
			}
			if !slices.Equal(r.Ints(), []int64{7, -29}) {
				g.t.Errorf("line 664 values %v, want [7 -29] (the count passed, ret = -ESPIPE)", r.Values)
			}
		}
		// IS_ERR's line in do_mkdirat runs on each of the 3 mkdirs; the
		// line after vfs_mkdir only for the one that made the directory.
		for _, w := range []struct {
			advice int
			n      int
			what   string
		}{{2, 3, "IS_ERR in do_mkdirat"}, {3, 1, "after fs/namei.c:4186 (vfs_mkdir)"}} {
			if got := byAdvice[w.advice]; len(got) != w.n || (w.n > 0 && (got[0].PID != mpid || got[0].Function != "do_mkdirat")) {
				g.t.Errorf("%s: records %+v, want %d from pid %d in do_mkdirat", w.what, got, w.n, mpid)
			}
		}
		g.unweave("line")
	})

	step("static function by within_file", func(g *guest) {
		src, _ := os.ReadFile("testdata/mshow.klasy")
		_, all, err := weaver.Plan(g.sess, mustAspect("mshow.klasy", []byte(strings.Replace(string(src), " AND within_file(fs/namespace.c)", "", 1))))
		if err != nil {
			g.t.Fatal(err)
		}
		var files []string
		for _, jp := range all.JoinPoints {
			files = append(files, jp.File)
		}
		if len(files) != 2 {
			g.t.Fatalf("execution(m_show) selects %q, want the two static m_show", files)
		}
		rep := g.weave("mshow")
		if len(rep.JoinPoints) != 1 || rep.JoinPoints[0].File != "fs/namespace.c" {
			g.t.Fatalf("within_file(fs/namespace.c) selects %+v", rep.JoinPoints)
		}
		pid, mounts := g.prog("cat", "/proc/self/mounts")
		rs := g.recordsOf(pid)
		if n := strings.Count(mounts, "\n"); len(rs) != n {
			g.t.Errorf("%d records for %d lines of /proc/self/mounts", len(rs), n)
		}
		pid, _ = g.prog("cat", "/proc/modules")
		if rs := g.recordsOf(pid); len(rs) != 0 {
			g.t.Errorf("reading /proc/modules (the other m_show) gave %d records", len(rs))
		}
		g.unweave("mshow")
	})

	step("a hook on the reader's own reads", func(g *guest) {
		// Draining streams the records file with read(2) through the
		// agent: every read adds records, and a drain that read until
		// the buffer is empty would never end. The runtime loads with
		// the buffer the session asks for. The agent's own reads are
		// left out unless IncludeSelf.
		g.sess.BufferKB = 2048
		g.sess.Tasks.IncludeSelf = true
		defer func() { g.sess.BufferKB, g.sess.Tasks.IncludeSelf = 0, false }()
		g.weave("readself")
		if st, err := g.sess.Status(g.ctx); err != nil || st.BufferKB != 2048 {
			g.t.Errorf("runtime loaded with BufferKB 2048 has status %+v (%v)", st, err)
		}
		g.sess.BufferKB = 4096
		src, _ := os.ReadFile("testdata/openat.klasy")
		if _, err := weaver.Weave(g.ctx, g.sess, mustAspect("openat.klasy", src)); err == nil || !strings.Contains(err.Error(), "trace buffer of 2048 KiB per CPU, not 4096") {
			g.t.Errorf("a weave asking 4096 KiB of a runtime loaded with 2048: %v, want a refusal", err)
		}
		g.sess.BufferKB = 0
		pid, _ := g.prog("cat", "/proc/self/stat")
		ctx, cancel := context.WithTimeout(g.ctx, time.Minute)
		defer cancel()
		rs, _, err := g.sess.Drain(ctx)
		if err != nil {
			g.t.Fatalf("draining while every read(2) is hooked: %v", err)
		}
		if !slices.ContainsFunc(rs, func(r records.TraceRecord) bool { return r.PID == pid }) {
			g.t.Errorf("no record of cat's reads (pid %d) among %d", pid, len(rs))
		}
		g.unweave("readself")
	})

	step("after with retval", func(g *guest) {
		g.weave("openat")
		pid, _ := g.prog("open-missing", "/no/such/file", "3")
		rs := g.recordsOf(pid)
		if len(rs) != 3 {
			g.t.Fatalf("%d records, want 3 (one per openat)", len(rs))
		}
		for _, r := range rs {
			if !slices.Equal(r.Ints(), []int64{-100, -2}) {
				g.t.Errorf("values %v, want [-100 -2] (AT_FDCWD, -ENOENT)", r.Values)
			}
		}
		g.unweave("openat")
	})

	step("kprobes disarmed in the whole kernel", func(g *guest) {
		// A kprobe on each mkdir: IS_ERR's line in do_mkdirat (an after
		// hook at an ftrace site is no kprobe now, but fexit).
		if _, err := g.weaveSrc("mkdir_ret", "<aspect><advice><pointcut>line(include/linux/err.h:36) AND within_function(do_mkdirat)</pointcut><before>STORE_DATA($pc$);</before></advice></aspect>\n"); err != nil {
			g.t.Fatal(err)
		}
		status := func() *records.Status {
			st, err := g.sess.StatusShown(g.ctx)
			if err != nil || st == nil {
				g.t.Fatalf("status: %v, %v", st, err)
			}
			return st
		}
		if status().Disarmed {
			g.t.Fatal("status says kprobes are disarmed before they were")
		}
		g.run("sh", "-c", "echo 0 > /sys/kernel/debug/kprobes/enabled")
		defer g.run("sh", "-c", "echo 1 > /sys/kernel/debug/kprobes/enabled")
		pid, _ := g.prog("mkdir", "/tmp/disarmed", "2")
		if rs := g.recordsOf(pid); len(rs) != 0 || !status().Disarmed {
			g.t.Errorf("kprobes disarmed: %d records, status disarmed %v; want none and true", len(rs), status().Disarmed)
		}
		g.run("sh", "-c", "echo 1 > /sys/kernel/debug/kprobes/enabled")
		pid, _ = g.prog("mkdir", "/tmp/disarmed", "2")
		if rs := g.recordsOf(pid); len(rs) != 2 || status().Disarmed {
			g.t.Errorf("kprobes armed again: %d records, status disarmed %v; want 2 and false", len(rs), status().Disarmed)
		}
		g.unweave("mkdir_ret")
	})

	step("after with an int's retval", func(g *guest) {
		g.weave("mkdir_ret")
		pid, _ := g.prog("mkdir", "/tmp/retdir", "3")
		var got [][]int64
		for _, r := range g.recordsOf(pid) {
			got = append(got, r.Ints())
		}
		// The first mkdir makes it, the others fail with -EEXIST, which
		// an int $retval$ holds as a negative number (unsigned long read
		// 4294967279).
		want := [][]int64{{0, 0}, {-17, 1}, {-17, 1}}
		if !slices.EqualFunc(got, want, slices.Equal) {
			g.t.Errorf("do_mkdirat's ($retval$, $retval$ < 0): %v, want %v", got, want)
		}
		g.unweave("mkdir_ret")
	})

	step("two aspects, unwoven one at a time", func(g *guest) {
		g.weave("pread")
		g.weave("openat")
		if a := g.aspects(); !slices.Equal(a, []string{"pread", "openat"}) {
			g.t.Fatalf("woven aspects %q", a)
		}
		pid, _ := g.prog("pread", "/proc/self/stat", "3", "4", "1")
		rep := g.unweave("pread")
		if rep.RuntimeRemoved || rep.Saved < 1 {
			g.t.Errorf("unweave pread: %+v, want the pread record saved and the runtime kept", rep)
		}
		if a := g.aspects(); !slices.Equal(a, []string{"openat"}) {
			g.t.Fatalf("after unweaving pread: %q", a)
		}
		if k := g.run("cat", target.KprobesList); strings.Contains(k, "pread") {
			g.t.Errorf("kprobes after unweaving pread:\n%s", k)
		}
		// openat's after hook stays, on the direct trampoline.
		if ef := g.run("cat", enabledFunctions); !strings.Contains(ef, "do_sys_openat2") || strings.Contains(ef, "pread") {
			g.t.Errorf("ftrace's enabled functions after unweaving pread:\n%s", ef)
		}
		saved, done, err := g.sess.TakeSaved()
		if err != nil {
			g.t.Fatal(err)
		}
		if !slices.ContainsFunc(saved, func(r records.TraceRecord) bool { return r.PID == pid && r.Aspect == "pread" }) {
			g.t.Errorf("the unread pread record was not saved: %+v", saved)
		}
		done()
		if rep := g.unweave("openat.klasy"); !rep.RuntimeRemoved {
			g.t.Errorf("unweaving the last aspect left the runtime: %+v", rep)
		}
	})

	step("advice that does not compile", func(g *guest) {
		src := "<aspect>\n  <advice>\n    <pointcut>execution(ksys_pread64)</pointcut>\n    <before>\n      STORE_DATA(no_such_variable);\n    </before>\n  </advice>\n</aspect>\n"
		_, err := weaver.Weave(g.ctx, g.sess, mustAspect("broken.klasy", []byte(src)))
		var de *resolve.DiagnosticsError
		if !errors.As(err, &de) || len(de.Diags) == 0 {
			g.t.Fatalf("weave: %v, want diagnostics", err)
		}
		if d := de.Diags[0]; d.Pos.Filename != "broken.klasy" || d.Pos.Line != 5 || d.Pos.Col != 18 || !strings.Contains(d.Msg, "no_such_variable") {
			g.t.Errorf("diagnostic %s, want broken.klasy:5:18 naming no_such_variable", d)
		}
	})

	step("refused in the middle of a batch", func(g *guest) {
		g.t.Setenv(weaver.NoPrecheckEnv, "1")
		src := "<aspect>\n  <advice>\n    <pointcut>execution(ksys_pread64) OR execution(exc_int3)</pointcut>\n    <before>STORE_DATA(1);</before>\n  </advice>\n</aspect>\n"
		rep, err := weaver.Weave(g.ctx, g.sess, mustAspect("refused.klasy", []byte(src)))
		// exc_int3 is noinstr: no ftrace site and no kprobe, so the
		// aspect's ftrace_ops (ksys_pread64's entry) goes too.
		if err == nil || !strings.Contains(err.Error(), "exc_int3") || !strings.Contains(err.Error(), "nothing was woven") {
			g.t.Fatalf("weave: %v, want the kernel's refusal of exc_int3", err)
		}
		if rep == nil || rep.Woven() < 2 {
			g.t.Errorf("the batch should have held several hooks, got %+v", rep)
		}
		if a := g.aspects(); a != nil {
			g.t.Errorf("aspects after a refused weave: %q", a)
		}
	})

	step("killed weave cleaned by unweave --all", func(g *guest) {
		// What a klasy killed between loading the runtime and the advice
		// module leaves: the runtime alone.
		ko := buildRuntime(g.t, g.l.Kernel().BuildDir)
		if _, err := kmod.Load(g.ctx, g.l.Client(), ko, ""); err != nil {
			g.t.Fatal(err)
		}
		st, err := g.sess.Status(g.ctx)
		if err != nil || st == nil || len(st.Aspects) != 0 {
			g.t.Fatalf("status shows %+v, %v; want the runtime with no aspect", st, err)
		}
		rep, err := weaver.Unweave(g.ctx, g.sess, nil, true)
		if err != nil || !rep.RuntimeRemoved {
			g.t.Fatalf("unweave --all: %+v, %v", rep, err)
		}
	})

	replaceSteps(g, step)
	timerSteps(g, step)
	inlinedTimerSteps(g, step)
	percallSteps(g, step)
	smapSteps(g, step)
	step("access/writes only, inferred", writesOnly)
	ftraceOpsSteps(g, step)
	fexitSteps(g, step)

	t.Run("image that is not the running kernel", func(t *testing.T) {
		fixture := filepath.Join(t.TempDir(), "a.out")
		if out, err := exec.Command("gcc", "-g", "-Wl,--build-id", "-o", fixture, "testdata/prog/klasy_prog.c").CombinedOutput(); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		_, err := weaver.OpenSession(ctx, weaver.SessionOptions{TargetOptions: target.TargetOptions{Lab: l.Name(), Vmlinux: fixture}})
		if !errors.Is(err, weaver.ErrImageMismatch) {
			t.Fatalf("OpenSession with another image: %v, want ErrImageMismatch", err)
		}
	})

	// Last: it leaves the lab without an agent.
	t.Run("lab whose agent is down", func(t *testing.T) {
		stopCtx, stop := context.WithTimeout(ctx, 5*time.Second)
		l.Client().Run(stopCtx, []string{"sh", "-c", "kill -STOP $PPID"}, nil)
		stop()
		start := time.Now()
		s, err := weaver.OpenSession(ctx, weaver.SessionOptions{TargetOptions: target.TargetOptions{Lab: l.Name()}})
		if err == nil {
			s.Close()
			t.Fatal("OpenSession on a lab whose agent is stopped succeeded")
		}
		if d := time.Since(start); d > time.Minute {
			t.Errorf("took %v to find the agent down", d)
		}
		t.Logf("%v", err)
	})
}

// buildRuntime builds the runtime module for the lab's kernel.
func buildRuntime(t *testing.T, headers string) []byte {
	t.Helper()
	res, err := kbuild.Build(context.Background(), headers, runtime.Sources, kbuild.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range res.Modules {
		if m.Name == runtime.ModuleName {
			return m.Image
		}
	}
	t.Fatalf("kbuild made no %s", runtime.ModuleName)
	return nil
}

// mustAspect loads a test's aspect, which is valid: its diagnostics
// would be a mistake in the test.
func mustAspect(path string, src []byte) *aspect.File {
	f, err := weaver.LoadAspect(path, src)
	if err != nil {
		panic(err)
	}
	return f
}
