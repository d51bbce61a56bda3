package gen

import (
	"slices"
	"strings"
	"testing"

	"github.com/klasy/klasy/aspect"
	"github.com/klasy/klasy/weaver/joinpoint"
)

func TestCallVars(t *testing.T) {
	f := aggAspect(t, "CALL_SET(t0, 1); /* CALL_SET(no, 1) */\nCALL_SET( n , 2);", "x = CALL_GET(t0) + CALL_GET(late);\npr_info(\"CALL_GET(nor)\");")
	if got, want := CallVars(f), []string{"t0", "n", "late"}; !slices.Equal(got, want) {
		t.Errorf("CallVars = %v, want %v", got, want)
	}
}

// An aspect with more names than the runtime keeps is refused before
// anything is built, naming them.
func TestCallVarsTooMany(t *testing.T) {
	var b strings.Builder
	for i := range callVarsMax + 1 {
		b.WriteString("CALL_SET(v" + string(rune('a'+i)) + ", 1);\n")
	}
	jps := []*joinpoint.JoinPoint{{Advice: 1, Kind: joinpoint.Kprobe, Addr: 0x1000, Function: "f", File: "f.c", Line: 1, Entry: true}}
	_, err := Generate(aggAspect(t, b.String()), jps, GenOptions{Path: "agg.klasy", RefAddr: 1})
	if err == nil || !strings.Contains(err.Error(), "an aspect may have 8") || !strings.Contains(err.Error(), "vi") {
		t.Errorf("Generate with %d per-call variables: %v, want a refusal naming them", callVarsMax+1, err)
	}
}

// TestCallOpenedOnlyWhereItCloses: an entry opens a call's frame only
// when the aspect hooks the function's return too: g's frame, with no
// return to close it, would stay open until the task's next call, or be
// counted dropped when another task takes the task's slot over.
func TestCallOpenedOnlyWhereItCloses(t *testing.T) {
	src := `<aspect>
  <advice><pointcut>execution(f) OR execution(g)</pointcut><before>CALL_SET(t0, 1);</before></advice>
  <advice><pointcut>execution(f)</pointcut><after>STORE_DATA(CALL_GET(t0));</after></advice>
</aspect>
`
	f, diags := aspect.Load("calls.klasy", []byte(src))
	if len(diags) > 0 {
		t.Fatal(diags)
	}
	jps := []*joinpoint.JoinPoint{
		{Advice: 1, Timing: joinpoint.Before, Kind: joinpoint.Kprobe, Addr: 0x1000, Function: "f", File: "f.c", Line: 1, Entry: true},
		{Advice: 1, Timing: joinpoint.Before, Kind: joinpoint.Kprobe, Addr: 0x2000, Function: "g", File: "g.c", Line: 1, Entry: true},
		{Advice: 2, Timing: joinpoint.After, Kind: joinpoint.Kretprobe, Addr: 0x1000, Function: "f", File: "f.c", Line: 1},
	}
	m, err := Generate(f, jps, GenOptions{Path: "calls.klasy", RefAddr: 1})
	if err != nil {
		t.Fatal(err)
	}
	c := string(m.Files[m.Name+".c"])
	if n := strings.Count(c, "klasy_call_begin("); n != 1 {
		t.Errorf("klasy_call_begin called at %d hooks, want 1 (f's entry, not g's):\n%s", n, c)
	}
	if n := strings.Count(c, "klasy_call_end("); n != 1 {
		t.Errorf("klasy_call_end called at %d hooks, want 1 (f's return)", n)
	}
}
