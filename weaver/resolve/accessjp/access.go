package accessjp

import (
	"fmt"
	"slices"

	"golang.org/x/arch/x86/x86asm"

	"github.com/klasy/klasy/aspect"
	"github.com/klasy/klasy/debugklasy"
	"github.com/klasy/klasy/dwarfmap"
	"github.com/klasy/klasy/pattern"
	"github.com/klasy/klasy/weaver/baseexpr"
	"github.com/klasy/klasy/weaver/ctxvalue"
	"github.com/klasy/klasy/weaver/joinpoint"
	"github.com/klasy/klasy/weaver/resolve/linecode"
	"github.com/klasy/klasy/x86code"
)

// Rec is one plugin record of one image.
type Rec struct {
	Im *linecode.Image
	A  debugklasy.Access
}

// Group is one AND-group of access(...) designators: the advice, when it
// runs, its parameters, the within_file/within_function patterns, target
// and local_var, and where its join points go.
type Group struct {
	N        int // the advice, 1-based
	Timing   joinpoint.Timing
	Params   []string
	Files    []*pattern.Pattern
	Funcs    []*pattern.Pattern
	Target   *aspect.Target
	Locals   []*aspect.LocalVar
	Selected int // copies of code selected before local_var
	// Add takes each join point, woven or skipped.
	Add func(*joinpoint.JoinPoint)
	// Lines caches the code of a line in a function for its copies,
	// shared with line(...) join points.
	Lines *linecode.HostLines
}

// site is the accesses of one function on one line of one image.
type site struct {
	im   *linecode.Image
	file string
	line int
	fn   debugklasy.Function
	accs []debugklasy.Access
}

// Resolve places the join points of the plugin's records recs.
func (ag *Group) Resolve(recs []Rec) error {
	var sites []*site
	type key struct {
		im   *linecode.Image
		file string
		line int
		fn   debugklasy.Function
	}
	idx := map[key]*site{}
	for _, rc := range recs {
		k := key{rc.Im, rc.A.File, rc.A.Line, rc.A.Function}
		s := idx[k]
		if s == nil {
			s = &site{im: rc.Im, file: rc.A.File, line: rc.A.Line, fn: rc.A.Function}
			idx[k] = s
			sites = append(sites, s)
		}
		s.accs = append(s.accs, rc.A)
	}
	for _, s := range sites {
		if err := ag.site(s); err != nil {
			return err
		}
	}
	return nil
}

// site finds the join points of one site in every copy of its function.
func (ag *Group) site(s *site) error {
	b, err := s.im.Batch()
	if err != nil {
		return err
	}
	insts := b.Instances(s.fn.Name, s.fn.File)
	any := false
	for _, inst := range insts {
		if !pattern.MatchAll(ag.Funcs, true, s.fn.Name, inst.Host) || !pattern.MatchAll(ag.Files, false, s.file, s.fn.File, inst.HostFile) {
			continue
		}
		any = true
		ag.Selected++
		lc := ag.lineCode(b, s, inst, s.line)
		for _, a := range s.accs {
			ag.access(b, s, inst, lc, a)
		}
	}
	if !any && len(insts) == 0 && pattern.MatchAll(ag.Funcs, true, s.fn.Name) && pattern.MatchAll(ag.Files, false, s.file, s.fn.File) {
		// The compiler removed every copy of the function (an inline
		// function inlined nowhere in live code, a discarded section).
		for _, a := range s.accs {
			jp := ag.newJP(s, dwarfmap.Instance{Name: s.fn.Name}, a)
			jp.Skipped = fmt.Sprintf("no code: %s has no out-of-line body or inlined copy in %s (the compiler removed it, or it is in code the linker discarded)", s.fn.Name, s.im.Label())
			ag.Add(jp)
		}
	}
	return nil
}

// lineCode is the part of the line's code in its host function that
// lies in copy inst: the rows in the copy's ranges, and the owned
// instructions in them (the rows of two copies inlined side by side are
// shared: a row of the line may start in one copy and cover code of
// both).
func (ag *Group) lineCode(b *dwarfmap.Batch, s *site, inst dwarfmap.Instance, line int) *linecode.LineCode {
	host := inst.HostRanges
	if len(host) == 0 {
		host = inst.Ranges
	}
	hl := ag.Lines.Get(b, s.im, s.file, line, host)
	return hl.Code(line, func(addr uint64) bool { _, ok := linecode.InRanges(inst.Ranges, addr); return ok }, inst.Ranges)
}

