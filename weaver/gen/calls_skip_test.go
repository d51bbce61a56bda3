package gen

import (
	"strings"
	"testing"

	"github.com/klasy/klasy/aspect"
	"github.com/klasy/klasy/weaver/internal/weavertest"
	"github.com/klasy/klasy/weaver/resolve"
)

// TestCallVarsOnlyAtCalls: advice naming per-call variables runs at an
// out-of-line entry and its return; at an inlined copy, a line or a
// tracepoint, which have no call of their own, it is skipped with the
// reason instead of CALL_GET reading 0 there.
func TestCallVarsOnlyAtCalls(t *testing.T) {
	x := weavertest.DebianIndex(t)
	tests := []struct {
		pointcut string
		after    bool   // an after advice with CALL_GET too
		where    string // the kind of join point the reason names
	}{
		{pointcut: "execution(getname_flags)", after: true, where: "an inlined copy"},
		{pointcut: "line(fs/read_write.c:467)", after: true, where: "a line"},
		{pointcut: "tracepoint(sched:sched_process_exec)", where: "a tracepoint"},
	}
	for _, tt := range tests {
		t.Run(tt.pointcut, func(t *testing.T) {
			src := "<aspect>\n<advice><pointcut>" + tt.pointcut + "</pointcut><before>CALL_SET(n, 1);</before></advice>\n"
			if tt.after {
				src += "<advice><pointcut>" + tt.pointcut + "</pointcut><after>STORE_DATA(CALL_GET(n));</after></advice>\n"
			}
			f, diags := aspect.Load("t.klasy", []byte(src+"</aspect>\n"))
			if len(diags) > 0 {
				t.Fatal(diags)
			}
			jps, err := resolve.Resolve(f, x, resolve.ResolveOptions{})
			if err != nil {
				t.Fatal(err)
			}
			SkipUnrunnable(f, jps)
			skipped, outOfLine := 0, 0
			for _, jp := range jps {
				perCall := strings.Contains(jp.Skipped, "per-call variables live from a function's out-of-line entry") && strings.Contains(jp.Skipped, tt.where)
				switch {
				case tt.where == "an inlined copy" && jp.InlinedIn == "":
					outOfLine++
					if jp.Skipped != "" {
						t.Errorf("%s: out-of-line join point skipped: %s", jp.Where(), jp.Skipped)
					}
				case perCall:
					skipped++
				case jp.Skipped == "":
					t.Errorf("%s (%v) kept; want it skipped for its per-call variables", jp.Where(), jp.Timing)
				}
			}
			if skipped == 0 || tt.where == "an inlined copy" && outOfLine == 0 {
				t.Errorf("%d join points: %d skipped for per-call variables, %d out of line", len(jps), skipped, outOfLine)
			}
		})
	}
}
