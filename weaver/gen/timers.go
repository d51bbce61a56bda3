package gen

import (
	"fmt"
	"regexp"
	"slices"

	"github.com/klasy/klasy/aspect"
	"github.com/klasy/klasy/weaver/joinpoint"
)

// timerUse matches TIMER_START(name), TIMER_STOP(name) and their keyed
// forms TIMER_START_BY(name, ...), TIMER_STOP_BY(name).
var timerUse = regexp.MustCompile(`\bTIMER_(START|STOP)(?:_BY)?\s*\(\s*([A-Za-z_][A-Za-z0-9_]*)`)

// SkipUnrunnable skips, with the reason, the join points of jps where
// their advice could run but not do what it says: per-call variables
// where there is no call, and timers that would never stop. Plan (klasy
// list, weave) and Generate call it.
func SkipUnrunnable(f *aspect.File, jps []*joinpoint.JoinPoint) {
	skipCallVarsOutsideCalls(f, jps)
	skipNeverStopping(f, jps)
}

// skipNeverStopping skips the TIMER_START(t) of before advice at the
// entry of an inlined copy whose after advice holding TIMER_STOP(t) is
// skipped there (its exits cannot all be found: package inlexit): such
// a START would never stop and pile up as nested. The copies whose
// exits are hooked keep their timer.
func skipNeverStopping(f *aspect.File, jps []*joinpoint.JoinPoint) {
	starts, stops := map[string][]int{}, map[string][]int{}
	for i, a := range f.Advice {
		for _, m := range timerUse.FindAllStringSubmatchIndex(cCode(a.Body.S), -1) {
			kind, name := a.Body.S[m[2]:m[3]], a.Body.S[m[4]:m[5]]
			if kind == "START" {
				starts[name] = append(starts[name], i+1)
			} else {
				stops[name] = append(stops[name], i+1)
			}
		}
	}
	// The inlined copies whose after advice is skipped, by advice: the
	// skipped join point stays at the copy's entry.
	type copyKey struct {
		advice int
		fn     string
		addr   uint64
	}
	noExit := map[copyKey]string{}
	for _, jp := range jps {
		if jp.Timing == joinpoint.After && jp.InlinedIn != "" && jp.Skipped != "" && jp.Access == nil {
			noExit[copyKey{jp.Advice, jp.Function, jp.Addr}] = jp.Skipped
		}
	}
	for name, advices := range starts {
		for _, jp := range jps {
			if jp.Timing != joinpoint.Before || jp.Skipped != "" || jp.InlinedIn == "" || !slices.Contains(advices, jp.Advice) {
				continue
			}
			for _, stop := range stops[name] {
				if why, ok := noExit[copyKey{stop, jp.Function, jp.Addr}]; ok {
					jp.Skipped = fmt.Sprintf("TIMER_START(%s) would never stop at this copy: its TIMER_STOP (advice %d) is skipped here (%s)", name, stop, why)
					break
				}
			}
		}
	}
}