// newJP is a join point of access a in copy inst, not placed yet.
func (ag *Group) newJP(s *site, inst dwarfmap.Instance, a debugklasy.Access) *joinpoint.JoinPoint {
	jp := &joinpoint.JoinPoint{Advice: ag.N, Timing: ag.Timing, Kind: joinpoint.Kprobe, Module: s.im.Module,
		Function: s.fn.Name, File: a.File, Line: a.Line,
		Access: &joinpoint.AccessSite{Struct: a.StructName(), Member: a.Member, Mode: a.Mode.String(), File: a.File, Line: a.Line}}
	if inst.Inlined {
		jp.InlinedIn = inst.Host
		if jp.InlinedIn == "" {
			jp.InlinedIn = "?"
		}
	}
	return jp
}

// access places the join point(s) of access a in copy inst.
func (ag *Group) access(b *dwarfmap.Batch, s *site, inst dwarfmap.Instance, lc *linecode.LineCode, a debugklasy.Access) {
	via := ""
	if lc.Empty() && a.StmtLine != 0 {
		if lc = ag.lineCode(b, s, inst, a.StmtLine); !lc.Empty() {
			via = fmt.Sprintf("statement line %d", a.StmtLine)
		}
	}
	if !lc.Empty() {
		ex, cands := ag.exact(b, s, inst, lc, a)
		if ex != nil {
			ag.placeExact(b, s, inst, lc, a, ex, via)
			return
		}
		ag.placeLine(b, s, inst, lc, a, via, cands)
		return
	}
	if before, after, line, err := ag.nearest(b, s, inst); err == nil {
		addr := before
		if ag.Timing == joinpoint.After {
			addr = after
		}
		jp := ag.newJP(s, inst, a)
		jp.Access.Via = fmt.Sprintf("nearest line %d", line)
		ag.finish(b, s, inst, a, jp, addr, hookSpan{lo: before, hi: after}, nil)
		return
	} else {
		jp := ag.newJP(s, inst, a)
		where := "this copy"
		if inst.Inlined {
			where = "the copy inlined into " + inst.Host
		}
		jp.Skipped = fmt.Sprintf("no code: line %d has no code in %s (the compiler merged or removed it) and %v", a.Line, where, err)
		ag.Add(jp)
	}
}

// hookSpan is the code a join point's hook stands for: from the hook
// (or the line's start) to the line's end (or the hook), which a context
// value must not see changed; cands are the instructions that may be
// the access (when the exact tier found several).
type hookSpan struct {
	lo, hi uint64
	cands  []cand
}

// cand is an instruction that may be the access: its address, the
// DWARF register its memory operand is based on, and the end of it.
type cand struct {
	pc, end uint64
	reg     int
}

// exactHit is the instruction(s) that access the member.
type exactHit struct {
	before, after x86code.Insn // the same but for a load+store pair (rw)
	acc           x86code.MemAccess
	k             int64 // the struct is at the base register + k
	targetOK      bool  // the base register holds the base's dynamic part
}

// baseOf parses and evaluates the record's base at addr in copy inst,
// with the types of variables there.
func (ag *Group) baseOf(b *dwarfmap.Batch, inst dwarfmap.Instance, a debugklasy.Access, addr uint64) (baseexpr.SVal, error) {
	if a.Base.Kind == debugklasy.Unsupported {
		return baseexpr.SVal{}, fmt.Errorf("the plugin could not describe the struct's address (%s)", a.Base.Reason)
	}
	e, err := baseexpr.Parse(a.Base.Expr)
	if err != nil {
		return baseexpr.SVal{}, err
	}
	switch e.Kind {
	case baseexpr.Var: // skb: no type needed
		return baseexpr.SVal{Kind: baseexpr.SVVar, Name: e.Name}, nil
	case baseexpr.Call:
		return baseexpr.SVal{Kind: baseexpr.SVCall, Name: e.Name}, nil
	}
	ev := &baseexpr.Eval{
		VarType: func(name string) (baseexpr.CType, error) {
			vl, ok, err := varAt(b, addr, name, scopeOf(inst))
			if err != nil {
				return baseexpr.CType{}, err
			}
			if !ok {
				return baseexpr.CType{}, fmt.Errorf("%s is not in scope", name)
			}
			return baseexpr.ParseCType(vl.Type), nil
		},
		Layout: b.Struct,
	}
	v, _, err := ev.Value(e)
	return v, err
}

