package resolve

import (
	"testing"

	"github.com/klasy/klasy/weaver/joinpoint"
)

// TestAddKeepsExact: two accesses whose join points share a hook and
// context values are one join point; when one of them is on its own
// accessing instruction, that one leads (klasy list shows it exact, and
// its line counts as exact) whichever came first.
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
		if !jp.Exact || jp.Access != exact || len(jp.Merged) != 1 || jp.Merged[0] != line {
			t.Errorf("%s: exact %v, access %v, merged %v; want the exact access leading, the line's merged", order, jp.Exact, jp.Access, jp.Merged)
		}
	}
}
