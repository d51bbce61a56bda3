// Package tracepoints resolves tracepoint(SUBSYS:NAME) join points in a
// kernel image: each of the kernel's static tracepoints has a function
// __traceiter_NAME (DEFINE_TRACE) whose DWARF gives the event's
// arguments (TP_PROTO, after the probe's data pointer) with their C
// types, and the header that declares it; its subsystem (TRACE_SYSTEM,
// as tracefs groups the events) is read from the image's event
// structures (system.go), the header's name where it has none. The
// advice module registers its
// probe with tracepoint_probe_register at load time (weaver/runtime).
package tracepoints

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/klasy/klasy/aspect"
	"github.com/klasy/klasy/dwarfmap"
	"github.com/klasy/klasy/internal/suggest"
	"github.com/klasy/klasy/pattern"
	"github.com/klasy/klasy/weaver/joinpoint"
)

// iterPrefix names the function every tracepoint has: the one
// trace_NAME() calls to run the probes registered on it.
const iterPrefix = "__traceiter_"

// Tracepoint is one tracepoint of an image.
type Tracepoint struct {
	Subsys, Name string
	Func         dwarfmap.FuncInfo // its __traceiter_ function
}

// String names it as tracefs does: SUBSYS:NAME.
func (t Tracepoint) String() string { return t.Subsys + ":" + t.Name }

// All lists the tracepoints of x by subsystem and name.
func All(x *dwarfmap.Index) []Tracepoint {
	var out []Tracepoint
	seen := map[string]bool{}
	sys := systems(x)
	for _, fi := range x.MatchFuncs(pattern.MustCompile(iterPrefix+"%", pattern.Pointcut)) {
		if fi.InlineOnly || seen[fi.Name] {
			continue
		}
		seen[fi.Name] = true
		t := Tracepoint{Subsys: sys[strings.TrimPrefix(fi.Name, iterPrefix)], Name: strings.TrimPrefix(fi.Name, iterPrefix), Func: fi}
		if t.Subsys == "" {
			t.Subsys = subsys(fi.File)
		}
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b Tracepoint) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// subsys is the subsystem of a tracepoint declared in file when the
// image does not say: the header's name (include/trace/events/sched.h:
// sched), TRACE_SYSTEM's usual value.
func subsys(file string) string {
	return strings.TrimSuffix(path.Base(file), path.Ext(file))
}

// includable is file as an #include names it, "" when it is not in a
// directory the kernel's headers put on the include path.
func includable(file string) string {
	for _, dir := range []string{"include/", "arch/x86/include/"} {
		if i := strings.Index(file, dir); i >= 0 && (i == 0 || file[i-1] == '/') {
			return file[i+len(dir):]
		}
	}
	return ""
}

// Find is the tracepoint subsys:name of x with its arguments, or an
// error naming the nearest tracepoints.
func Find(x *dwarfmap.Index, subsys, name string) (*joinpoint.Event, dwarfmap.FuncInfo, error) {
	all := All(x)
	want := subsys + ":" + name
	for _, t := range all {
		if t.String() != want {
			continue
		}
		ev, err := Arguments(x, t)
		return ev, t.Func, err
	}
	names := make([]string, len(all))
	for i, t := range all {
		names[i] = t.String()
		if t.Name == name {
			return nil, dwarfmap.FuncInfo{}, fmt.Errorf("tracepoint(%s): %s is in subsystem %s: write tracepoint(%s)", want, name, t.Subsys, t)
		}
	}
	if len(all) == 0 {
		return nil, dwarfmap.FuncInfo{}, fmt.Errorf("tracepoint(%s): the image has no tracepoints (no %s functions in its DWARF)", want, iterPrefix)
	}
	return nil, dwarfmap.FuncInfo{}, fmt.Errorf("tracepoint(%s): the kernel has no such tracepoint%s", want, suggest.DidYouMean(want, names))
}

// Arguments reads t's arguments from its __traceiter_ function's DWARF:
// the parameters after the probe's data pointer, and its header.
func Arguments(x *dwarfmap.Index, t Tracepoint) (*joinpoint.Event, error) {
	ev := &joinpoint.Event{Subsys: t.Subsys, Name: t.Name, Header: includable(t.Func.File)}
	if ev.Header == "" {
		return nil, fmt.Errorf("tracepoint(%s): it is declared in %s, a header outside the kernel's include directories, which an advice module cannot include", t, t.Func.File)
	}
	vars, err := x.VarsAt(t.Func.Entry)
	if err != nil {
		return nil, fmt.Errorf("tracepoint(%s): reading the arguments of %s: %w", t, t.Func.Name, err)
	}
	first := true
	for _, v := range vars {
		if v.Kind != "param" || v.Scope != t.Func.Name {
			continue
		}
		if first {
			first = false // void *__data: the probe's own
			continue
		}
		// Event.Proto spells a name into a function pointer's (*).
		fnptr := strings.Contains(v.Type, "(*)")
		if v.Type == "" || strings.Contains(v.Type, "[") || strings.Contains(v.Type, "(") && !fnptr {
			return nil, fmt.Errorf("tracepoint(%s): argument %s has type %q, which klasy cannot spell in a probe's prototype", t, v.Name, v.Type)
		}
		ev.Params = append(ev.Params, joinpoint.EventParam{Type: v.Type, Name: v.Name})
	}
	if first {
		return nil, fmt.Errorf("tracepoint(%s): %s has no parameters in the DWARF", t, t.Func.Name)
	}
	return ev, nil
}

// JoinPoint resolves the AND-group g of advice n, one of groups in its
// pointcut, that holds a tracepoint(...): its one join point, or an
// error at offset off of the pointcut. The advice's parameters are the
// event's arguments, so an advice has one event.
func JoinPoint(x *dwarfmap.Index, n int, g []*aspect.Term, groups int) (_ *joinpoint.JoinPoint, off int, _ error) {
	i := slices.IndexFunc(g, func(t *aspect.Term) bool { return t.Tracepoint != nil })
	tp := g[i].Tracepoint
	if groups > 1 {
		return nil, tp.Pos.Offset, fmt.Errorf("tracepoint(...) joined by OR: the advice's parameters are one event's arguments; write an <advice> per tracepoint")
	}
	ev, fi, err := Find(x, tp.Subsys.Value, tp.Event.Value)
	if err != nil {
		return nil, tp.Pos.Offset, err
	}
	return &joinpoint.JoinPoint{Advice: n, Timing: joinpoint.Before, Kind: joinpoint.Tracepoint, Addr: fi.Entry,
		Function: ev.Subsys + ":" + ev.Name, File: fi.File, Line: fi.Line, Event: ev}, 0, nil
}