// scopeOf is the DWARF scope name of a copy's own variables (VarLoc.Scope).
func scopeOf(inst dwarfmap.Instance) string {
	if inst.Inlined {
		return "inline " + inst.Name
	}
	return inst.Name
}

// varAt finds variable name at addr: the innermost one of scope, else
// the innermost of any scope.
func varAt(b *dwarfmap.Batch, addr uint64, name, scope string) (dwarfmap.VarLoc, bool, error) {
	return b.VarLocNamed(addr, name, scope)
}

// exact looks for the one instruction of the line that accesses the
// member, first among the line's own instructions, then among those of
// the functions inlined at the line in this copy. nil if none or more;
// cands are then the addresses of those that fit.
func (ag *Group) exact(b *dwarfmap.Batch, s *site, inst dwarfmap.Instance, lc *linecode.LineCode, a debugklasy.Access) (hit *exactHit, cands []cand) {
	off, size, ok := a.Span()
	if !ok {
		return nil, nil
	}
	if a.Base.Kind == debugklasy.Unsupported {
		return nil, nil // no offset to match
	}
	anchor := lc.Addrs[0]
	base, err := ag.baseOf(b, inst, a, anchor)
	if err != nil || base.Kind == baseexpr.SVConst {
		return nil, nil
	}
	k := base.Off
	var insns []x86code.Insn
	for _, sg := range lc.Segs {
		insns = append(insns, b.Insns(sg[0], sg[1])...)
	}
	hit = ag.pick(b, inst, a, base, insns, off, size, k)
	if hit == nil && ag.noCandidate(insns, a, off, size, k) {
		// The access may sit in code the compiler merged into the line
		// owning the address of the line's rows, or in the code of a
		// callee inlined at this line (a macro's or an inline helper's).
		for _, m := range lc.Merged {
			insns = append(insns, b.Insns(m[0], m[1])...)
		}
		for _, c := range b.CopiesCalledAt(hostEntry(b, inst), s.file, lc.Line) {
			if !linecode.Within(c.Ranges, inst.Ranges) {
				continue
			}
			var more []x86code.Insn
			for _, r := range c.Ranges {
				more = append(more, b.Insns(r[0], r[1])...)
			}
			insns = append(insns, more...)
		}
		hit = ag.pick(b, inst, a, base, insns, off, size, k)
	}
	if hit == nil {
		for i := range insns {
			if acc, ok := candidate(&insns[i], a, off, size, k); ok {
				cands = append(cands, cand{insns[i].PC, insns[i].End(), x86code.DWARFReg(acc.Mem.Base)})
			}
		}
	}
	return hit, cands
}

func hostEntry(b *dwarfmap.Batch, inst dwarfmap.Instance) uint64 {
	if len(inst.Ranges) == 0 {
		return 0
	}
	return inst.Ranges[0][0]
}

// candidate reports whether the instruction's memory operand falls on
// the member at off (size bytes) of a struct at base+k.
func candidate(in *x86code.Insn, a debugklasy.Access, off, size, k int64) (x86code.MemAccess, bool) {
	acc, ok := in.Access()
	if !ok || acc.Mem.Segment != 0 || acc.Mem.Base == 0 || x86code.DWARFReg(acc.Mem.Base) < 0 || !a.Mode.Fits(acc.Kind) {
		return acc, false
	}
	rel := acc.Mem.Disp - k - off
	if acc.Kind == x86code.Addr {
		return acc, rel >= 0 && rel < size && acc.Mem.Index == 0
	}
	n := int64(max(acc.Bytes, 1))
	return acc, rel < size && rel+n > 0
}

func (ag *Group) noCandidate(insns []x86code.Insn, a debugklasy.Access, off, size, k int64) bool {
	for i := range insns {
		if _, ok := candidate(&insns[i], a, off, size, k); ok {
			return false
		}
	}
	return true
}

