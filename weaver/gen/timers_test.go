package gen

import (
	"fmt"
	"strings"
	"testing"

	"github.com/klasy/klasy/aspect"
	"github.com/klasy/klasy/weaver/internal/weavertest"
	"github.com/klasy/klasy/weaver/joinpoint"
	"github.com/klasy/klasy/weaver/resolve"
)

// Issue 23 #5: a timer on a function with inlined copies started at
// each copy's entry and never stopped, silently: "0 start-stop pairs /
// 49 nested starts". The after advice of a copy now runs at its exits
// where klasy finds them all; where it cannot, the copy's TIMER_START is
// skipped with the reason, never left to start a timer that cannot stop.
func TestTimerOnInlinedCopies(t *testing.T) {
	x := weavertest.DebianIndex(t)
	const src = `<aspect>
  <advice>
    <pointcut>execution(%[1]s)</pointcut>
    <before>%[2]s;</before>
  </advice>
  <advice>
    <pointcut>execution(%[1]s)</pointcut>
    <after>%[3]s;</after>
  </advice>
</aspect>
`
	for _, spelled := range []struct{ start, stop string }{
		{"TIMER_START(t)", "TIMER_STOP(t)"},
		{"TIMER_START_BY(t, current->pid)", "TIMER_STOP_BY(t)"},
	} {
		t.Run(spelled.start, func(t *testing.T) {
			gen := func(fn string) []*joinpoint.JoinPoint {
				f, diags := aspect.Load("t.klasy", []byte(fmt.Sprintf(src, fn, spelled.start, spelled.stop)))
				if len(diags) > 0 {
					t.Fatal(diags)
				}
				jps, err := resolve.Resolve(f, x, resolve.ResolveOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if _, err = Generate(f, jps, GenOptions{Path: "t.klasy", RefAddr: 1}); err != nil {
					t.Fatalf("%s: %v", fn, err)
				}
				return jps
			}
			// getname_flags' copies in getname and getname_uflags are its fast
			// path, left by a return or a tail call into getname_flags.part.0:
			// no exit to hook, no START; the others call getname_flags.part.0
			// and go on, and are timed.
			afterSkipped := map[string]bool{}
			jps := gen("getname_flags")
			for _, jp := range jps {
				if jp.InlinedIn != "" && jp.Timing == joinpoint.After && jp.Skipped != "" {
					afterSkipped[jp.InlinedIn] = true
				}
			}
			copies, skipped := 0, 0
			for _, jp := range jps {
				if jp.InlinedIn == "" || jp.Timing != joinpoint.Before {
					continue
				}
				copies++
				startSkipped := strings.Contains(jp.Skipped, "TIMER_START(t) would never stop at this copy") && strings.Contains(jp.Skipped, "its exits cannot all be found")
				if startSkipped != afterSkipped[jp.InlinedIn] {
					t.Errorf("getname_flags in %s: START skipped %q, its after advice skipped %v; want both or neither", jp.InlinedIn, jp.Skipped, afterSkipped[jp.InlinedIn])
				}
				if startSkipped {
					skipped++
				}
			}
			if copies != 10 || skipped == 0 || skipped == copies {
				t.Errorf("getname_flags: %d copies, %d STARTs skipped; want 10, some timed and some skipped", copies, skipped)
			}
			// fdget_pos in ksys_read ends where its code is left: the START stays
			// and the STOP goes on the exit.
			var start, stops []*joinpoint.JoinPoint
			for _, jp := range gen("fdget_pos") {
				if jp.InlinedIn != "ksys_read" {
					continue
				}
				if jp.Timing == joinpoint.Before {
					start = append(start, jp)
				} else {
					stops = append(stops, jp)
				}
			}
			if len(start) != 1 || start[0].Skipped != "" || len(stops) == 0 {
				t.Fatalf("fdget_pos in ksys_read: START %v, STOPs %v; want the START kept and the STOP at its exits", start, stops)
			}
			for _, jp := range stops {
				if jp.Skipped != "" || jp.Addr == start[0].Addr || jp.Kind != joinpoint.Kprobe {
					t.Errorf("fdget_pos in ksys_read: STOP at %#x (%v, skipped %q); want a kprobe at an exit", jp.Addr, jp.Kind, jp.Skipped)
				}
			}
		})
	}
}
