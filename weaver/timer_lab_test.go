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
