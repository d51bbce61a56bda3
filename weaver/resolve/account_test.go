package resolve

import (
	"fmt"
	"sort"
	"testing"

	"github.com/klasy/klasy/debugklasy"
	"github.com/klasy/klasy/pattern"
	"github.com/klasy/klasy/weaver/internal/weavertest"
	"github.com/klasy/klasy/weaver/joinpoint"
)

// TestEveryRecordAccounted: on the built kernel, every record the plugin
// made of an sk_buff access is a join point, woven or skipped with its
// reason, or one of the accesses a join point's hook stands for
// (JoinPoint.Merged: the same hook and values), which klasy list --json
// prints with it; none is dropped.
func TestEveryRecordAccounted(t *testing.T) {
	x := weavertest.BuiltIndex(t)
	p, _ := pattern.CompileMember("sk_buff.%", pattern.Pointcut)
	tab, err := debugklasy.OpenSelect(x.Image().Path, p)
	if err != nil {
		t.Fatal(err)
	}
	jps, _, err := resolveSrc(t, x, "access(sk_buff.%)", "before")
	if err != nil {
		t.Fatal(err)
	}
	key := func(file string, line int, st, m, mode string) string {
		return fmt.Sprintf("%s:%d %s.%s %s", file, line, st, m, mode)
	}
	have := map[string]bool{}
	add := func(a *joinpoint.AccessSite) { have[key(a.File, a.Line, a.Struct, a.Member, a.Mode)] = true }
	for _, jp := range jps {
		if jp.Access != nil {
			add(jp.Access)
		}
		for _, m := range jp.Merged {
			add(m)
		}
	}
	var miss []string
	for _, a := range tab.Accesses {
		k := key(a.File, a.Line, a.StructName(), a.Member, a.Mode.String())
		if !have[k] {
			miss = append(miss, k+" in "+a.Function.Name)
		}
	}
	sort.Strings(miss)
	t.Logf("%d records, %d without an entry", len(tab.Accesses), len(miss))
	if len(tab.Accesses) < 3000 {
		t.Errorf("%d records of sk_buff accesses, want the built kernel's thousands", len(tab.Accesses))
	}
	for i, m := range miss {
		if i < 20 {
			t.Errorf("no join point stands for %s", m)
		}
	}
}
