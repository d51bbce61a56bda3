package gen

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/klasy/klasy/aspect"
	"github.com/klasy/klasy/weaver/joinpoint"
)

// timerUse matches TIMER_START(name) and TIMER_STOP(name).
var timerUse = regexp.MustCompile(`\bTIMER_(START|STOP)\s*\(\s*([A-Za-z_][A-Za-z0-9_]*)`)

// checkTimers refuses a weave in which a timer starts and can never
// stop: TIMER_START(t) in before advice at the entry of an inlined copy
// whose after advice, the one holding TIMER_STOP(t), is skipped there
// (klasy does not locate the exits of inlined code yet). Each such
// START would be counted as nested or orphaned and the timer time
// nothing.
func checkTimers(f *aspect.File, jps []*joinpoint.JoinPoint) error {
	type use struct{ advice, off int }
	starts, stops := map[string][]use{}, map[string]map[int]bool{}
	for i, a := range f.Advice {
		for _, m := range timerUse.FindAllStringSubmatchIndex(cCode(a.Body.S), -1) {
			kind, name := a.Body.S[m[2]:m[3]], a.Body.S[m[4]:m[5]]
			if kind == "START" {
				starts[name] = append(starts[name], use{i + 1, m[0]})
			} else {
				if stops[name] == nil {
					stops[name] = map[int]bool{}
				}
				stops[name][i+1] = true
			}
		}
	}
	// The inlined copies whose after advice is skipped, by advice.
	type copyKey struct {
		advice int
		fn     string
		addr   uint64
	}
	noExit := map[copyKey]bool{}
	for _, jp := range jps {
		if jp.Timing == joinpoint.After && jp.InlinedIn != "" && jp.Skipped != "" && jp.Access == nil {
			noExit[copyKey{jp.Advice, jp.Function, jp.Addr}] = true
		}
	}
	for name, us := range starts {
		for _, u := range us {
			var hosts []string
			fn := ""
			for _, jp := range jps {
				if jp.Advice != u.advice || jp.Timing != joinpoint.Before || jp.Skipped != "" || jp.InlinedIn == "" {
					continue
				}
				for stop := range stops[name] {
					if noExit[copyKey{stop, jp.Function, jp.Addr}] {
						hosts, fn = append(hosts, jp.InlinedIn), jp.Function
						break
					}
				}
			}
			if len(hosts) == 0 {
				continue
			}
			n := len(hosts)
			if n > 3 {
				hosts = append(hosts[:3], "...")
			}
			a := f.Advice[u.advice-1]
			return fmt.Errorf("%s: TIMER_START(%s) at the entry of %d inlined copies of %s (in %s) would never stop: its TIMER_STOP is in after advice, which klasy cannot run at the exits of inlined code yet; to time only the out-of-line bodies, add AND within_function(%s) to both pointcuts",
				f.Position(a.Body.Offset(u.off)), name, n, fn, strings.Join(hosts, ", "), fn)
		}
	}
	return nil
}
