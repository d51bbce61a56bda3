package weaver_test

// <replace> advice in the lab (issue 13): a function the test program
// calls replaced, its arguments read and its value what the program
// gets; a nullify; the function restored by unweave; and the refusals:
// a second replacement, a replacement behind another aspect's hook, a
// hook the kernel does not put on ftrace, a function a livepatch holds.

import (
	"errors"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/klasy/klasy/aspect"
	"github.com/klasy/klasy/kbuild"
	"github.com/klasy/klasy/kmod"
	"github.com/klasy/klasy/weaver"
	"github.com/klasy/klasy/weaver/gen"
	"github.com/klasy/klasy/weaver/joinpoint"
	"github.com/klasy/klasy/weaver/records"
	"github.com/klasy/klasy/weaver/resolve"
)

// lseekRet runs klasy_prog lseek-ret and returns its pid, the values
// lseek returned and the file's descriptor.
func (g *guest) lseekRet(off, whence, n int) (pid int, rets []string, fd int64) {
	g.t.Helper()
	pid, out := g.prog("lseek-ret", "/proc/self/stat", strconv.Itoa(off), strconv.Itoa(whence), strconv.Itoa(n))
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		switch {
		case strings.HasPrefix(l, "ret "):
			rets = append(rets, strings.TrimPrefix(l, "ret "))
		case strings.HasPrefix(l, "fd "):
			fd, _ = strconv.ParseInt(strings.TrimPrefix(l, "fd "), 10, 64)
		}
	}
	if len(rets) != n {
		g.t.Fatalf("klasy_prog lseek-ret printed %q, want %d values", out, n)
	}
	return pid, rets, fd
}

// allAre fails unless every value is want.
func (g *guest) allAre(what string, got []string, want string) {
	g.t.Helper()
	for _, v := range got {
		if v != want {
			g.t.Errorf("%s: lseek returned %q, want %q (all: %q)", what, v, want, got)
			return
		}
	}
}

func (g *guest) weaveSrc(name, src string) (*weaver.Report, error) {
	return weaver.Weave(g.ctx, g.sess, mustAspect(name+".klasy", []byte(src)))
}

// hooksOf returns the status of aspect name's hooks.
func (g *guest) hooksOf(name string) []records.Hook {
	g.t.Helper()
	st, err := g.sess.Status(g.ctx)
	if err != nil || st == nil {
		g.t.Fatalf("status: %v, %v", st, err)
	}
	for _, a := range st.Aspects {
		if a.Name == name {
			return a.Hooks
		}
	}
	g.t.Fatalf("aspect %s is not woven", name)
	return nil
}

const lseekTrace = "<aspect><advice><pointcut>execution(ksys_lseek) AND argument(offset, offp)</pointcut>" +
	"<before>STORE_DATA(*(long *)offp);</before></advice></aspect>\n"

