package gen

import (
	"slices"
	"strings"
	"testing"

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
