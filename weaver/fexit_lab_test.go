package weaver_test

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/klasy/klasy/weaver"
	"github.com/klasy/klasy/weaver/joinpoint"
	"github.com/klasy/klasy/weaver/records"
	"github.com/klasy/klasy/weaver/target"
)

// fexitSrc is after advice on do_renameat2 (int, five arguments in
// registers): its return value and its first argument, taken at entry.
const fexitSrc = `<aspect>
  <advice>
    <pointcut>execution(do_renameat2) AND argument(olddfd, o)</pointcut>
    <after><![CDATA[STORE_DATA3($retval$, $retval$ < 0, *(int *)o);]]></after>
  </advice>
</aspect>
`

// sleepSrc hooks the entry and the return of hrtimer_nanosleep, where
// the tasks of klasy_prog sleep: the combination that once crashed an
// unweave (the session note of issue 22).
const sleepSrc = `<aspect>
  <advice>
    <pointcut>execution(hrtimer_nanosleep)</pointcut>
    <before>COUNT(1);</before>
  </advice>
  <advice>
    <pointcut>execution(hrtimer_nanosleep)</pointcut>
    <after>COUNT($retval$);</after>
  </advice>
</aspect>
`

func fexitSteps(g *guest, step func(string, func(*guest))) {
	step("fexit/after advice on the direct trampoline: retval and arguments", func(g *guest) {
		rep, err := g.weaveSrc("renames", fexitSrc)
		if err != nil {
			g.t.Fatal(err)
		}
		if rep.Woven() != 1 || rep.JoinPoints[0].Mechanism != records.MechFexit {
			g.t.Fatalf("do_renameat2's return hooked by %q (%d woven), want %q; weave -v says: %s",
				rep.JoinPoints[0].Mechanism, rep.Woven(), records.MechFexit, rep.AfterKretprobesWhy())
		}
		if a := g.statusOf("renames"); a.Fexit != 1 || a.FexitErr != 0 {
			g.t.Errorf("status: fexit=%d fexit_err=%d, want 1, 0", a.Fexit, a.FexitErr)
		}
		// No kretprobe: ftrace calls the trampoline from the site.
		if k := g.run("cat", target.KprobesList); k != g.kprobes {
			g.t.Errorf("kprobes with the after hook woven:\n%s\nbefore:\n%s", k, g.kprobes)
		}
		if ef := g.run("cat", enabledFunctions); !strings.Contains(ef, "direct-->klasy_direct_tramp") {
			g.t.Errorf("enabled_functions has no direct call to klasy_direct_tramp:\n%s", ef)
		}
		// Renaming a directory into itself: -EINVAL from an int function.
		out := g.run("sh", "-c", "mkdir -p /tmp/fx && for i in 1 2 3; do mv /tmp/fx /tmp/fx/in 2>&1; done; rmdir /tmp/fx")
		rs, _, err := g.sess.Drain(g.ctx)
		if err != nil {
			g.t.Fatal(err)
		}
		var got [][]int64
		for _, r := range rs {
			got = append(got, r.Ints())
		}
		want := [][]int64{{-22, 1, -100}, {-22, 1, -100}, {-22, 1, -100}}
		if !slices.EqualFunc(got, want, slices.Equal) {
			g.t.Errorf("do_renameat2's ($retval$, $retval$ < 0, olddfd): %v, want %v (-EINVAL, AT_FDCWD); mv said %q", got, want, out)
		}
		g.unweave("renames")
	})

	step("fexit/unweave while tasks sleep inside the hooked function", func(g *guest) {
		// Four tasks in nanosleep(2) all the time, one 300 ms at a time:
		// each unweave finds tasks inside hrtimer_nanosleep, called from
		// the trampoline, and must wait for them to return.
		pids := strings.Fields(g.run("sh", "-c", fmt.Sprintf("for ms in 7 7 7 300; do %s sleep $ms 100000 >/dev/null 2>&1 </dev/null & echo $!; done", prog)))
		defer g.run("sh", "-c", "kill "+strings.Join(pids, " ")+" 2>/dev/null; true")
		sleepers := func() int {
			alive := g.run("sh", "-c", "for p in "+strings.Join(pids, " ")+"; do kill -0 $p 2>/dev/null && echo $p; done; true")
			return len(strings.Fields(alive))
		}
		if n := sleepers(); n != 4 {
			g.t.Fatalf("%d sleepers started (%q), want 4", n, pids)
		}
		const rounds = 12
		var unweave time.Duration
		for i := 0; i < rounds; i++ {
			rep, err := g.weaveSrc("sleeps", sleepSrc)
			if err != nil {
				g.t.Fatal(err)
			}
			for _, jp := range rep.JoinPoints {
				want := records.MechFtraceOps // beside the trampoline, no kprobe
				if jp.Kind == joinpoint.Kretprobe {
					want = records.MechFexit
				}
				if jp.Mechanism != want {
					g.t.Fatalf("round %d: %s of hrtimer_nanosleep hooked by %q, want %q", i, jp.Timing, jp.Mechanism, want)
				}
			}
			time.Sleep(30 * time.Millisecond)
			for _, h := range g.hooksOf("sleeps") {
				if h.Kind == records.KindKretprobe && h.Hits == 0 {
					g.t.Errorf("round %d: the after advice did not run (status %+v)", i, h)
				}
			}
			start := time.Now()
			g.unweave("sleeps")
			unweave += time.Since(start)
		}
		if n := sleepers(); n != 4 {
			g.t.Errorf("%d sleepers alive after %d unweaves, want 4", n, rounds)
		}
		if d := g.run("dmesg"); len(splats(d)) > 0 {
			g.t.Errorf("the kernel reported after %d unweaves under sleepers:\n%s", rounds, strings.Join(splats(d), "\n"))
		}
		g.t.Logf("%d weave/unweave rounds with 4 tasks asleep in hrtimer_nanosleep: unweave %v on average", rounds, unweave/rounds)
	})

	step("fexit/no return missed with more sleepers than a kretprobe's instances", func(g *guest) {
		// The timer test's case (timer_lab_test.go) on the trampoline:
		// no instance to run out of, so every sleep is timed.
		const k, n = 16, 3
		g.weave("agg")
		_, out := g.prog("sleepers", fmt.Sprint(k), "2000", fmt.Sprint(n), "20")
		if c := strings.Count(out, "child "); c != k {
			g.t.Fatalf("klasy_prog sleepers printed %q, want %d children", out, k)
		}
		for _, h := range g.hooksOf("agg") {
			if h.Function == "hrtimer_nanosleep" && h.Kind == records.KindKretprobe && (h.Mech != records.MechFexit || h.Missed != 0) {
				g.t.Errorf("the return of hrtimer_nanosleep: %s, %d missed; want fexit, none", h.Mech, h.Missed)
			}
		}
		st, err := g.sess.Stats(g.ctx)
		if err != nil {
			g.t.Fatal(err)
		}
		m := aggMap(st, records.KindTimer, "sleep")
		if m == nil || m.Timer == nil {
			g.t.Fatalf("no timer sleep in %+v", st)
		}
		if tm := m.Timer; tm.Nested != 0 || tm.Orphaned != 0 || tm.Count != k*n+k {
			g.t.Errorf("timer sleep after %d sleepers, then %d sleeps of each: %+v; want %d timed, none nested or orphaned", k, n, *tm, k*n+k)
		}
		g.unweave("agg")
	})

	step("fexit/rollback takes the direct ops out", func(g *guest) {
		// exc_int3 is noinstr: the kernel refuses its kprobe after the
		// after hook went on the direct ops, and the weave rolls back;
		// checkClean then finds enabled_functions as before.
		g.t.Setenv(weaver.NoPrecheckEnv, "1")
		src := strings.Replace(fexitSrc, "</aspect>", `  <advice>
    <pointcut>execution(exc_int3)</pointcut>
    <before>STORE_DATA(1);</before>
  </advice>
</aspect>`, 1)
		_, err := weaver.Weave(g.ctx, g.sess, mustAspect("rollback.klasy", []byte(src)))
		if err == nil || !strings.Contains(err.Error(), "exc_int3") || !strings.Contains(err.Error(), "nothing was woven") {
			g.t.Fatalf("weave: %v, want the kernel's refusal of exc_int3", err)
		}
		if a := g.aspects(); a != nil {
			g.t.Errorf("aspects after a refused weave: %q", a)
		}
	})
}

// kretprobesOnly loads the runtime with an aspect of its own and sets its
// fexit parameter to 0: after hooks woven next are kretprobes, as on a
// kernel without direct calls. Call the func it returns to unweave it.
func (g *guest) kretprobesOnly() func() {
	g.t.Helper()
	if _, err := g.weaveSrc("kretprobes_only", "<aspect><advice><pointcut>execution(vfs_mkdir)</pointcut><before>;</before></advice></aspect>\n"); err != nil {
		g.t.Fatal(err)
	}
	g.run("sh", "-c", "echo 0 > /sys/module/klasy_runtime/parameters/fexit")
	return func() { g.unweave("kretprobes_only") }
}
