package resolve

import (
	"testing"

	"github.com/klasy/klasy/weaver/joinpoint"
)

// TestAddKeepsExact: two accesses whose join points share a hook and
// context values are one join point; when one of them is on its own
// accessing instruction, that one leads (klasy list shows it exact, and
// its line counts as exact, the other's not) whichever came first.
func TestAddKeepsExact(t *testing.T) {
	line := &joinpoint.AccessSite{Struct: "box", Member: "tr", Mode: "read", File: "t.c", Line: 9}
	exact := &joinpoint.AccessSite{Struct: "trio", Member: "a", Mode: "read", File: "t.c", Line: 10}
	for _, order := range []string{"line first", "exact first"} {
		r := &resolver{seen: map[jpKey]*joinpoint.JoinPoint{}}
		jps := []*joinpoint.JoinPoint{
			{Advice: 1, Addr: 0x10, Line: 9, Access: line},
			{Advice: 1, Addr: 0x10, Line: 10, Exact: true, Access: exact},
		}
		if order == "exact first" {
			jps[0], jps[1] = jps[1], jps[0]
		}
		for _, jp := range jps {
			r.add(jp)
		}
		if len(r.jps) != 1 {
			t.Fatalf("%s: %d join points, want 1", order, len(r.jps))
		}
		jp := r.jps[0]
		if !jp.Exact || jp.Access != exact || len(jp.Merged) != 1 || *jp.Merged[0] != (joinpoint.AccessSite{Struct: "box", Member: "tr", Mode: "read", File: "t.c", Line: 9, LineLevel: true}) {
			t.Errorf("%s: exact %v, access %v, merged %v; want the exact access leading, the line's merged", order, jp.Exact, jp.Access, jp.Merged)
		}
		if line.LineLevel || exact.LineLevel {
			t.Errorf("%s: the sites given were changed (line-level %v, %v): other join points may share them", order, line.LineLevel, exact.LineLevel)
		}
		if c := joinpoint.Coverage(r.jps); c.LinesExact != 1 || c.LinesHooked != 2 {
			t.Errorf("%s: %d lines exact of %d hooked, want 1 of 2 (the merged line's hook is on its line)", order, c.LinesExact, c.LinesHooked)
		}
	}
}