// pick chooses the accessing instruction among insns.
func (ag *Group) pick(b *dwarfmap.Batch, inst dwarfmap.Instance, a debugklasy.Access, base baseexpr.SVal, insns []x86code.Insn, off, size, k int64) *exactHit {
	type cand struct {
		in  x86code.Insn
		acc x86code.MemAccess
	}
	var cs []cand
	for i := range insns {
		if acc, ok := candidate(&insns[i], a, off, size, k); ok {
			cs = append(cs, cand{insns[i], acc})
		}
	}
	if len(cs) > 1 && base.Kind == baseexpr.SVVar {
		// Prefer the instructions whose base register holds the base
		// variable there.
		var in []cand
		for _, c := range cs {
			vl, ok, err := varAt(b, c.in.PC, base.Name, scopeOf(inst))
			if err != nil || !ok {
				continue
			}
			if reg, ok := ctxvalue.RegLocation(vl.Expr); ok && reg == x86code.DWARFReg(c.acc.Mem.Base) {
				in = append(in, c)
			}
		}
		if len(in) > 0 {
			cs = in
		}
	}
	targetOK := func(c cand) bool {
		// The base register holds the dynamic part of the base when the
		// index (if any) is the member's own subscript.
		return c.acc.Mem.Base != x86asm.RIP
	}
	if len(cs) == 1 {
		c := cs[0]
		if c.acc.Branch && ag.Timing == joinpoint.After {
			return nil // after a call through the member: the callee runs first
		}
		return &exactHit{before: c.in, after: c.in, acc: c.acc, k: k, targetOK: targetOK(c)}
	}
	if a.Mode == debugklasy.ReadWrite && len(cs) == 2 && cs[0].acc.Kind == x86code.Load && cs[1].acc.Kind == x86code.Store &&
		cs[0].acc.Mem == cs[1].acc.Mem {
		// x += y as a load and a store: before the load, after the store.
		return &exactHit{before: cs[0].in, after: cs[1].in, acc: cs[0].acc, k: k, targetOK: targetOK(cs[0])}
	}
	return nil
}

// placeExact adds the join point at the accessing instruction.
func (ag *Group) placeExact(b *dwarfmap.Batch, s *site, inst dwarfmap.Instance, lc *linecode.LineCode, a debugklasy.Access, ex *exactHit, via string) {
	jp := ag.newJP(s, inst, a)
	jp.Exact = true
	jp.Access.Via = via
	in := ex.before
	if ag.Timing == joinpoint.After {
		in = ex.after
		jp.Kind = joinpoint.KprobePost
	}
	var tgt *ctxvalue.Value
	if ex.targetOK {
		tgt = ctxvalue.RegValue(x86code.DWARFReg(ex.acc.Mem.Base), ex.k)
	}
	ag.finish(b, s, inst, a, jp, in.PC, hookSpan{lo: in.PC, hi: in.PC}, tgt)
}

// placeLine adds the line-level join points: one per basic block that
// holds an is_stmt row of the line.
func (ag *Group) placeLine(b *dwarfmap.Batch, s *site, inst dwarfmap.Instance, lc *linecode.LineCode, a debugklasy.Access, via string, cands []cand) {
	places, err := linecode.Places(b, lc)
	if err != nil {
		jp := ag.newJP(s, inst, a)
		jp.Skipped = "no code: " + err.Error()
		ag.Add(jp)
		return
	}
	for _, pl := range places {
		jp := ag.newJP(s, inst, a)
		jp.Access.Via = via
		addr := pl.Before
		if ag.Timing == joinpoint.After {
			addr = pl.After
			if ag.afterLast(b, s, inst, a, jp, pl, cands) {
				continue
			}
		}
		ag.finish(b, s, inst, a, jp, addr, hookSpan{lo: pl.Before, hi: pl.End, cands: cands}, nil)
	}
}

