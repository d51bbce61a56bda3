package weaver_test

import (
	"fmt"
	"strings"

	"github.com/klasy/klasy/weaver/records"
)

// timerSteps: issue 20 #1 in the lab. A kretprobe has max(10, 2 x CPUs)
// instances; a task whose return it missed had its TIMER_START without
// a STOP, and every later START of that task counted as nested, never
// timed. With more sleepers in hrtimer_nanosleep than instances, each
// task's later sleeps, one task at a time, must all be timed. (On the
// direct trampoline no return is missed: fexit_lab_test.go.)
func timerSteps(g *guest, step func(string, func(*guest))) {
	step("agg/a task whose kretprobe missed is timed again", func(g *guest) {
		const k, n = 16, 3
		defer g.kretprobesOnly()()
		g.weave("agg")
		_, out := g.prog("sleepers", fmt.Sprint(k), "2000", fmt.Sprint(n), "20")
		if c := strings.Count(out, "child "); c != k {
			g.t.Fatalf("klasy_prog sleepers printed %q, want %d children", out, k)
		}
		var missed uint64
		for _, h := range g.hooksOf("agg") {
			if h.Kind == records.KindKretprobe && h.Function == "hrtimer_nanosleep" {
				missed = h.Missed
			}
		}
		if missed == 0 {
			g.t.Fatalf("no return of hrtimer_nanosleep missed with %d sleepers: the test did not make the case", k)
		}
		st, err := g.sess.Stats(g.ctx)
		if err != nil {
			g.t.Fatal(err)
		}
		m := aggMap(st, records.KindTimer, "sleep")
		if m == nil || m.Timer == nil {
			g.t.Fatalf("no timer sleep in %+v", st)
		}
		tm := m.Timer
		// Each missed sleeper's first START is orphaned by its next one;
		// every other START is stopped and timed.
		if tm.Nested != 0 || tm.Orphaned == 0 || tm.Count != k*n+k-tm.Orphaned {
			g.t.Errorf("timer sleep after %d sleepers (%d returns missed), then %d sleeps of each: %+v; want none nested, some orphaned, count = %d - orphaned",
				k, missed, n, *tm, k*n+k)
		}
		g.t.Logf("%d sleepers, %d returns missed: timer count %d, orphaned %d, nested %d", k, missed, tm.Count, tm.Orphaned, tm.Nested)
		g.unweave("agg")
	})
}

// inlinedTimerSteps: issue 23 #5 in the lab. A timer on a function with
// inlined copies started at each copy's entry and never stopped ("0
// start-stop pairs / 49 nested starts"). After advice of a copy now runs
// at its exits: fdget_pos inlined in ksys_read (its code left by falling
// past its end) counts as many exits as entries, one per read(), and
// times each. Of getname_flags' 10 copies, those left by a return or a
// tail call have their STARTs skipped with the reason; every START of
// the others and of the out-of-line bodies is stopped (on main: the
// weave is refused).
func inlinedTimerSteps(g *guest, step func(string, func(*guest))) {
	step("inline/after at the exits of an inlined copy", func(g *guest) {
		const n = 37
		rep, err := g.weaveSrc("agg", `<aspect>
  <import>linux/sched.h</import>
  <import>linux/string.h</import>
  <advice>
    <pointcut>execution(fdget_pos) AND within_function(ksys_read)</pointcut>
    <before>if (!strcmp(current->comm, "klasy_prog")) { COUNT_AS(in, 0); TIMER_START(fp); }</before>
  </advice>
  <advice>
    <pointcut>execution(fdget_pos) AND within_function(ksys_read)</pointcut>
    <after>if (!strcmp(current->comm, "klasy_prog")) { COUNT_AS(out, 0); TIMER_STOP(fp); }</after>
  </advice>
</aspect>
`)
		if err != nil {
			g.t.Fatal(err)
		}
		exits := 0
		for _, jp := range rep.JoinPoints {
			if jp.Skipped != "" {
				g.t.Errorf("%s skipped: %s", jp.Where(), jp.Skipped)
			}
			if jp.Advice == 2 {
				exits++
			}
		}
		g.prog("read", "/proc/self/stat", fmt.Sprint(n))
		st, err := g.sess.Stats(g.ctx)
		if err != nil {
			g.t.Fatal(err)
		}
		in, out := aggCount(st, "in", 0), aggCount(st, "out", 0)
		tm := aggMap(st, records.KindTimer, "fp")
		if in != n || out != n || tm == nil || tm.Timer == nil || tm.Timer.Count != n || tm.Timer.Nested != 0 || tm.Timer.NoStart != 0 {
			g.t.Errorf("%d read()s through fdget_pos in ksys_read (%d exits hooked): %d entries, %d exits, timer %+v; want %d, %d and %d start-stop pairs", n, exits, in, out, tm, n, n, n)
		}
		g.unweave("agg")
	})
	step("inline/timer on getname_flags", func(g *guest) {
		const n = 23
		rep, err := g.weaveSrc("agg", `<aspect>
  <import>linux/sched.h</import>
  <import>linux/string.h</import>
  <advice>
    <pointcut>execution(getname_flags)</pointcut>
    <before>if (!strcmp(current->comm, "klasy_prog")) { COUNT_AS(starts, 0); TIMER_START(gn); }</before>
  </advice>
  <advice>
    <pointcut>execution(getname_flags)</pointcut>
    <after>if (!strcmp(current->comm, "klasy_prog")) TIMER_STOP(gn);</after>
  </advice>
</aspect>
`)
		if err != nil {
			g.t.Fatal(err)
		}
		skipped, afterSkipped := 0, 0
		for _, jp := range rep.JoinPoints {
			if jp.Advice == 1 && jp.InlinedIn != "" && strings.Contains(jp.Skipped, "TIMER_START(gn) would never stop") {
				skipped++
			}
			if jp.Advice == 2 && jp.InlinedIn != "" && jp.Skipped != "" {
				afterSkipped++
			}
		}
		if skipped != afterSkipped {
			g.t.Errorf("%d copies' STARTs skipped, %d copies' after advice; want as many", skipped, afterSkipped)
		}
		const dir = "/tmp/klasy-gn-dir"
		_, out := g.prog("mkdir", dir, fmt.Sprint(n))
		g.run("rmdir", dir)
		if strings.TrimSpace(out) != "made 1" {
			g.t.Fatalf("klasy_prog mkdir printed %q", out)
		}
		st, err := g.sess.Stats(g.ctx)
		if err != nil {
			g.t.Fatal(err)
		}
		starts := aggCount(st, "starts", 0)
		tm := aggMap(st, records.KindTimer, "gn")
		// mkdir's copy (in __x64_sys_mkdir) calls getname_flags.part.0,
		// an out-of-line body: its START is nested in the copy's, and
		// the copy's exit stops the timing.
		if starts < n || tm == nil || tm.Timer == nil || tm.Timer.Count < n || tm.Timer.Count+tm.Timer.Nested != starts ||
			tm.Timer.Orphaned != 0 || tm.Timer.NoStart != 0 || tm.Timer.Inside != 0 {
			g.t.Errorf("%d mkdir()s, %d copies' STARTs skipped: %d starts, timer %+v; want each mkdir timed, every START a start-stop pair or nested in one, none orphaned", n, skipped, starts, tm)
		}
		if tm != nil && tm.Timer != nil {
			g.t.Logf("getname_flags: %d copies' STARTs skipped, %d starts, timer %+v", skipped, starts, *tm.Timer)
		}
		g.unweave("agg")
	})
}
