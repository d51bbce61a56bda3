package accessjp

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
)

// On an image built without the plugin (a distribution's kernel), the
// accesses come from accessinfer: the struct member each memory
// instruction touches, worked out from DWARF and the code. Each is an
// instruction already, so every join point is exact: before the
// instruction, or for after advice right after it, with target(x) the
// instruction's base register plus the member's offset back to its
// container. Where the image has .debug_klasy the plugin's records are
// used instead (they see accesses the compiler folded away).

// Inferred adds the join point of inferred access a.
func (ag *Group) Inferred(b *dwarfmap.Batch, im *linecode.Image, a *accessinfer.Access) {
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
	if !pattern.MatchAll(ag.Funcs, true, names...) || !pattern.MatchAll(ag.Files, false, file, hostFile) {
		return
	}
	ag.Selected++
	mode := debugklasy.ModeOf(a.Kind)
	jp := &joinpoint.JoinPoint{Advice: ag.N, Timing: ag.Timing, Kind: joinpoint.Kprobe, Addr: a.PC, Module: im.Module,
		Function: inst.Name, File: file, Line: line, Exact: true,
		Access: &joinpoint.AccessSite{Struct: a.Struct, Member: a.Member, Mode: mode.String(), File: file, Line: line, Inferred: true}}
	if inst.Inlined {
		jp.InlinedIn = a.Func
	}
	if ag.Timing == joinpoint.After {
		jp.Kind = joinpoint.KprobePost
		if ins := b.Insns(a.PC, a.PC+16); len(ins) > 0 {
			if acc, ok := ins[0].Access(); ok && acc.Branch {
				jp.Skipped = "after a call through the member: the callee runs before the advice could"
				ag.Add(jp)
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
		ag.Add(jp)
		return
	}
	if ag.Target != nil && tgt == nil {
		jp.Skipped = fmt.Sprintf("target(%s): the struct's address is not a register plus an offset there (a global, a per-CPU variable or an array element: klasy does not compute those for inferred accesses yet)", ag.Target.Var.Value)
		ag.Add(jp)
		return
	}
	args, skip, inScope := ag.bind(b, s, inst, debugklasy.Access{}, jp, a.PC, hookSpan{lo: a.PC, hi: a.PC}, tgt)
	if !inScope {
		return
	}
	jp.Args, jp.Skipped = args, skip
	ag.Add(jp)
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
