package gen

import (
	"fmt"
	"regexp"

	"github.com/klasy/klasy/aspect"
	"github.com/klasy/klasy/weaver/joinpoint"
)

// Per-call variables: CALL_SET(name, v) in before advice at a function's
// entry and CALL_GET(name) in its after advice (klasy_rt.h). The module
// numbers the aspect's names and keeps their values in a table of its
// own; its handlers tell the runtime which call a hit belongs to (the
// call's CFA), at an out-of-line entry and on a return only.

// callVarsMax is KLASY_CALL_VARS: the names one aspect may use.
const callVarsMax = 8

var callMacro = regexp.MustCompile(`\bCALL_(?:SET|GET)\s*\(\s*([A-Za-z_][A-Za-z0-9_]*)`)

// CallVars are the per-call variables the advice of f names, in order of
// first use (uses in comments and strings do not count).
func CallVars(f *aspect.File) []string {
	return namesUsed(f, callMacro)
}

// namesUsed are the names (re's first group) the advice of f gives
// macros, in order of first use (uses in comments and strings do not
// count).
func namesUsed(f *aspect.File, re *regexp.Regexp) []string {
	var names []string
	seen := map[string]bool{}
	for _, a := range f.Advice {
		for _, m := range re.FindAllStringSubmatch(cCode(a.Body.S), -1) {
			if !seen[m[1]] {
				seen[m[1]] = true
				names = append(names, m[1])
			}
		}
	}
	return names
}

// skipCallVarsOutsideCalls skips the join points whose advice names
// per-call variables but that are neither an out-of-line entry (before)
// nor its return (after): a line, a block, an access, a tracepoint or an
// inlined copy has no call frame of its own, so CALL_GET there would
// read 0 and CALL_SET keep nothing.
func skipCallVarsOutsideCalls(f *aspect.File, jps []*joinpoint.JoinPoint) {
	uses := map[int]string{}
	for i, a := range f.Advice {
		if m := callMacro.FindStringSubmatch(cCode(a.Body.S)); m != nil {
			uses[i+1] = m[0] + ")"
		}
	}
	if len(uses) == 0 {
		return
	}
	for _, jp := range jps {
		use, ok := uses[jp.Advice]
		if !ok || jp.Skipped != "" {
			continue
		}
		if jp.Timing == joinpoint.Before && jp.Entry || jp.Timing == joinpoint.After && jp.Kind == joinpoint.Kretprobe {
			continue
		}
		jp.Skipped = fmt.Sprintf("%s: per-call variables live from a function's out-of-line entry to its return; %s has no call of its own", use, callLess(jp))
	}
}

// callLess names the kind of join point jp is, for a skip reason.
func callLess(jp *joinpoint.JoinPoint) string {
	switch {
	case jp.Access != nil:
		return "a member access"
	case jp.Kind == joinpoint.Tracepoint:
		return "a tracepoint"
	case jp.InlinedIn != "":
		return "an inlined copy"
	case jp.Block != 0:
		return "a basic block"
	default:
		return "a line"
	}
}

// callDecls declares the aspect's per-call variables and their table.
func (g *cgen) callDecls() error {
	names := CallVars(g.m.file)
	if len(names) == 0 {
		return nil
	}
	if len(names) > callVarsMax {
		return fmt.Errorf("advice uses %d per-call variables (CALL_SET/CALL_GET names %v); an aspect may have %d", len(names), names, callVarsMax)
	}
	g.p("")
	g.p("/* The aspect's per-call variables (CALL_SET, CALL_GET) and their values. */")
	g.numberNames("__klasy_call_", names)
	g.p("static struct klasy_calls klasy_calls;")
	return nil
}

// numberNames declares an enum that numbers names, each as prefix+name,
// in order: the macros of klasy_rt.h paste the prefix to the name advice
// gives them.
func (g *cgen) numberNames(prefix string, names []string) {
	g.p("enum {")
	for i, n := range names {
		g.p("\t%s%s = %d,", prefix, n, i)
	}
	g.p("};")
}

// callFrame sets the call the hit belongs to, when the aspect has
// per-call variables: at an out-of-line entry of a function the aspect
// also hooks on return it opens the call (the probed SP points at the
// return address: the CFA is 8 above), on a return the probed SP is the
// CFA again; elsewhere there is none (klasy_leave left 0). An entry
// without a return hook opens nothing: no return would close it, and
// its frame would wait for the task's next call, or be counted dropped
// with the task's slot.
func (g *cgen) callFrame(h *joinpoint.Hook) {
	switch {
	case len(g.returns) == 0:
	case h.Kind == joinpoint.Kretprobe:
		g.p("\thit->cfa = kernel_stack_pointer(regs);")
	case atEntry(h) && g.returns[funcKey{h.Module, h.Function}]:
		g.p("\thit->cfa = klasy_call_begin(&klasy_calls, kernel_stack_pointer(regs) + sizeof(long));")
	}
}

// funcKey names a function: its module ("" for vmlinux) and name.
type funcKey struct{ module, name string }

// returnHooks are the functions m hooks on return when its aspect has
// per-call variables (their entries open a call), else nil: found once,
// not per hook, as an aspect may have thousands.
func returnHooks(m *Module) map[funcKey]bool {
	if len(CallVars(m.file)) == 0 {
		return nil
	}
	r := map[funcKey]bool{}
	for _, h := range m.Hooks {
		if h.Kind == joinpoint.Kretprobe {
			r[funcKey{h.Module, h.Function}] = true
		}
	}
	return r
}

// callEnd closes the call on a return, after its advice.
func (g *cgen) callEnd(h *joinpoint.Hook) {
	if h.Kind == joinpoint.Kretprobe && len(g.returns) > 0 {
		g.p("\tklasy_call_end(&klasy_calls, hit->cfa);")
	}
}

// atEntry: hook h is at the entry of an out-of-line body.
func atEntry(h *joinpoint.Hook) bool {
	for _, jp := range h.Points {
		if jp.Entry {
			return true
		}
	}
	return false
}
