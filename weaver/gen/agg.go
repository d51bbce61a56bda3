package gen

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/klasy/klasy/aspect"
)

// In-kernel aggregation: advice that calls COUNT, SUM, MINIMUM, MAXIMUM,
// HIST, LHIST (each also _AS and _BY) or TIMER_START/TIMER_STOP
// (klasy_rt.h) updates per-CPU
// maps that klasy stats reads, instead of recording every hit. The maps
// are made by the runtime at their first hit, from room it reserves when
// the aspect registers; this file works out that room from the advice
// text, so that an aspect that aggregates nothing costs nothing.

// aggMaxMaps is KLASY_AGG_MAX_MAPS: the maps one aspect may have.
const aggMaxMaps = 64

// aggMacro matches a use of an aggregation macro and, for the _AS and
// _BY forms, COUNT_STACK and timers, the name it gives.
var aggMacro = regexp.MustCompile(`\b(COUNT_STACK|COUNT|SUM|MINIMUM|MAXIMUM|HIST|LHIST|TIMER_START|TIMER_STOP)(_AS|_BY)?\s*\(\s*([A-Za-z_][A-Za-z0-9_]*)?`)

// stackMacro matches a use of the macros that save the probed context's
// kernel stack (klasy_rt.h: STACK_ID), which unwind from the hit's
// registers.
var stackMacro = regexp.MustCompile(`\b(STACK_ID|STORE_STACK|COUNT_STACK|KEY_KSTACK)\s*\(`)

// UsesStacks says whether the advice of f saves kernel stacks.
func UsesStacks(f *aspect.File) bool {
	for _, a := range f.Advice {
		if stackMacro.MatchString(cCode(a.Body.S)) {
			return true
		}
	}
	return false
}

// AggRoom is the room an aspect's aggregation maps need, by kind: what
// the advice module asks the runtime for (struct klasy_agg_room).
type AggRoom struct {
	Keyed, Hist, LHist, Timer int
	// The _BY forms: keyed, HIST_BY, LHIST_BY, TIMER_START_BY names.
	By, HistBy, LHistBy, TimerBy int
}

func (r AggRoom) total() int {
	return r.Keyed + r.Hist + r.LHist + r.Timer + r.By + r.HistBy + r.LHistBy + r.TimerBy
}

// timers counts the timers, keyed or not: their STARTs need the
// probed context's stack (hit->sp, hit->regs).
func (r AggRoom) timers() int { return r.Timer + r.TimerBy }

// AggRoomOf counts the maps the advice of f may make: one per use of a
// macro named by its line, one per name of the _AS forms and timers.
// Uses inside comments and strings do not count. It is an upper bound
// (two uses on one line are one map); a use it cannot see (inside a
// macro of an imported header) finds no room at its first hit and is
// listed by klasy stats. The total is capped at the runtime's 64.
func AggRoomOf(f *aspect.File) AggRoom {
	var r AggRoom
	named := map[string]bool{}
	for _, a := range f.Advice {
		for _, m := range aggMacro.FindAllStringSubmatch(cCode(a.Body.S), -1) {
			macro, as, by, name := m[1], m[2] != "", m[2] == "_BY", m[3]
			var kind *int
			switch macro {
			case "COUNT", "SUM", "MINIMUM", "MAXIMUM":
				kind = pick(by, &r.By, &r.Keyed)
			case "COUNT_STACK":
				kind = &r.Keyed
				as = true // named, as a timer
			case "HIST":
				kind = pick(by, &r.HistBy, &r.Hist)
			case "LHIST":
				kind = pick(by, &r.LHistBy, &r.LHist)
			default:
				kind = pick(by, &r.TimerBy, &r.Timer)
				as = true // a timer is always named
			}
			if as && name != "" {
				// One map per name, whatever uses it (a use of another
				// kind fails at its first hit, and says so).
				if named[name] {
					continue
				}
				named[name] = true
			}
			*kind++
		}
	}
	// Keep the first kinds' room when there is too much.
	over := r.total() - aggMaxMaps
	for _, k := range []*int{&r.TimerBy, &r.LHistBy, &r.HistBy, &r.By, &r.Timer, &r.LHist, &r.Hist, &r.Keyed} {
		if over <= 0 {
			break
		}
		cut := min(*k, over)
		*k -= cut
		over -= cut
	}
	return r
}

// C is the room as the initializer of struct klasy_aspect's agg_room,
// "" when the aspect aggregates nothing.
func (r AggRoom) C() string {
	if r == (AggRoom{}) {
		return ""
	}
	by := ""
	for _, f := range []struct {
		name string
		n    int
	}{{"by", r.By}, {"hist_by", r.HistBy}, {"lhist_by", r.LHistBy}, {"timer_by", r.TimerBy}} {
		if f.n > 0 {
			by += fmt.Sprintf(", .%s = %d", f.name, f.n)
		}
	}
	return fmt.Sprintf(".agg_room = { .keyed = %d, .hist = %d, .lhist = %d, .timer = %d%s },", r.Keyed, r.Hist, r.LHist, r.Timer, by)
}

// pick is a if by, else b.
func pick(by bool, a, b *int) *int {
	if by {
		return a
	}
	return b
}

// aggRoom writes the aspect's agg_room, if it aggregates.
func (g *cgen) aggRoom() {
	if c := AggRoomOf(g.m.file).C(); c != "" {
		g.p("\t%s", c)
	}
}

// cCode is C source with its comments and string and character literals
// blanked out (newlines kept), so that a pattern finds only code.
func cCode(s string) string {
	b := []byte(s)
	blank := func(i, j int) {
		for ; i < j && i < len(b); i++ {
			if b[i] != '\n' {
				b[i] = ' '
			}
		}
	}
	for i := 0; i < len(b); {
		switch c := b[i]; {
		case c == '/' && i+1 < len(b) && b[i+1] == '/':
			j := i
			for j < len(b) && b[j] != '\n' {
				j++
			}
			blank(i, j)
			i = j
		case c == '/' && i+1 < len(b) && b[i+1] == '*':
			j := strings.Index(s[i+2:], "*/")
			if j < 0 {
				j = len(b)
			} else {
				j += i + 4
			}
			blank(i, j)
			i = j
		case c == '"' || c == '\'':
			j := i + 1
			for j < len(b) && b[j] != c && b[j] != '\n' {
				if b[j] == '\\' {
					j++
				}
				j++
			}
			blank(i, j+1)
			i = j + 1
		default:
			i++
		}
	}
	return string(b)
}
