package resolve

import (
	"fmt"
	"strings"

	"github.com/klasy/klasy/accessinfer"
	"github.com/klasy/klasy/debugklasy"
	"github.com/klasy/klasy/dwarfmap"
	"github.com/klasy/klasy/pattern"
	"github.com/klasy/klasy/weaver/ctxvalue"
	"github.com/klasy/klasy/weaver/joinpoint"
	"github.com/klasy/klasy/weaver/resolve/linecode"
	"github.com/klasy/klasy/x86code"
)

// On an image built without the plugin (a distribution's kernel), the
// accesses come from accessinfer: the struct member each memory
// instruction touches, worked out from DWARF and the code. Each is an
// instruction already, so every join point is exact: before the
// instruction, or for after advice right after it, with target(x) the
// instruction's base register plus the member's offset back to its
// container. Where the image has .debug_klasy the plugin's records are
// used instead (they see accesses the compiler folded away).

// inferredGroup resolves the group in image im from its inferred
// accesses, and says how many the patterns selected.
func (ag *accessGroup) inferredGroup(im *linecode.Image, pats []*pattern.Member) (int, error) {
	accs, _, err := accessinfer.Select(im.X.Image(), func(st, mem string) bool { return matchMember(pats, st, mem) }, ag.r.opt.Progress)
	if err != nil {
		return 0, fmt.Errorf("inferring the member accesses of %s: %w", im.Label(), err)
	}
	b, err := im.Batch()
	if err != nil {
		return 0, err
	}
	for i := range accs {
		ag.inferred(b, im, &accs[i])
	}
	return len(accs), nil
}

func matchMember(pats []*pattern.Member, st, mem string) bool {
	for _, p := range pats {
		if !p.Match(st, mem) {
			return false
		}
	}
	return true
}

// inferred adds the join point of inferred access a.
func (ag *accessGroup) inferred(b *dwarfmap.Batch, im *linecode.Image, a *accessinfer.Access) {
	file, line := InferredLine(im.X, a)
	inst := dwarfmap.Instance{Name: a.Func, Host: a.Func}
	if len(a.Calls) > 0 {
		inst.Name, inst.Inlined = a.Calls[0].Func, true
	}
	hostFile := ""
	if fs := im.X.Funcs(a.Func); len(fs) > 0 {
		hostFile = fs[0].File
	}
	// within_function(G) selects what is written in G or inlined into
	// it: every copy holding the instruction counts.
	names := []string{a.Func}
	for _, c := range a.Calls {
		names = append(names, c.Func)
	}
	if !matchAny(ag.funcs, true, names...) || !matchAny(ag.files, false, file, hostFile) {
		return
	}
	ag.selected++
	mode := debugklasy.ModeOf(a.Kind)
	jp := &joinpoint.JoinPoint{Advice: ag.n, Timing: ag.timing, Kind: joinpoint.Kprobe, Addr: a.PC, Module: im.Module,
		Function: inst.Name, File: file, Line: line, Exact: true,
		Access: &joinpoint.AccessSite{Struct: a.Struct, Member: a.Member, Mode: mode.String(), File: file, Line: line, Inferred: true}}
	if inst.Inlined {
		jp.InlinedIn = a.Func
	}
	if ag.timing == joinpoint.After {
		jp.Kind = joinpoint.KprobePost
		if ins := b.Insns(a.PC, a.PC+16); len(ins) > 0 {
			if acc, ok := x86code.Access(&ins[0].Inst); ok && acc.Branch {
				jp.Skipped = "after a call through the member: the callee runs before the advice could"
				ag.r.add(jp)
				return
			}
		}
	}
	// The container is at the base register plus Base (and the outer
	// levels' offsets); a per-CPU variable's register holds an offset
	// into the per-CPU area, a global's has none: not computed yet.
	var tgt *ctxvalue.Value
	if a.Reg >= 0 && a.ContainerKnown && !strings.HasPrefix(a.Why, "per-CPU ") {
		tgt = ctxvalue.RegValue(a.Reg, a.Base+a.ContainerOff)
	}
	s := &site{im: im, file: file, line: line, fn: debugklasy.Function{Name: inst.Name}}
	if why := linecode.CheckHookAddr(b, im, a.Func, a.PC); why != "" {
		jp.Skipped = why
		ag.r.add(jp)
		return
	}
	if ag.target != nil && tgt == nil {
		jp.Skipped = fmt.Sprintf("target(%s): the struct's address is not a register plus an offset there (a global, a per-CPU variable or an array element: klasy does not compute those for inferred accesses yet)", ag.target.Var.Value)
		ag.r.add(jp)
		return
	}
	args, skip, inScope := ag.bind(b, s, inst, debugklasy.Access{}, jp, a.PC, hookSpan{lo: a.PC, hi: a.PC}, tgt)
	if !inScope {
		return
	}
	jp.Args, jp.Skipped = args, skip
	ag.r.add(jp)
}

// InferredLine is the source line of inferred access a: the line-table
// row covering its instruction, or for a row of no line (code the
// compiler made up) where the copy holding it is called, or its
// function's line.
func InferredLine(x *dwarfmap.Index, a *accessinfer.Access) (string, int) {
	if file, line, ok := x.LineOf(a.PC); ok {
		return file, line
	}
	if len(a.Calls) > 0 {
		return a.Calls[0].File, a.Calls[0].Line
	}
	if fs := x.Funcs(a.Func); len(fs) > 0 {
		return fs[0].File, fs[0].Line
	}
	return "", 0
}
