package gen

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klasy/klasy/aspect"
	"github.com/klasy/klasy/internal/cachedir"
	"github.com/klasy/klasy/kbuild"
	"github.com/klasy/klasy/weaver/internal/weavertest"
	"github.com/klasy/klasy/weaver/joinpoint"
	"github.com/klasy/klasy/weaver/runtime"
)

func aggAspect(t *testing.T, bodies ...string) *aspect.File {
	t.Helper()
	var b strings.Builder
	b.WriteString("<aspect>\n")
	for _, body := range bodies {
		b.WriteString("  <advice>\n    <pointcut>execution(f)</pointcut>\n    <before><![CDATA[\n" + body + "\n    ]]></before>\n  </advice>\n")
	}
	b.WriteString("</aspect>\n")
	f, diags := aspect.Load("agg.klasy", []byte(b.String()))
	if len(diags) > 0 {
		t.Fatal(diags)
	}
	return f
}

func TestAggRoomOf(t *testing.T) {
	many := strings.Repeat("COUNT(1);\n", 70) + "HIST(2);\nTIMER_START(t);\n"
	tests := []struct {
		name   string
		bodies []string
		want   AggRoom
	}{
		{"none", []string{"STORE_DATA(1);"}, AggRoom{}},
		{"one of each", []string{"COUNT(1); SUM(1, 2); MINIMUM(1, 2); MAXIMUM(1, 2);\nHIST(3);\nLHIST(3, 0, 10, 1);\nTIMER_START(a);"},
			AggRoom{Keyed: 4, Hist: 1, LHist: 1, Timer: 1}},
		{"a name is one map, in any advice", []string{"COUNT_AS(n, 1);\nSUM_AS(n, 1, 2);", "COUNT_AS(n, 2);\nHIST_AS(h, 1);\nHIST_AS(h, 2);"},
			AggRoom{Keyed: 1, Hist: 1}},
		{"a timer is one map per name", []string{"TIMER_START(a);\nTIMER_STOP(a);", "TIMER_STOP( a );\nTIMER_START(b);"}, AggRoom{Timer: 2}},
		{"comments and strings are not code", []string{"/* COUNT(1); */\n// HIST(2);\npr_info(\"SUM(1, 2) \\\" LHIST(1, 0, 10, 1)\");\nchar c = '\"'; TIMER_START(x);"},
			AggRoom{Timer: 1}},
		{"not a macro", []string{"MY_COUNT(1); COUNTER(2); hist(3); xHIST(4);"}, AggRoom{}},
		{"capped at the runtime's 64, the first kinds kept", []string{many}, AggRoom{Keyed: 64}},
		{"the _BY forms, one map per name", []string{"COUNT_BY(c, KEY_STR(current->comm));\nSUM_BY(s, 1, 2);\nHIST_BY(h, 1, 2);", "HIST_BY(h, 3, 4);\nLHIST_BY(l, 1, 2, 0, 10, 1);"},
			AggRoom{By: 2, HistBy: 1, LHistBy: 1}},
		{"a keyed timer is one map per name", []string{"TIMER_START_BY(t, current->pid);", "TIMER_STOP_BY(t);\nTIMER_STOP(u);"},
			AggRoom{Timer: 1, TimerBy: 1}},
	}
	for _, tt := range tests {
		if got := AggRoomOf(aggAspect(t, tt.bodies...)); got != tt.want {
			t.Errorf("%s: %+v, want %+v", tt.name, got, tt.want)
		}
	}
	if got := (AggRoom{}).C(); got != "" {
		t.Errorf("no room writes %q, want nothing", got)
	}
	if got := (AggRoom{Keyed: 1, Timer: 2}).C(); got != ".agg_room = { .keyed = 1, .hist = 0, .lhist = 0, .timer = 2 }," {
		t.Errorf("room written as %q", got)
	}
	if got := (AggRoom{HistBy: 1}).C(); got != ".agg_room = { .keyed = 0, .hist = 0, .lhist = 0, .timer = 0, .hist_by = 1 }," {
		t.Errorf("room written as %q", got)
	}
}

// Misused macros fail to compile at the aspect's own line, with the
// reason: LHIST's bounds are checked at compile time.
func TestAggregationCompileErrors(t *testing.T) {
	headers := filepath.Join(cachedir.Root(), "debian", "current", "headers")
	weavertest.DebianIndex(t) // skips without the Debian kernel
	ctx := context.Background()
	rt, err := kbuild.Build(ctx, headers, runtime.Sources, kbuild.Options{})
	if err != nil {
		t.Fatalf("building the runtime: %v", err)
	}
	tests := []struct{ body, want string }{
		{"LHIST(1, 0, 100, 7);", "LHIST: hi - lo must be a multiple of step"},
		{"LHIST(1, 100, 0, 10);", "LHIST: hi must be above lo"},
		{"LHIST(1, 0, 100, 0);", "LHIST: step must be above 0"},
		{"LHIST(1, 0, 100000, 10);", "LHIST: at most 1000 buckets"},
		{"int hi = 10;\nLHIST(1, 0, hi, 10);", ""}, // not a constant
		{"COUNT();", ""},
	}
	for _, tt := range tests {
		f := aggAspect(t, tt.body)
		jps := []*joinpoint.JoinPoint{{Advice: 1, Kind: joinpoint.Kprobe, Addr: 0x1000, Function: "f", File: "f.c", Line: 1}}
		m, err := Generate(f, jps, GenOptions{Path: "agg.klasy", RefAddr: 1})
		if err != nil {
			t.Fatal(err)
		}
		err = buildGenerated(ctx, headers, rt, m)
		var be *kbuild.BuildError
		if !errors.As(err, &be) {
			t.Errorf("%q: built (%v), want a compile error", tt.body, err)
			continue
		}
		diags := m.AdviceDiagnostics(be.Diagnostics)
		last := strings.Count(tt.body, "\n") + 5 // the body starts on the aspect's line 5
		found := false
		for _, d := range diags {
			if d.Pos.Filename == "agg.klasy" && d.Pos.Line == last && strings.Contains(d.Msg, tt.want) {
				found = true
			}
		}
		if !found {
			t.Errorf("%q: diagnostics %v, want one at agg.klasy:%d containing %q", tt.body, diags, last, tt.want)
		}
	}
}