func replaceSteps(g *guest, step func(string, func(*guest))) {
	step("replace/the program gets the replacement's value", func(g *guest) {
		rep := g.weave("lseek")
		for _, jp := range rep.JoinPoints {
			want := "ftrace"
			if jp.Timing == joinpoint.After {
				want = "kretprobe"
			}
			if jp.Mechanism != want {
				g.t.Errorf("advice %d %s: hooked by %q, want %q", jp.Advice, jp.Timing, jp.Mechanism, want)
			}
		}
		hs := g.hooksOf("lseek")
		if len(hs) != 2 || hs[0].Kind != records.KindReplace || hs[0].Mech != records.MechFtrace || !slices.Equal(hs[0].Advice, []int{1, 2}) || hs[1].Kind != records.KindKretprobe {
			g.t.Errorf("status hooks %+v, want the replacement on ftrace running advice 1 then 2, then the kretprobe", hs)
		}
		pid, rets, fd := g.lseekRet(1000, 2, 3)
		g.allAre("replaced", rets, "3002") // offset * 3 + whence
		var got [][]int64
		var advice []int
		for _, r := range g.recordsOf(pid) {
			got = append(got, r.Ints())
			advice = append(advice, r.Advice)
		}
		// Per call: the before advice (offset), the replacement (fd,
		// offset, whence), the after advice (the replacement's value).
		if want := []int{1, 2, 3, 1, 2, 3, 1, 2, 3}; !slices.Equal(advice, want) {
			g.t.Fatalf("records of advice %v, want %v", advice, want)
		}
		for i, v := range got {
			want := [][]int64{{1000}, {fd, 1000, 2}, {3002}}[i%3]
			if !slices.Equal(v, want) {
				g.t.Errorf("record %d (advice %d): %v, want %v", i, advice[i], v, want)
			}
		}
		if hs := g.hooksOf("lseek"); hs[0].Hits < 3 {
			g.t.Errorf("the replacement's hook counts %d hits, want at least the program's 3", hs[0].Hits)
		}
		g.unweave("lseek")
		_, rets, _ = g.lseekRet(1000, 0, 2)
		g.allAre("after unweave", rets, "1000") // SEEK_SET: the original again
	})

	step("replace/nullify", func(g *guest) {
		g.weave("nullify")
		_, rets, _ := g.lseekRet(77, 0, 2)
		g.allAre("nullified", rets, "0")
		g.unweave("nullify")
		_, rets, _ = g.lseekRet(77, 0, 1)
		g.allAre("after unweave", rets, "77")
	})

	step("replace/a second replacement is refused", func(g *guest) {
		g.weave("lseek")
		_, err := g.weaveSrc("nullify", mustRead(g, "testdata/nullify.klasy"))
		if err == nil || !strings.Contains(err.Error(), "cannot replace ksys_lseek") || !strings.Contains(err.Error(), "already replaced by aspect lseek") {
			g.t.Errorf("second replacement of ksys_lseek: %v, want it refused as already replaced by aspect lseek", err)
		}
		if a := g.aspects(); !slices.Equal(a, []string{"lseek"}) {
			g.t.Errorf("aspects after the refusal: %q", a)
		}
		_, rets, _ := g.lseekRet(5, 1, 1)
		g.allAre("the first replacement", rets, "16")
		g.unweave("lseek")
	})

	step("replace/behind another aspect's kprobe is refused, in front of it woven", func(g *guest) {
		// The other aspect's entry hook a kprobe on ftrace, as every
		// entry hook was before the runtime had its ftrace_ops: kprobes
		// would run the replacement first and it ends the chain.
		g.sess.KprobesOnly = true
		defer func() { g.sess.KprobesOnly = false }()
		if _, err := g.weaveSrc("lseektrace", lseekTrace); err != nil {
			g.t.Fatal(err)
		}
		_, err := g.weaveSrc("nullify", mustRead(g, "testdata/nullify.klasy"))
		if err == nil || !strings.Contains(err.Error(), "aspect lseektrace has a kprobe hook at its entry") {
			g.t.Errorf("replacing ksys_lseek behind lseektrace's hook: %v, want it refused naming lseektrace", err)
		}
		g.unweave("lseektrace")
		// The other order works: a probe added after a replacement runs
		// before it.
		g.weave("nullify")
		if _, err := g.weaveSrc("lseektrace", lseekTrace); err != nil {
			g.t.Fatal(err)
		}
		pid, rets, _ := g.lseekRet(9, 0, 2)
		g.allAre("nullified", rets, "0")
		if rs := g.recordsOf(pid); len(rs) != 2 || !slices.Equal(rs[0].Ints(), []int64{9}) {
			g.t.Errorf("lseektrace woven after the nullify recorded %+v, want [9] twice", rs)
		}
		// The replacement leaves first: the other probe goes on, on the
		// original function.
		g.unweave("nullify")
		pid, rets, _ = g.lseekRet(11, 0, 1)
		g.allAre("after the nullify left", rets, "11")
		if rs := g.recordsOf(pid); len(rs) != 1 || !slices.Equal(rs[0].Ints(), []int64{11}) {
			g.t.Errorf("lseektrace after the nullify left recorded %+v, want [11]", rs)
		}
		g.unweave("lseektrace")
	})

	step("replace/beside another aspect's entry hook on its ftrace_ops, both run", func(g *guest) {
		// ftrace calls every ftrace_ops at the site, the IPMODIFY one of
		// the replacement's kprobe among them, before the function
		// returns through the stub: the other aspect's advice runs
		// whichever came first.
		if _, err := g.weaveSrc("lseektrace", lseekTrace); err != nil {
			g.t.Fatal(err)
		}
		if hs := g.hooksOf("lseektrace"); len(hs) != 1 || hs[0].Mech != records.MechFtraceOps {
			g.t.Fatalf("lseektrace's hooks %+v, want its entry on the ftrace_ops", hs)
		}
		g.weave("nullify")
		pid, rets, _ := g.lseekRet(9, 0, 2)
		g.allAre("nullified", rets, "0")
		if rs := g.recordsOf(pid); len(rs) != 2 || !slices.Equal(rs[0].Ints(), []int64{9}) {
			g.t.Errorf("lseektrace woven before the nullify recorded %+v, want [9] twice", rs)
		}
		g.unweave("nullify")
		pid, rets, _ = g.lseekRet(11, 0, 1)
		g.allAre("after the nullify left", rets, "11")
		if rs := g.recordsOf(pid); len(rs) != 1 || !slices.Equal(rs[0].Ints(), []int64{11}) {
			g.t.Errorf("lseektrace after the nullify left recorded %+v, want [11]", rs)
		}
		g.unweave("lseektrace")
	})

	step("replace/not on ftrace is refused", func(g *guest) {
		// The resolver refuses a function without an ftrace call site;
		// the runtime checks again what the kernel did, here with the
		// resolver bypassed.
		const fn = "xen_timer_resume" // notrace (arch/x86/xen), never called under QEMU
		src := "<aspect><advice><pointcut>execution(" + fn + ")</pointcut><replace>return;</replace></advice></aspect>\n"
		_, err := g.weaveSrc("noftrace", src)
		var de *resolve.DiagnosticsError
		if !errors.As(err, &de) || !strings.Contains(err.Error(), "has no ftrace call site") {
			g.t.Errorf("replacing %s: %v, want the resolver's refusal", fn, err)
		}
		fs := g.sess.X.Funcs(fn)
		if len(fs) != 1 {
			g.t.Fatalf("%s: %d functions", fn, len(fs))
		}
		f, diags := aspect.Load("noftrace.klasy", []byte(src))
		if len(diags) > 0 {
			g.t.Fatal(diags)
		}
		rep := &weaver.Report{Aspect: "noftrace", Module: gen.ModuleName("noftrace"), Target: g.sess.T.Name(),
			JoinPoints: []*joinpoint.JoinPoint{{Advice: 1, Timing: joinpoint.Replace, Kind: joinpoint.KprobeReplace, Addr: fs[0].Entry, Function: fn, File: fs[0].File, Line: fs[0].Line, Returns: "void"}}}
		err = weaver.WeaveResolved(g.ctx, g.sess, f, rep)
		if err == nil || !strings.Contains(err.Error(), "did not put the kprobe at its entry on ftrace") || !strings.Contains(err.Error(), "nothing was woven") {
			g.t.Errorf("replacing %s with the resolver bypassed: %v, want the runtime's refusal", fn, err)
		}
		if a := g.aspects(); a != nil {
			g.t.Errorf("aspects after the refusal: %q", a)
		}
	})

	step("replace/a livepatched function is refused", func(g *guest) {
		res, err := kbuild.Build(g.ctx, g.l.Kernel().BuildDir, os.DirFS("testdata/livepatch"), kbuild.Options{})
		if err != nil {
			g.t.Fatal(err)
		}
		if _, err := kmod.Load(g.ctx, g.l.Client(), res.Modules[0].Image, ""); err != nil {
			g.t.Fatal(err)
		}
		waitTransition := func() {
			for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
				if strings.TrimSpace(g.run("sh", "-c", "cat /sys/kernel/livepatch/klasy_lp/transition 2>/dev/null || echo 0")) == "0" {
					return
				}
				if time.Now().After(deadline) {
					g.t.Fatalf("the livepatch's transition did not end in a minute")
				}
			}
		}
		waitTransition()
		if got := g.run("cat", "/proc/cmdline"); got != "patched by klasy_lp\n" {
			g.t.Errorf("/proc/cmdline = %q under the livepatch", got)
		}
		src := "<aspect><advice><pointcut>execution(cmdline_proc_show)</pointcut><replace>return 0;</replace></advice></aspect>\n"
		_, err = g.weaveSrc("cmdline", src)
		if err == nil || !strings.Contains(err.Error(), "cannot replace cmdline_proc_show") || !strings.Contains(err.Error(), "a livepatch already replaces it") {
			g.t.Errorf("replacing a livepatched function: %v, want it refused naming the livepatch", err)
		}
		g.t.Logf("%v", err)
		if a := g.aspects(); a != nil {
			g.t.Errorf("aspects after the refusal: %q", a)
		}
		g.run("sh", "-c", "echo 0 > /sys/kernel/livepatch/klasy_lp/enabled")
		waitTransition()
		if err := kmod.Unload(g.ctx, g.l.Client(), "klasy_lp"); err != nil {
			g.t.Fatal(err)
		}
		// Without the livepatch the same replacement is woven: the
		// function writes nothing.
		if _, err := g.weaveSrc("cmdline", src); err != nil {
			g.t.Fatal(err)
		}
		if got := g.run("cat", "/proc/cmdline"); got != "" {
			g.t.Errorf("/proc/cmdline = %q replaced by a return 0, want nothing", got)
		}
		g.unweave("cmdline")
		if got := g.run("cat", "/proc/cmdline"); !strings.Contains(got, "klasy.name=") {
			g.t.Errorf("/proc/cmdline = %q after unweave, want the kernel's command line", got)
		}
	})

	// Issue 20 #10: a kprobe that another tool adds at the function and
	// removes again (perf probe, kprobe_events, BPF) neither stops a
	// later replacement nor one in place: kprobes keeps the aggregate it
	// made, with the replacement its only child.
	step("replace/beside a transient kprobe_events probe", func(g *guest) {
		transient := func(enable bool) {
			g.t.Helper()
			script := `d=/sys/kernel/tracing; [ -e $d/kprobe_events ] || d=/sys/kernel/debug/tracing
echo 'p:klasy_transient ksys_lseek' >> $d/kprobe_events`
			if enable {
				script += `
echo 1 > $d/events/kprobes/klasy_transient/enable
/tmp/klasy_prog lseek-ret /proc/self/stat 5 0 3 >/dev/null
echo 0 > $d/events/kprobes/klasy_transient/enable`
			}
			script += `
echo '-:klasy_transient' >> $d/kprobe_events
! grep -q klasy_transient $d/kprobe_events`
			g.run("sh", "-ec", script)
		}
		transient(true)
		g.weave("nullify")
		_, rets, _ := g.lseekRet(21, 0, 2)
		g.allAre("nullified after a transient probe came and went", rets, "0")
		// Now while the replacement is in place: the probe joins it under
		// an aggregate and leaves it there alone.
		transient(false)
		transient(true)
		_, rets, _ = g.lseekRet(22, 0, 2)
		g.allAre("nullified with a transient probe gone beside it", rets, "0")
		if hs := g.hooksOf("nullify"); len(hs) != 1 || hs[0].Mech != records.MechFtrace || hs[0].Hits < 2 {
			g.t.Errorf("status of the replacement after the transient probes: %+v, want it on ftrace with its hits", hs)
		}
		g.unweave("nullify")
		_, rets, _ = g.lseekRet(23, 0, 1)
		g.allAre("after unweave", rets, "23")
		// The aggregate went with its last kprobe: a new replacement is
		// alone again.
		g.weave("nullify")
		_, rets, _ = g.lseekRet(24, 0, 1)
		g.allAre("woven again", rets, "0")
		g.unweave("nullify")
	})

	step("replace/the kernel warned of nothing", func(g *guest) {
		// Kprobes and ftrace say in the log when their state goes wrong
		// ("Failed to disarm kprobe-ftrace", a WARNING with a trace).
		log, err := g.sess.T.KernelLog(g.ctx)
		if err != nil {
			g.t.Fatal(err)
		}
		for _, line := range strings.Split(string(log), "\n") {
			if strings.Contains(line, "WARNING:") || strings.Contains(line, "BUG:") || strings.Contains(line, "Failed to") {
				g.t.Errorf("kernel log: %s", line)
			}
		}
	})
}

func mustRead(g *guest, path string) string {
	g.t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		g.t.Fatal(err)
	}
	return string(b)
}
