// Package resolve finds the join points of an aspect's pointcuts in a
// kernel image and the modules built with the plugin, touching no kernel:
// execution (resolve.go), access from the plugin's records or, in an
// image built without it, from accessinfer (access.go; the join points
// placed by package accessjp), line, block, tracepoint (package tracepoints) and the
// function a <replace> takes (replace.go); in a domains weave only the AND-groups of the domain
// (aspect.DomainGroups). What cannot be woven keeps its place with the
// reason (JoinPoint.Skipped).
package resolve

import (
	"fmt"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/klasy/klasy/aspect"
	"github.com/klasy/klasy/dwarfmap"
	"github.com/klasy/klasy/dwarfmap/elfimage"
	"github.com/klasy/klasy/internal/mmapfile"
	"github.com/klasy/klasy/pattern"
	"github.com/klasy/klasy/weaver/ctxvalue"
	"github.com/klasy/klasy/weaver/joinpoint"
	"github.com/klasy/klasy/weaver/resolve/funcnames"
	"github.com/klasy/klasy/weaver/resolve/linecode"
	"github.com/klasy/klasy/weaver/resolve/tracepoints"
)

// ResolveOptions are what resolving needs beyond the aspect and image.
type ResolveOptions struct {
	Refused joinpoint.Refusal // nil: nothing known to be refused
	// Modules are modules built with the plugin whose access join points
	// are found besides the kernel's.
	Modules []*ModuleImage
	// Progress, if not nil, is told of long work: inferring the member
	// accesses of an image without .debug_klasy.
	Progress func(format string, args ...any)
	// Warn receives what the resolve notices and goes on after: a
	// pointcut of access(...) that selects nothing (nil: dropped).
	Warn func(joinpoint.Warning)
	// Domain is the domain of a domains file resolved for: only the
	// AND-groups that go to it are resolved, its @Domain qualifiers
	// dropped (aspect.DomainGroups). "": one kernel, and a qualifier is an
	// error.
	Domain string
}

// ResolveError is a pointcut that selects nothing or that this weaver
// cannot weave, at its position in the aspect.
type ResolveError struct {
	Pos aspect.Position
	Msg string
}

func (e *ResolveError) Error() string { return e.Pos.String() + ": " + e.Msg }

// DiagnosticsError is an aspect with errors at FILE:LINE:COL, from
// checking it or from compiling its advice.
type DiagnosticsError struct {
	Diags aspect.Diagnostics
}

func (e *DiagnosticsError) Error() string { return e.Diags.Error() }

// Resolve finds the join points of every advice of f in the image
// indexed by x, in advice order. A join point that cannot be woven is
// returned with the reason in Skipped; a designator that selects nothing
// at all is an error, as perf probe fails on a function it cannot find.
func Resolve(f *aspect.File, x *dwarfmap.Index, opt ResolveOptions) (_ []*joinpoint.JoinPoint, err error) {
	// The index reads the image through a mapping: an image changed
	// under it ends the resolve with an error, not a crash.
	defer mmapfile.Catch(&err, debug.SetPanicOnFault(true))
	// Resolving access join points allocates many small short-lived
	// things: collecting less often saves a quarter of the time for a
	// little more memory.
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	r := &resolver{f: f, x: x, opt: opt, seen: map[jpKey]*joinpoint.JoinPoint{}, lines: &linecode.HostLines{}}
	for i, a := range f.Advice {
		if err := r.advice(i+1, a); err != nil {
			return nil, err
		}
	}
	if err := r.checkReplacements(); err != nil {
		return nil, err
	}
	return r.jps, nil
}

type resolver struct {
	f     *aspect.File
	x     *dwarfmap.Index
	opt   ResolveOptions
	jps   []*joinpoint.JoinPoint
	seen  map[jpKey]*joinpoint.JoinPoint             // an OR selecting one join point twice weaves it once
	imgs  []*linecode.Image                          // the kernel and the modules
	cur   *linecode.Image                            // the image execution join points are resolved in (nil: the kernel)
	lines *linecode.HostLines                        // the code of a line in a function, for its copies
	alts  map[*linecode.Image][]elfimage.Alternative // by image, read once (inlexits.go)
}

// jpKey identifies a join point: its advice, hook and context values
// (two accesses on one line with different structs are two join points
// at one hook; with the same values, one).
type jpKey struct {
	advice int
	module string
	addr   uint64
	kind   joinpoint.HookKind
	args   string
}

