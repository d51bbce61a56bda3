package joinpoint

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// CoverageStats sum up the access join points of a resolve the way
// KLASY's evaluation counts them (dissertation §6: 2,494 of 2,791 lines
// hooked for access(sk_buff.%), target lost on 227): per source line
// that holds a selected access, and per join point (one per line per
// copy of its code).
type CoverageStats struct {
	// Lines are the source lines holding a selected access (module, file
	// and line); LinesHooked those with a woven join point in some copy;
	// LinesExact those with an exact one; LinesTarget those with a woven
	// join point whose target(x) is bound.
	Lines, LinesHooked, LinesExact, LinesTarget int
	// LinesNoCode are the lines all of whose join points are skipped for
	// "no code": no copy of the function has a line-table row for the
	// line (nor for its statement's line), and KLASY's nearest-line rule
	// finds no basic block holding the lines around it. The compiler
	// removed the line (a branch it proved dead, an inline function
	// inlined nowhere, pr_debug) or merged it beyond recognition.
	LinesNoCode int
	// JoinPoints counts all access join points; Woven those not skipped,
	// by tier (Exact + LineLevel == Woven); Target those whose target(x)
	// is bound.
	JoinPoints, Woven, Exact, LineLevel, Target int
	// Skipped counts the skipped join points by reason (SkipClass).
	Skipped map[string]int
}

// Coverage computes the coverage of the access join points among jps
// (execution join points are left out).
func Coverage(jps []*JoinPoint) CoverageStats {
	type lineKey struct {
		module, file string
		line         int
	}
	st := CoverageStats{Skipped: map[string]int{}}
	type lineState struct{ hooked, exact, target, code bool }
	lines := map[lineKey]*lineState{}
	get := func(m string, a *AccessSite) *lineState {
		k := lineKey{m, a.File, a.Line}
		s := lines[k]
		if s == nil {
			s = &lineState{}
			lines[k] = s
		}
		return s
	}
	for _, jp := range jps {
		if jp.Access == nil {
			continue
		}
		st.JoinPoints++
		sites := append([]*AccessSite{jp.Access}, jp.Merged...)
		if jp.Skipped != "" {
			class := SkipClass(jp.Skipped)
			st.Skipped[class]++
			s := get(jp.Module, jp.Access)
			s.code = s.code || class != "no code"
			continue
		}
		st.Woven++
		if jp.Exact {
			st.Exact++
		} else {
			st.LineLevel++
		}
		target := false
		for _, a := range jp.Args {
			target = target || a.ByValue && a.Value != nil
		}
		if target {
			st.Target++
		}
		for i, a := range sites {
			s := get(jp.Module, a)
			s.hooked, s.code = true, true
			s.exact = s.exact || jp.Exact && (i == 0 || !a.LineLevel)
			s.target = s.target || target
		}
	}
	st.Lines = len(lines)
	for _, s := range lines {
		if s.hooked {
			st.LinesHooked++
		}
		if s.exact {
			st.LinesExact++
		}
		if s.target {
			st.LinesTarget++
		}
		if !s.code {
			st.LinesNoCode++
		}
	}
	return st
}

// SkipClass names the kind of reason a join point was skipped for,
// without its particulars: "no code", "refused", "target: computed by a
// call", ...
func SkipClass(reason string) string {
	head, rest, _ := strings.Cut(reason, ":")
	rest = strings.TrimSpace(rest)
	switch {
	case strings.HasPrefix(head, "target(") || strings.HasPrefix(head, "local_var("):
		what := "target"
		if strings.HasPrefix(head, "local_var(") {
			what = "local_var"
		}
		for _, c := range []struct{ word, class string }{
			{"the result of", "computed by a call"},
			{"which the line's code writes", "base changed on the line"},
			{"is assigned on the line", "base changed on the line"},
			{"only known in the caller", "only known in the caller"},
			{"is read from the stack", "base changed on the line"},
			{"not in scope", "base not in scope"},
			{"optimized out", "optimized out"},
			{"entry_value", "only known at entry"},
			{"could not describe", "base not described by the plugin"},
			{"type of", "base type unknown"},
			{"not reached through a variable", "global base"},
			{"not a pointer", "base not a pointer"},
			{"static variable", "static variable"},
		} {
			if strings.Contains(rest, c.word) {
				return what + ": " + c.class
			}
		}
		return what + ": other"
	}
	return head
}

// String prints the stats as the weave report and the benchmarks show
// them.
func (st CoverageStats) String() string {
	pct := func(n, d int) string {
		if d == 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f%%", 100*float64(n)/float64(d))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "lines %d (%d without code), with a join point %d (%s; %s of those with code), exact %d (%s), target bound %d (%s); ",
		st.Lines, st.LinesNoCode, st.LinesHooked, pct(st.LinesHooked, st.Lines), pct(st.LinesHooked, st.Lines-st.LinesNoCode),
		st.LinesExact, pct(st.LinesExact, st.Lines), st.LinesTarget, pct(st.LinesTarget, st.Lines))
	fmt.Fprintf(&b, "join points %d: woven %d (exact %d, line %d, target %d), skipped %d",
		st.JoinPoints, st.Woven, st.Exact, st.LineLevel, st.Target, st.JoinPoints-st.Woven)
	type kv struct {
		k string
		v int
	}
	var skips []kv
	for k, v := range st.Skipped {
		skips = append(skips, kv{k, v})
	}
	slices.SortFunc(skips, func(a, b kv) int {
		if c := cmp.Compare(b.v, a.v); c != 0 {
			return c
		}
		return strings.Compare(a.k, b.k)
	})
	for i, s := range skips {
		sep := ", "
		if i == 0 {
			sep = " ("
		}
		fmt.Fprintf(&b, "%s%s %d", sep, s.k, s.v)
	}
	if len(skips) > 0 {
		b.WriteString(")")
	}
	return b.String()
}
