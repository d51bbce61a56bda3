package joinpoint

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/klasy/klasy/aspect"
	"github.com/klasy/klasy/weaver/ctxvalue"
)

// Timing says when advice runs at a join point.
type Timing uint8

const (
	Before Timing = iota
	After
	// Replace runs instead of the function: <replace> advice.
	Replace
)

func (t Timing) String() string {
	switch t {
	case After:
		return "after"
	case Replace:
		return "replace"
	}
	return "before"
}

// HookKind is the kernel mechanism a hook is registered with.
type HookKind uint8

const (
	// Kprobe runs the handler before the instruction at the address.
	Kprobe HookKind = iota
	// Kretprobe runs the handler when the function entered at the
	// address returns (after advice of an out-of-line body).
	Kretprobe
	// KprobePost takes the context values before the instruction at the
	// address and runs the handler right after it (a kprobe's post
	// handler: the kernel single-steps the instruction with interrupts
	// off in between): after advice of an exact access join point.
	KprobePost
	// KprobeReplace replaces the function entered at the address: an
	// ftrace-based kprobe at its entry whose handler runs the <replace>
	// advice (after any before advice of the same aspect there), sets
	// the return value and returns to the caller, so that the body never
	// runs (weaver/runtime: KLASY_HOOK_REPLACE).
	KprobeReplace
	// Tracepoint is a probe on one of the kernel's static tracepoints,
	// registered with tracepoint_probe_register: the advice runs with
	// the event's arguments (weaver/runtime: KLASY_HOOK_TRACEPOINT).
	Tracepoint
)

func (k HookKind) String() string {
	switch k {
	case Kretprobe:
		return "kretprobe"
	case KprobePost:
		return "kprobe-post"
	case KprobeReplace:
		return "replace"
	case Tracepoint:
		return "tracepoint"
	}
	return "kprobe"
}

// registerRank orders the hooks at one address: a replacement first.
// The kernel runs the handlers of kprobes sharing an address newest
// first, and a replacement's handler ends the function: a kretprobe of
// the same aspect registered after it still sees the function return
// (with the replacement's value).
func (k HookKind) registerRank() int {
	if k == KprobeReplace {
		return -1
	}
	return int(k)
}

// JoinPoint is one place and time an advice of an aspect runs, as the
// resolver found it in the kernel image. A join point that cannot be
// woven keeps its place and says why in Skipped.
type JoinPoint struct {
	Advice int // 1-based in its aspect file
	Timing Timing
	Kind   HookKind
	// Addr is the hook's address in the image (link-time, as klasy lines
	// prints it); the advice module adds the running kernel's KASLR slide.
	// In a module, it is the address elfimage lays the .ko out at.
	Addr uint64
	// Module names the module whose code holds the join point ("" for
	// the kernel image).
	Module string
	// Function is the function the join point belongs to: for an inlined
	// copy, the inlined function; InlinedIn is then the function it sits
	// in (empty for an out-of-line body).
	Function  string
	InlinedIn string
	File      string // source file of the join point
	Line      int
	// Args are the context variables the advice is given here, in the
	// advice's parameter order.
	Args []Arg
	// Access is the member access of an access(...) join point (nil for
	// execution); Merged the other accesses that the same hook stands
	// for (same advice, address and context values).
	Access *AccessSite
	Merged []*AccessSite
	// Exact: the hook is on the accessing instruction itself (before it,
	// or right after it for after advice); otherwise it is on the line.
	Exact bool
	// Entry: the hook is at the entry of an out-of-line body (execution's
	// before advice), where the probed SP points at the return address.
	Entry bool
	// Block is the start of the basic block a block(...) join point
	// counts (0 for other join points); Addr is a later instruction of
	// the block when the kernel refuses its first.
	Block uint64
	// Skipped says why this join point is not woven; empty if it is.
	Skipped string
	// Mechanism is how the kernel placed the hook once woven: ftrace,
	// jump, int3 or kretprobe (records.Mech*).
	Mechanism string
	// Event is the tracepoint of a tracepoint(...) join point (nil for
	// the others); Addr is then its struct tracepoint's address.
	Event *Event
	// Returns is the C type a <replace> advice returns: the function's
	// return type from its DWARF, spelled so that it needs no header
	// ("void", "long int", "struct sock *").
	Returns string
	// RegArgs: an after join point's function takes its arguments in
	// registers only and returns in rax (dwarfmap.Return.RegArgs): its
	// hook may go on the runtime's direct trampoline.
	RegArgs bool
}

// Where names the join point for messages: function (in caller) at
// file:line.
func (jp *JoinPoint) Where() string {
	fn := jp.Function
	if jp.InlinedIn != "" {
		fn += " (inlined in " + jp.InlinedIn + ")"
	}
	where := fmt.Sprintf("%s at %s:%d", fn, jp.File, jp.Line)
	if jp.Module != "" {
		where += " [" + jp.Module + "]"
	}
	return where
}

// Arg is one context variable passed to an advice: argument(Var, Param)
// gives the advice `void *Param` pointing at Var's value at the hook.
type Arg struct {
	Param string // the advice's parameter name
	Var   string // the variable in the kernel's source
	// Value computes Var from the saved registers. A nil Value passes
	// NULL (the variable is bound by another AND-group of the pointcut).
	Value *ctxvalue.Value
	// AtEntry computes the value when the function is entered, for after
	// advice of an execution (a kretprobe's entry handler), as SystemTap
	// does for $var in a .return probe.
	AtEntry bool
	// ByValue passes the value itself as the void * (target(x): the
	// struct's address), not its address.
	ByValue bool
}

