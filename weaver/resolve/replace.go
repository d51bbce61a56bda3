package resolve

// <replace> advice (issue 13: DKM's nullify and replace). A replacement
// is hooked as function error injection hooks a function: an
// ftrace-based kprobe at the function's entry whose handler sets the
// return value and the saved instruction pointer to a stub that only
// returns, so the function returns to its caller at once (see
// weaver/runtime/klasy_core.c). That reaches calls of the out-of-line
// body only, so the resolver insists on exactly one body, no inlined
// copy, a body that is the function itself (not a GCC clone with
// another calling convention), an ftrace call site at its entry and a
// return type that comes back in rax.

import (
	"fmt"
	"slices"
	"strings"

	"github.com/klasy/klasy/aspect"
	"github.com/klasy/klasy/dwarfmap"
	"github.com/klasy/klasy/weaver/joinpoint"
	"github.com/klasy/klasy/weaver/resolve/funcnames"
	"github.com/klasy/klasy/weaver/resolve/linecode"
)

// replaceBody is one out-of-line body of the function to replace, in
// the image it was found in.
type replaceBody struct {
	fi dwarfmap.FuncInfo
	im *linecode.Image
}

// replace resolves the join point of a <replace> advice: the entry of
// the one out-of-line body of its function.
func (r *resolver) replace(n int, pc *aspect.Pointcut, g []*aspect.Term) error {
	var exec *aspect.Term
	var files []*aspect.WithinFile
	var args []*aspect.Argument
	for _, t := range g {
		switch {
		case t.Execution != nil:
			exec = t
		case t.WithinFile != nil:
			files = append(files, t.WithinFile)
		case t.Argument != nil:
			args = append(args, t.Argument)
		default:
			return r.errAt(pc, t.Pos.Offset, "%s cannot be used in the pointcut of <replace>", t.Designator())
		}
	}
	if exec == nil {
		return r.errAt(pc, 0, "<replace> needs execution(FUNC)")
	}
	name := exec.Execution.Func.Value
	kernel := r.x
	defer func() { r.x, r.cur = kernel, nil }()

	var bodies []replaceBody
	var inlined []dwarfmap.InlineInfo
	known := false
	for _, im := range r.images() {
		r.x, r.cur = im.X, im
		if im.Module == "" {
			r.cur = nil
		}
		fs := r.x.Funcs(name)
		known = known || len(fs) > 0
		var here []replaceBody
		for _, fi := range fs {
			if !fi.InlineOnly && matchFiles(files, fi.File) {
				here = append(here, replaceBody{fi, im})
			}
		}
		bodies = append(bodies, here...)
		copies := r.x.Inlines(name)
		// Static functions of one name in other files have their own
		// copies: with within_file choosing one, keep the copies inlined
		// into functions of its file.
		if len(here) == 1 && len(fs) > 1 {
			copies = slices.DeleteFunc(copies, func(c dwarfmap.InlineInfo) bool {
				callers := r.x.Funcs(c.Caller)
				return !slices.ContainsFunc(callers, func(fi dwarfmap.FuncInfo) bool { return fi.File == here[0].fi.File })
			})
		}
		if len(here) > 0 || len(files) == 0 {
			inlined = append(inlined, copies...)
		}
	}
	r.x, r.cur = kernel, nil
	where := "execution(" + name + ")"
	switch {
	case !known:
		return r.errAt(pc, exec.Execution.Pos.Offset, "%s: %s", where, funcnames.Unknown(kernel, name))
	case len(bodies) == 0 && len(files) > 0:
		return r.errAt(pc, exec.Execution.Pos.Offset, "%s: no out-of-line body of %s is selected by within_file(...)", where, name)
	case len(bodies) == 0:
		return r.errAt(pc, exec.Execution.Pos.Offset, "%s: %s exists only inlined (%s): a replacement replaces an out-of-line body, and the inlined copies would keep running the original", where, name, inlinedInto(inlined))
	case len(inlined) > 0:
		return r.errAt(pc, exec.Execution.Pos.Offset, "%s: %s is also inlined (%s): those calls run the inlined copy, which a replacement cannot reach, so klasy replaces only functions that are never inlined", where, name, inlinedInto(inlined))
	case len(bodies) > 1:
		var at []string
		for _, b := range bodies {
			at = append(at, fmt.Sprintf("%s:%d", b.fi.File, b.fi.Line))
		}
		return r.errAt(pc, exec.Execution.Pos.Offset, "%s: %d functions are called %s (%s): a replacement replaces one; choose it with within_file(FILE)", where, len(bodies), name, strings.Join(at, ", "))
	}
	b := bodies[0]
	r.x, r.cur = b.im.X, b.im
	if b.im.Module == "" {
		r.cur = nil
	}
	fi := b.fi
	if msg := r.replaceable(fi); msg != "" {
		return r.errAt(pc, exec.Execution.Pos.Offset, "%s: %s", where, msg)
	}
	ret, err := r.x.ReturnType(fi)
	if err != nil {
		return fmt.Errorf("reading the return type of %s: %w", name, err)
	}
	if ret.Class == dwarfmap.ReturnOther {
		return r.errAt(pc, exec.Execution.Pos.Offset, "%s: %s returns %s, which does not come back in one register: klasy replaces functions that return an integer, a pointer or nothing", where, name, ret)
	}
	jp := &joinpoint.JoinPoint{Advice: n, Timing: joinpoint.Replace, Kind: joinpoint.KprobeReplace, Addr: fi.Entry, Function: fi.Name, File: fi.File, Line: fi.Line, Module: r.module(), Returns: ret.C}
	if l := r.entryLine(fi.Entry); l > 0 {
		jp.Line = l
	}
	var skipped string
	jp.Args, skipped = r.bind(fi.Entry, fi.Name, "", args, joinpoint.PointcutParams(pc), true, false)
	if skipped != "" {
		return r.errAt(pc, exec.Execution.Pos.Offset, "%s: %s", where, skipped)
	}
	r.add(jp)
	return nil
}