// afterLast places a line-tier after join point whose target is not
// known where the line's code ends (the variable's last use was on the
// line: DWARF drops or moves it right after) as a kprobe-post hook on
// the line's last instruction: the advice still runs right after the
// line's code, and the target is taken before that instruction, where
// DWARF still locates it. Only for advice whose one context value is
// the target (a local_var taken before the instruction could miss its
// write), and when the last instruction falls through (a call's post
// handler would run before the callee). true: jp is placed (at the
// line's end when the target is known there); false: place it as
// before.
func (ag *Group) afterLast(b *dwarfmap.Batch, s *site, inst dwarfmap.Instance, a debugklasy.Access, jp *joinpoint.JoinPoint, pl linecode.Place, cands []cand) bool {
	if ag.Target == nil || len(ag.Locals) > 0 || pl.After != pl.End {
		return false
	}
	span := hookSpan{lo: pl.Before, hi: pl.End, cands: cands}
	if ag.checkAddr(b, s, inst, pl.After) == "" {
		if args, skip, _ := ag.bind(b, s, inst, a, jp, pl.After, span, nil); skip == "" {
			// Known at the line's end: placed there, as finish
			// would, without binding it again.
			jp.Addr, jp.Args = pl.After, args
			ag.Add(jp)
			return true
		}
	}
	ins := b.Insns(pl.Before, pl.End)
	if len(ins) == 0 {
		return false
	}
	last := ins[len(ins)-1]
	if last.End() != pl.End || last.Inst.Op == x86asm.CALL || x86code.EndsBlock(&last.Inst) || ag.checkAddr(b, s, inst, last.PC) != "" {
		return false
	}
	args, skip, _ := ag.bind(b, s, inst, a, jp, last.PC, span, nil)
	if skip != "" {
		return false
	}
	jp.Addr, jp.Kind, jp.Args = last.PC, joinpoint.KprobePost, args
	ag.Add(jp)
	return true
}

// nearest applies KLASY's rule to a line without code in this copy: the
// nearest lines before and after it with code in the copy, if one's
// address and the other's lie in one basic block, stand in for it: the
// one before for before advice, the one after for after advice.
func (ag *Group) nearest(b *dwarfmap.Batch, s *site, inst dwarfmap.Instance) (before, after uint64, line int, err error) {
	fids := b.Files(s.file)
	if len(fids) == 0 {
		return 0, 0, 0, fmt.Errorf("%s has no rows in the line table", s.file)
	}
	byLine := map[int][]uint64{}
	for _, r := range inst.Ranges {
		for _, row := range b.RowsIn(r[0], r[1]) {
			if slices.Contains(fids, row.File) && row.Line != 0 {
				byLine[int(row.Line)] = append(byLine[int(row.Line)], row.Addr)
			}
		}
	}
	const maxFallback = 10
	lb, la := 0, 0
	for l := range byLine {
		if l < s.line && s.line-l <= maxFallback && l > lb {
			lb = l
		}
		if l > s.line && l-s.line <= maxFallback && (la == 0 || l < la) {
			la = l
		}
	}
	if lb == 0 || la == 0 {
		return 0, 0, 0, fmt.Errorf("no lines with code within %d lines on both sides", maxFallback)
	}
	for _, x := range byLine[lb] {
		code, err := b.Code(x)
		if err != nil {
			continue
		}
		_, hi := code.Block(x)
		for _, y := range byLine[la] {
			if y > x && y < hi {
				line = lb
				if ag.Timing == joinpoint.After {
					line = la
				}
				return x, y, line, nil
			}
		}
	}
	return 0, 0, 0, fmt.Errorf("lines %d and %d, the nearest with code, are not in one basic block", lb, la)
}

// finish checks the hook address, binds the context values and adds the
// join point. tgt is the target's value at an exact hook (nil: work it
// out from DWARF at addr).
func (ag *Group) finish(b *dwarfmap.Batch, s *site, inst dwarfmap.Instance, a debugklasy.Access, jp *joinpoint.JoinPoint, addr uint64, span hookSpan, tgt *ctxvalue.Value) {
	jp.Addr = addr
	if why := ag.checkAddr(b, s, inst, addr); why != "" {
		jp.Skipped = why
		ag.Add(jp)
		return
	}
	args, skip, inScope := ag.bind(b, s, inst, a, jp, addr, span, tgt)
	if !inScope {
		return // local_var: not a join point here
	}
	jp.Args, jp.Skipped = args, skip
	ag.Add(jp)
}

// checkAddr says why a hook cannot go at addr ("" if it can).
func (ag *Group) checkAddr(b *dwarfmap.Batch, s *site, inst dwarfmap.Instance, addr uint64) string {
	return linecode.CheckHookAddr(b, s.im, inst.Host, addr)
}