// Event is one of the kernel's static tracepoints.
type Event struct {
	Subsys, Name string
	// Header is the header declaring it, as #include names it
	// (trace/events/sched.h).
	Header string
	// Params are its arguments (TP_PROTO), in order.
	Params []EventParam
}

// EventParam is one argument of a tracepoint: its C type and name.
type EventParam struct {
	Type, Name string
}

// Proto spells the arguments as a C parameter list.
func (e *Event) Proto() string {
	var ps []string
	for _, p := range e.Params {
		if i := strings.Index(p.Type, "(*)"); i >= 0 { // a function pointer
			ps = append(ps, p.Type[:i+2]+p.Name+p.Type[i+2:])
		} else if strings.HasSuffix(p.Type, "*") {
			ps = append(ps, p.Type+p.Name)
		} else {
			ps = append(ps, p.Type+" "+p.Name)
		}
	}
	return strings.Join(ps, ", ")
}

// AccessSite is a struct member access as the plugin recorded it.
type AccessSite struct {
	Struct, Member string
	Mode           string // read, write, rw, addr
	File           string
	Line           int
	// Via says how the hook was placed when not on the access's own
	// instruction or line: "statement line N" or "nearest line N".
	Via string
	// Inferred: the access was inferred from the image's DWARF and code
	// (an image built without the plugin), not recorded by the plugin.
	Inferred bool
	// LineLevel marks an access merged into an exact join point whose
	// own hook is on its line, not on its instruction: the line starts
	// where the leading access's instruction is.
	LineLevel bool
}

// Hook is one kprobe or kretprobe of an advice module: the woven join
// points of one aspect that share an address and a kind, whose advice
// runs in aspect order.
type Hook struct {
	Kind      HookKind
	Addr      uint64
	Module    string
	Function  string
	InlinedIn string
	File      string
	Line      int
	Points    []*JoinPoint // in advice order
}

// Hooks groups the woven join points by address and kind, in address
// order; skipped ones are left out.
func Hooks(jps []*JoinPoint) []*Hook {
	type key struct {
		module string
		addr   uint64
		kind   HookKind
	}
	byKey := map[key]*Hook{}
	var hooks []*Hook
	for _, jp := range jps {
		if jp.Skipped != "" {
			continue
		}
		kind := jp.Kind
		k := key{jp.Module, jp.Addr, kind}
		h := byKey[k]
		if h == nil {
			h = &Hook{Kind: kind, Addr: jp.Addr, Module: jp.Module, Function: jp.Function, InlinedIn: jp.InlinedIn, File: jp.File, Line: jp.Line}
			byKey[k] = h
			hooks = append(hooks, h)
		}
		h.Points = append(h.Points, jp)
	}
	for _, h := range hooks {
		// In advice order; a replacement last, after the before advice
		// that runs in its handler.
		slices.SortStableFunc(h.Points, func(a, b *JoinPoint) int {
			last := func(jp *JoinPoint) int {
				if jp.Timing == Replace {
					return 1
				}
				return 0
			}
			return cmp.Or(cmp.Compare(last(a), last(b)), cmp.Compare(a.Advice, b.Advice))
		})
	}
	slices.SortStableFunc(hooks, func(a, b *Hook) int {
		if c := cmp.Compare(a.Module, b.Module); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Addr, b.Addr); c != 0 {
			return c
		}
		return cmp.Compare(a.Kind.registerRank(), b.Kind.registerRank())
	})
	return hooks
}

// Refusal says why the kernel would refuse a kprobe at an image address
// ("" if it would not): the kprobe blacklist of the running kernel.
type Refusal func(addr uint64) string

// Warning is something a resolve noticed that does not stop it: a
// pointcut of access(...) that selects nothing.
type Warning struct {
	Pos aspect.Position
	Msg string
}

func (w Warning) String() string { return w.Pos.String() + ": " + w.Msg }

// SortJoinPoints orders join points by advice, then address.
func SortJoinPoints(jps []*JoinPoint) {
	slices.SortStableFunc(jps, func(a, b *JoinPoint) int {
		if c := cmp.Compare(a.Advice, b.Advice); c != 0 {
			return c
		}
		return cmp.Compare(a.Addr, b.Addr)
	})
}

// Params returns the advice parameters an advice's pointcut binds, in
// order of first appearance: argument(v, x), local_var(v, x) and
// target(x) bind x.
func Params(a *aspect.Advice) []string { return PointcutParams(a.Pointcut) }

// PointcutParams lists the advice parameters a pointcut binds, in order.
func PointcutParams(pc *aspect.Pointcut) []string {
	var out []string
	seen := map[string]bool{}
	for _, t := range aspect.Leaves(pc.Expr) {
		var name string
		switch {
		case t.Argument != nil:
			name = t.Argument.Var.Value
		case t.LocalVar != nil:
			name = t.LocalVar.Var.Value
		case t.Target != nil:
			name = t.Target.Var.Value
		default:
			continue
		}
		if !seen[name] {
			seen[name] = true
			out = append(out, name)
		}
	}
	return out
}