// replaceable says why the body fi cannot be replaced ("" if it can):
// code the kernel refuses kprobes in, a GCC clone, no ftrace site.
func (r *resolver) replaceable(fi dwarfmap.FuncInfo) string {
	if why := r.refused(fi.Entry); why != "" {
		return fmt.Sprintf("the kernel refuses a kprobe at the entry of %s: %s", fi.Name, why)
	}
	img := r.x.Image()
	// A clone (f.isra.0, f.constprop.0, f.part.0) has the DWARF of f but
	// not its calling convention: arguments dropped or split, the value
	// not returned when no caller uses it.
	syms, err := img.SymbolsAt(fi.Entry)
	if err != nil {
		return err.Error()
	}
	if len(syms) > 0 && !slices.Contains(syms, fi.Name) {
		return fmt.Sprintf("the out-of-line body of %s at %#x is GCC's clone %s, whose arguments and return value GCC may have changed: klasy cannot replace it", fi.Name, fi.Entry, strings.Join(syms, ", "))
	}
	sites, err := img.FtraceSites()
	if err != nil {
		return err.Error()
	}
	if sites != nil && !sites.Has(fi.Entry) {
		return fmt.Sprintf("%s has no ftrace call site at its entry %#x (it is notrace, or its file is built without -pg): klasy replaces a function through an ftrace-based kprobe, the mechanism the kernel lets change a function's return path", fi.Name, fi.Entry)
	}
	return ""
}

// inlinedInto names the functions copies are inlined into, the first few.
func inlinedInto(copies []dwarfmap.InlineInfo) string {
	var callers []string
	for _, c := range copies {
		if c.Caller != "" && !slices.Contains(callers, c.Caller) {
			callers = append(callers, c.Caller)
		}
	}
	slices.Sort(callers)
	n := len(copies)
	what := fmt.Sprintf("%d inlined copies", n)
	if n == 1 {
		what = "1 inlined copy"
	}
	if len(callers) == 0 {
		return what
	}
	shown := callers
	if len(shown) > 5 {
		shown = shown[:5]
	}
	s := what + " in " + strings.Join(shown, ", ")
	if len(callers) > len(shown) {
		s += fmt.Sprintf(" and %d more functions", len(callers)-len(shown))
	}
	return s
}

// checkReplacements fails when two <replace> advice of the aspect
// replace the same function: one aspect replaces a function once. Before
// advice at a replaced function's entry joins the replacement's hook
// (KprobeReplace), where it runs first.
func (r *resolver) checkReplacements() error {
	type key struct {
		module string
		addr   uint64
	}
	first := map[key]*joinpoint.JoinPoint{}
	defer func() {
		for _, jp := range r.jps {
			if jp.Kind == joinpoint.Kprobe && jp.Skipped == "" && first[key{jp.Module, jp.Addr}] != nil {
				jp.Kind = joinpoint.KprobeReplace
			}
		}
	}()
	for _, jp := range r.jps {
		if jp.Timing != joinpoint.Replace || jp.Skipped != "" {
			continue
		}
		k := key{jp.Module, jp.Addr}
		if prev := first[k]; prev != nil && prev.Advice != jp.Advice {
			pc := r.f.Advice[jp.Advice-1].Pointcut
			return r.errAt(pc, 0, "advice %d already replaces %s: a function has one replacement", prev.Advice, jp.Function)
		}
		first[k] = jp
	}
	return nil
}
