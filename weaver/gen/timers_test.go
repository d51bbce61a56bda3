package gen

import (
	"strings"
	"testing"

	"github.com/klasy/klasy/aspect"
	"github.com/klasy/klasy/weaver/internal/weavertest"
	"github.com/klasy/klasy/weaver/resolve"
)

// Issue 23 #5: a timer on a function with inlined copies started at
// each copy's entry and never stopped (the after advice is skipped
// there), silently: "0 start-stop pairs / 49 nested starts". The weave
// is refused with the reason and the way out; with the pointcuts kept
// to the out-of-line bodies it goes on.
func TestTimerOnInlinedCopiesRefused(t *testing.T) {
	x := weavertest.DebianIndex(t)
	const src = `<aspect>
  <advice>
    <pointcut>execution(getname_flags)%s</pointcut>
    <before>TIMER_START(gn);</before>
  </advice>
  <advice>
    <pointcut>execution(getname_flags)%s</pointcut>
    <after>TIMER_STOP(gn);</after>
  </advice>
</aspect>
`
	gen := func(restrict string) error {
		f, diags := aspect.Load("gn.klasy", []byte(strings.ReplaceAll(src, "%s", restrict)))
		if len(diags) > 0 {
			t.Fatal(diags)
		}
		jps, err := resolve.Resolve(f, x, resolve.ResolveOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = Generate(f, jps, GenOptions{Path: "gn.klasy", RefAddr: 1})
		return err
	}
	err := gen("")
	if err == nil || !strings.Contains(err.Error(), "gn.klasy:4:13: TIMER_START(gn) at the entry of 10 inlined copies of getname_flags") ||
		!strings.Contains(err.Error(), "would never stop") || !strings.Contains(err.Error(), "within_function(getname_flags)") {
		t.Errorf("a timer on getname_flags and its inlined copies: %v; want it refused at its TIMER_START, saying why and what to do", err)
	}
	if err := gen(" AND within_function(getname_flags)"); err != nil {
		t.Errorf("the timer on the out-of-line bodies only: %v", err)
	}
}