func (r *resolver) errAt(pc *aspect.Pointcut, off int, format string, args ...any) error {
	return &ResolveError{Pos: r.f.Position(pc.Text.Offset(off)), Msg: fmt.Sprintf(format, args...)}
}

func (r *resolver) advice(n int, a *aspect.Advice) error {
	pc := a.Pointcut
	groups, ok := aspect.Groups(pc.Expr)
	if !ok {
		return r.errAt(pc, 0, "pointcut has too many AND-groups")
	}
	if err := r.checkDomains(pc, groups); err != nil {
		return err
	}
	if a.When == aspect.Replace {
		if len(groups) != 1 {
			return r.errAt(pc, 0, "<replace> is the new body of one function: its pointcut cannot join alternatives with OR")
		}
		gs := aspect.DomainGroups(groups, r.opt.Domain)
		if len(gs) == 0 {
			return nil // another domain's function
		}
		return r.replace(n, pc, gs[0])
	}
	timing := joinpoint.Before
	if a.When == "after" {
		timing = joinpoint.After
	}
	for _, g := range aspect.DomainGroups(groups, r.opt.Domain) {
		var err error
		switch {
		case slices.ContainsFunc(g, func(t *aspect.Term) bool { return t.Access != nil }):
			err = r.accessGroup(n, pc, g, timing)
		case slices.ContainsFunc(g, func(t *aspect.Term) bool { return t.Line != nil }):
			err = r.lineGroup(n, pc, g, timing)
		case slices.ContainsFunc(g, func(t *aspect.Term) bool { return t.Block != nil }):
			err = r.blockGroup(n, pc, g, timing)
		case slices.ContainsFunc(g, func(t *aspect.Term) bool { return t.Tracepoint != nil }):
			jp, off, terr := tracepoints.JoinPoint(r.x, n, g, len(groups))
			if err = terr; err == nil {
				r.add(jp)
			} else {
				err = r.errAt(pc, off, "%v", terr)
			}
		default:
			err = r.group(n, pc, g, timing)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// checkDomains refuses a domain qualifier (file@D, function@D) outside a
// weave of a domains file. Inside one, aspect.DomainGroups keeps only the groups
// of the domain being resolved, so a qualifier left names that domain.
func (r *resolver) checkDomains(pc *aspect.Pointcut, groups [][]*aspect.Term) error {
	if r.opt.Domain != "" {
		return nil
	}
	for _, g := range groups {
		for _, t := range g {
			if d := t.Domain(); d != nil {
				return r.errAt(pc, t.Pos.Offset, "%s: a domain (@%s) needs a domains file: klasy weave --domains FILE", t.Designator(), d.Value)
			}
		}
	}
	return nil
}

// group resolves one AND-group of execution designators.
func (r *resolver) group(n int, pc *aspect.Pointcut, g []*aspect.Term, timing joinpoint.Timing) error {
	var execs []*aspect.Execution
	var files []*aspect.WithinFile
	var funcs []*aspect.WithinFunction
	var args []*aspect.Argument
	for _, t := range g {
		switch {
		case t.Execution != nil:
			execs = append(execs, t.Execution)
		case t.WithinFile != nil:
			files = append(files, t.WithinFile)
		case t.WithinFunction != nil:
			funcs = append(funcs, t.WithinFunction)
		case t.Argument != nil:
			args = append(args, t.Argument)
		case t.Xflow != nil:
			return r.errAt(pc, t.Pos.Offset, "xflow(...) left untranslated: Plan resolves an aspect after weaver.Translate turned its flows into plain advice")
		default:
			return r.errAt(pc, t.Pos.Offset, "%s cannot be woven at execution join points", t.Designator())
		}
	}
	if len(execs) == 0 {
		return r.errAt(pc, g[0].Pos.Offset, "this AND-group selects no join points")
	}
	// The kernel's functions, and those of the modules (--module): a
	// name need only be found in one of them.
	kernel := r.x
	defer func() { r.x, r.cur = kernel, nil }()
	var names []string
	var nameErr error
	found := 0
	for i, im := range r.images() {
		r.x, r.cur = im.X, im
		these, err := r.functions(pc, execs)
		if err != nil {
			if i == 0 {
				nameErr = err
			}
			continue
		}
		names = append(names, these...)
		n, err := r.executions(n, timing, these, files, funcs, args)
		if err != nil {
			return err
		}
		found += n
	}
	if len(names) == 0 && nameErr != nil {
		return nameErr
	}
	slices.Sort(names)
	names = slices.Compact(names)
	if found == 0 {
		var limits []string
		var within []string
		for _, t := range g {
			if t.WithinFile != nil || t.WithinFunction != nil {
				limits = append(limits, t.Designator()+"(...)")
			}
			if t.WithinFunction != nil {
				within = append(within, t.WithinFunction.Func.Value)
			}
		}
		return r.errAt(pc, execs[0].Pos.Offset, "execution(%s): no body or inlined copy of %s is selected by %s%s", execs[0].Func.Value, strings.Join(names, ", "), strings.Join(limits, " AND "), funcnames.Unselected(kernel, nil, within))
	}
	return nil
}

// executions adds the join points of the functions names in the image
// being resolved (r.x), and says how many there are.
func (r *resolver) executions(n int, timing joinpoint.Timing, names []string, files []*aspect.WithinFile, funcs []*aspect.WithinFunction, args []*aspect.Argument) (int, error) {
	params := joinpoint.PointcutParams(r.f.Advice[n-1].Pointcut)
	found := 0
	for _, name := range names {
		for _, fi := range r.x.Funcs(name) {
			if fi.InlineOnly || !matchFiles(files, fi.File) || !matchFuncs(funcs, fi.Name) {
				continue
			}
			found++
			r.add(r.outOfLine(n, timing, fi, args, params))
		}
		copies, err := r.x.InlineEntries(name)
		if err != nil {
			return 0, fmt.Errorf("reading the inlined copies of %s: %w", name, err)
		}
		decl := ""
		if fs := r.x.Funcs(name); len(fs) > 0 {
			decl = fs[0].File
		}
		for _, c := range copies {
			if !matchFiles(files, decl) || !matchFuncs(funcs, c.Caller) {
				continue
			}
			found++
			jp := r.inlined(n, timing, c, decl, args, params)
			if timing != joinpoint.After || jp.Skipped != "" {
				r.add(jp)
				continue
			}
			for _, jp := range r.inlinedAfter(n, c, copies, jp, args, params) {
				r.add(jp)
			}
		}
	}
	return found, nil
}

func (r *resolver) add(jp *joinpoint.JoinPoint) {
	var args strings.Builder
	for _, a := range jp.Args {
		fmt.Fprintf(&args, "%s=%s;", a.Param, a.Value)
	}
	k := jpKey{jp.Advice, jp.Module, jp.Addr, jp.Kind, args.String()}
	if prev := r.seen[k]; jp.Skipped == "" && prev != nil && prev.Skipped == "" {
		if jp.Access != nil && prev.Access != nil && *jp.Access != *prev.Access {
			if jp.Exact && !prev.Exact {
				// One hook serves both: the access on its instruction
				// leads, so its line counts as exact; the others'
				// stay line-level.
				for _, a := range append([]*joinpoint.AccessSite{prev.Access}, prev.Merged...) {
					jp.Merged = append(jp.Merged, lineLevel(a))
				}
				*prev = *jp
				return
			}
			a := jp.Access
			if prev.Exact && !jp.Exact {
				a = lineLevel(a)
			}
			prev.Merged = append(prev.Merged, a)
		}
		return
	}
	if jp.Skipped == "" {
		r.seen[k] = jp
	}
	r.jps = append(r.jps, jp)
}

// lineLevel is a copy of a marked line-level: sites may be shared by
// join points where they lead.
func lineLevel(a *joinpoint.AccessSite) *joinpoint.AccessSite {
	c := *a
	c.LineLevel = true
	return &c
}

// functions returns the names every execution(...) of a group matches.
func (r *resolver) functions(pc *aspect.Pointcut, execs []*aspect.Execution) ([]string, error) {
	refs := make([]funcRef, len(execs))
	for i, e := range execs {
		refs[i] = funcRef{"execution", e.Pos.Offset, e.Func}
	}
	return r.functionsOf(pc, refs)
}

// funcRef is a designator naming functions: execution(F) or block(F),
// at off in its pointcut.
type funcRef struct {
	designator string
	off        int
	fn         *aspect.Name
}

// functionsOf returns the names every designator of refs matches (an ELF
// alias, the function at its address: funcnames.Match); a designator
// that matches no function is an error at it, with the nearest names.
func (r *resolver) functionsOf(pc *aspect.Pointcut, refs []funcRef) ([]string, error) {
	var names []string
	for i, e := range refs {
		p, err := e.fn.Pattern()
		if err != nil {
			return nil, r.errAt(pc, e.fn.Pos.Offset, "%v", err)
		}
		these, alias := funcnames.Match(r.x, p)
		if alias != "" {
			r.warn(pc, e.fn.Pos.Offset, "%s(%s): %s", e.designator, e.fn.Value, alias)
		}
		if len(these) == 0 {
			return nil, r.errAt(pc, e.off, "%s(%s): %s", e.designator, e.fn.Value, funcnames.Unknown(r.x, e.fn.Value))
		}
		if i == 0 {
			names = these
			continue
		}
		set := make(map[string]bool, len(these))
		for _, n := range these {
			set[n] = true
		}
		names = slices.DeleteFunc(names, func(n string) bool { return !set[n] })
	}
	return names, nil
}

func matchWord(p string) string {
	if strings.ContainsRune(p, '%') {
		return "matches " + p
	}
	return "is called " + p
}

// outOfLine is the join point at the entry of an out-of-line body: a
// kprobe there for before advice, a kretprobe for after.
func (r *resolver) outOfLine(n int, timing joinpoint.Timing, fi dwarfmap.FuncInfo, args []*aspect.Argument, params []string) *joinpoint.JoinPoint {
	jp := &joinpoint.JoinPoint{Advice: n, Timing: timing, Kind: joinpoint.Kprobe, Addr: fi.Entry, Function: fi.Name, File: fi.File, Line: fi.Line, Module: r.module(), Entry: timing == joinpoint.Before}
	if timing == joinpoint.After {
		jp.Kind = joinpoint.Kretprobe
		// $retval$ takes the function's type: an int's upper half of rax
		// is unspecified (weaver/gen). Unknown: unsigned long, as before.
		if ret, err := r.x.ReturnType(fi); err == nil {
			jp.Returns, jp.RegArgs = ret.C, ret.RegArgs
		}
	}
	if l := r.entryLine(fi.Entry); l > 0 {
		jp.Line = l
	}
	if jp.Skipped = r.refused(fi.Entry); jp.Skipped != "" {
		return jp
	}
	jp.Args, jp.Skipped = r.bind(fi.Entry, fi.Name, "", args, params, true, timing == joinpoint.After)
	return jp
}

// inlined is the join point at the entry of an inlined copy (after
// advice then goes on its exits: inlinedAfter).
func (r *resolver) inlined(n int, timing joinpoint.Timing, c dwarfmap.InlineEntry, decl string, args []*aspect.Argument, params []string) *joinpoint.JoinPoint {
	jp := &joinpoint.JoinPoint{Advice: n, Timing: timing, Kind: joinpoint.Kprobe, Addr: c.Entry, Function: c.Name, InlinedIn: c.Caller, File: c.CallFile, Line: c.CallLine, Module: r.module()}
	if decl != "" {
		jp.File = decl
	}
	if l, f := r.lineAt(c.Entry); l > 0 {
		jp.Line, jp.File = l, f
	}
	if c.Caller == "" {
		jp.Skipped = "the function this copy is inlined into is unknown"
		return jp
	}
	if err := r.x.CheckInstruction(c.Entry); err != nil {
		jp.Skipped = "entry is not an instruction boundary: " + err.Error()
		return jp
	}
	if jp.Skipped = r.refused(c.Entry); jp.Skipped != "" {
		return jp
	}
	jp.Args, jp.Skipped = r.bind(c.Entry, "inline "+c.Name, c.Name, args, params, false, false)
	return jp
}

// refused says why a hook at addr cannot be placed: code the kernel
// frees after boot, or the running kernel's kprobe blacklist.
func (r *resolver) refused(addr uint64) string {
	switch sec := r.x.SectionOf(addr); sec {
	case ".init.text", ".exit.text":
		return "in " + sec + ": the kernel frees this code after boot, so it never runs again (and refuses kprobes there)"
	}
	refused := r.opt.Refused
	if r.cur != nil {
		refused = r.cur.Refused
	}
	if refused == nil {
		return ""
	}
	return refused(addr)
}

// module is the module being resolved ("" for the kernel).
func (r *resolver) module() string {
	if r.cur == nil {
		return ""
	}
	return r.cur.Module
}

// entryLine is the source line of the first line-table row at addr.
func (r *resolver) entryLine(addr uint64) int {
	l, _ := r.lineAt(addr)
	return l
}

// lineAt returns the line and file of the line-table row for addr.
func (r *resolver) lineAt(addr uint64) (int, string) {
	f, l, ok := r.x.LineAt(addr)
	if !ok {
		return 0, ""
	}
	return l, f
}

// bind computes the advice's context variables at addr: for each
// parameter the advice declares, the argument(...) of this group that
// binds it, read from the variable of that name in scope (the function's
// own parameter, or an inlined copy's). Unbound parameters pass NULL.
func (r *resolver) bind(addr uint64, scope, inlineName string, args []*aspect.Argument, params []string, atEntry, kret bool) ([]joinpoint.Arg, string) {
	if len(params) == 0 {
		return nil, ""
	}
	var locs []dwarfmap.VarLoc
	if len(args) > 0 {
		var err error
		if locs, err = r.x.VarLocsAt(addr); err != nil {
			return nil, "reading variable locations: " + err.Error()
		}
	}
	out := make([]joinpoint.Arg, len(params))
	for i, p := range params {
		out[i] = joinpoint.Arg{Param: p}
		arg := argumentFor(args, p)
		if arg == nil {
			continue
		}
		out[i].Var = arg.Param.Value
		out[i].AtEntry = kret
		v, skip := argumentValue(locs, arg, scope, atEntry, r.module())
		if skip != "" {
			return nil, skip
		}
		out[i].Value = v
	}
	return out, ""
}

// argumentFor is the argument(...) that binds advice parameter p, nil
// if none does.
func argumentFor(args []*aspect.Argument, p string) *aspect.Argument {
	var arg *aspect.Argument
	for _, a := range args {
		if a.Var.Value == p {
			arg = a
		}
	}
	return arg
}

// argumentValue computes argument(v, x) from the variables locs in scope
// at a hook: the parameter v of scope ("f", or "inline f" for an inlined
// copy), or says why it cannot.
func argumentValue(locs []dwarfmap.VarLoc, arg *aspect.Argument, scope string, atEntry bool, module string) (*ctxvalue.Value, string) {
	vl, ok := pickVar(locs, arg.Param.Value, scope)
	if !ok {
		return nil, fmt.Sprintf("argument(%s, %s): %s has no parameter %s", arg.Param.Value, arg.Var.Value, strings.TrimPrefix(scope, "inline "), arg.Param.Value)
	}
	v, err := ctxvalue.CompileLocation(ctxvalue.LocContext{VL: vl, AtEntry: atEntry, Module: module})
	if err != nil {
		return nil, fmt.Sprintf("argument(%s, %s): %s", arg.Param.Value, arg.Var.Value, err)
	}
	return v, ""
}

// pickVar finds the parameter name of the innermost scope named scope
// ("f" for an out-of-line body, "inline f" for an inlined copy).
func pickVar(locs []dwarfmap.VarLoc, name, scope string) (dwarfmap.VarLoc, bool) {
	best, found := dwarfmap.VarLoc{}, false
	for _, v := range locs {
		if v.Name == name && v.Scope == scope && v.Kind == "param" && (!found || v.Depth >= best.Depth) {
			best, found = v, true
		}
	}
	return best, found
}

// matchFiles reports whether path matches every within_file pattern: the
// whole path, or a tail of it after a '/' (within_file(dev.c) and
// within_file(net/core/dev.c) both select net/core/dev.c). The checker
// has already rejected patterns that do not compile.
func matchFiles(files []*aspect.WithinFile, path string) bool {
	for _, f := range files {
		p, err := pattern.Compile(strings.Join(f.Path.Parts, ""), pattern.Pointcut)
		if err != nil || !pattern.MatchPath(p, path) {
			return false
		}
	}
	return true
}

func matchFuncs(funcs []*aspect.WithinFunction, name string) bool {
	for _, f := range funcs {
		p, err := f.Func.Pattern()
		if err != nil || !p.Match(name) {
			return false
		}
	}
	return true
}
