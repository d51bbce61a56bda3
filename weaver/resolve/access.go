package resolve

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"golang.org/x/arch/x86/x86asm"

	"github.com/klasy/klasy/aspect"
	"github.com/klasy/klasy/debugklasy"
	"github.com/klasy/klasy/dwarfmap"
	"github.com/klasy/klasy/internal/suggest"
	"github.com/klasy/klasy/pattern"
	"github.com/klasy/klasy/weaver/baseexpr"
	"github.com/klasy/klasy/weaver/ctxvalue"
	"github.com/klasy/klasy/weaver/joinpoint"
	"github.com/klasy/klasy/weaver/resolve/linecode"
	"github.com/klasy/klasy/x86code"
)

// Access join points (dissertation §4.2–4.3). The plugin's records
// (.debug_klasy) say where each struct member is accessed: a source line
// of a function. The line's code is found in every copy of that
// function — its out-of-line bodies and every copy inlined elsewhere —
// through the line table, and each copy gets a join point in one of
// three tiers:
//
//   - exact: the line's instructions are decoded and exactly one
//     accesses the member: its memory operand's displacement falls on the
//     member (for a bitfield, on its storage unit), its kind fits the
//     access (a load for a read, a store for a write, a read-modify-write
//     for ++ and +=, lea for &), and when several do, the one whose base
//     register holds the base variable there (its DWARF location). before
//     advice runs before that instruction, after advice right after it,
//     with the context values taken before it;
//   - line: the line's is_stmt address(es), one per basic block, for
//     before advice, and the address after the line's last instruction in
//     the same block for after advice. A line without code in a copy
//     falls back to its statement's line (a multi-line condition, as the
//     plugin records it) and then to KLASY's nearest-line rule (§4.3.2);
//   - skipped, with the reason.
//
// within_function(G) selects the accesses written in G and those in
// code inlined into G: an inlined copy counts for the function the plugin
// recorded and for the out-of-line function its code landed in.
// within_file(F) likewise selects accesses written in F (the hook file
// of the record, or its function's file) and those whose code landed in
// a function of F. local_var(v, x) selects only the join points where v
// is in scope.

// ModuleImage is a module built with the plugin, loaded in the target
// kernel, whose join points a resolve finds besides the kernel's.
type ModuleImage struct {
	Name string // as lsmod shows it
	Path string
	X    *dwarfmap.Index
	// Refused says why the running kernel would refuse a hook at an
	// address of the .ko (nil: nothing known).
	Refused joinpoint.Refusal
}

// accessGroup resolves an AND-group of access(...) designators.
func (r *resolver) accessGroup(n int, pc *aspect.Pointcut, g []*aspect.Term, timing joinpoint.Timing) error {
	ag := &accessGroup{r: r, n: n, pc: pc, timing: timing, params: joinpoint.PointcutParams(pc)}
	var accs []*aspect.Access
	for _, t := range g {
		switch {
		case t.Access != nil:
			accs = append(accs, t.Access)
		case t.WithinFile != nil:
			p, err := pattern.Compile(strings.Join(t.WithinFile.Path.Parts, ""), pattern.Pointcut)
			if err != nil {
				return r.errAt(pc, t.Pos.Offset, "%v", err)
			}
			ag.files = append(ag.files, p)
		case t.WithinFunction != nil:
			p, err := t.WithinFunction.Func.Pattern()
			if err != nil {
				return r.errAt(pc, t.Pos.Offset, "%v", err)
			}
			ag.funcs = append(ag.funcs, p)
		case t.Target != nil:
			ag.target = t.Target
		case t.LocalVar != nil:
			ag.locals = append(ag.locals, t.LocalVar)
		case t.Xflow != nil:
			return r.errAt(pc, t.Pos.Offset, "xflow(...) left untranslated: Plan resolves an aspect after weaver.Translate turned its flows into plain advice")
		default:
			return r.errAt(pc, t.Pos.Offset, "%s cannot be woven at access join points", t.Designator())
		}
	}
	var pats []*pattern.Member
	for _, a := range accs {
		p, err := pattern.CompileMember(a.Struct.Value+"."+a.Member.Value, pattern.Pointcut)
		if err != nil {
			return r.errAt(pc, a.Pos.Offset, "%v", err)
		}
		pats = append(pats, p)
	}
	var recs []accessRec
	var noTable []*linecode.Image
	for _, im := range r.images() {
		as, err := im.Accesses(pats)
		if errors.Is(err, debugklasy.ErrNoSection) {
			noTable = append(noTable, im)
			continue
		}
		if err != nil {
			return fmt.Errorf("reading the member accesses of %s: %w", im.Label(), err)
		}
		for _, a := range as {
			recs = append(recs, accessRec{im: im, a: a})
		}
	}
	before := len(r.jps)
	// An image built without the plugin has no records: its accesses
	// are inferred from its DWARF and code (inferred.go), once a struct
	// and member named without wildcards are known to exist.
	if len(noTable) > 0 {
		for _, a := range accs {
			if err := r.checkMember(pc, a); err != nil {
				return err
			}
		}
	}
	inferred := 0
	for _, im := range noTable {
		n, err := ag.inferredGroup(im, pats)
		if err != nil {
			return err
		}
		inferred += n
	}
	if len(recs) == 0 && inferred == 0 {
		for _, a := range accs {
			if err := r.checkMember(pc, a); err != nil {
				return err
			}
		}
	}
	if err := ag.resolve(recs); err != nil {
		return err
	}
	if len(r.jps) == before {
		group := (&aspect.Expr{Or: &aspect.Or{And: []*aspect.And{{Terms: g}}}}).String()
		r.warn(pc, g[0].Pos.Offset, "%s selects no join point: %s", group, ag.nothingBecause(len(recs)+inferred, len(noTable) > 0))
	}
	return nil
}

// nothingBecause says why a group selected nothing.
func (ag *accessGroup) nothingBecause(nrecs int, inferred bool) string {
	switch {
	case nrecs == 0 && inferred:
		return "no access of that member is recorded by the plugin or found in the code (inferred from DWARF and the instructions, which leave out what they cannot decide)"
	case nrecs == 0:
		return "no access of that member is recorded in the code the plugin compiled"
	case ag.selected == 0:
		return fmt.Sprintf("none of the %d accesses recorded is in the functions and files the pointcut names", nrecs)
	}
	return fmt.Sprintf("of the %d copies of the code that hold the accesses, none has the local_var(...) variables in scope", ag.selected)
}

// images lists the kernel and the modules.
func (r *resolver) images() []*linecode.Image {
	if r.imgs == nil {
		r.imgs = []*linecode.Image{{X: r.x, Refused: r.opt.Refused}}
		for _, m := range r.opt.Modules {
			r.imgs = append(r.imgs, &linecode.Image{Module: m.Name, X: m.X, Refused: m.Refused})
		}
	}
	return r.imgs
}

func (r *resolver) warn(pc *aspect.Pointcut, off int, format string, args ...any) {
	if r.opt.Warn != nil {
		r.opt.Warn(joinpoint.Warning{Pos: r.f.Position(pc.Text.Offset(off)), Msg: fmt.Sprintf(format, args...)})
	}
}

// checkMember fails when access(S.M) names, without wildcards, a struct
// or a member that no image's DWARF has, with the nearest names.
func (r *resolver) checkMember(pc *aspect.Pointcut, a *aspect.Access) error {
	st, stWild := a.Struct.Value, strings.Contains(a.Struct.Value, "%")
	if stWild {
		return nil
	}
	var names []string
	for _, im := range r.images() {
		b, err := im.Batch()
		if err != nil {
			return err
		}
		l, err := b.Struct(st)
		if err == nil && l != nil {
			if strings.Contains(a.Member.Value, "%") {
				return nil
			}
			var members []string
			for _, m := range l.Members {
				if m.Name == a.Member.Value {
					return nil
				}
				if m.Name != "" {
					members = append(members, m.Name)
				}
			}
			return r.errAt(pc, a.Member.Pos.Offset, "access(%s.%s): %s %s has no member %s%s", st, a.Member.Value, l.Kind, st, a.Member.Value, suggest.DidYouMean(a.Member.Value, members))
		}
		names = append(names, b.StructNames()...)
	}
	return r.errAt(pc, a.Struct.Pos.Offset, "access(%s.%s): no struct or union %s in %s%s", st, a.Member.Value, st, r.images()[0].Label(), suggest.DidYouMean(st, names))
}

// accessRec is one record of one image.
type accessRec struct {
	im *linecode.Image
	a  debugklasy.Access
}

// accessGroup is the state of one AND-group being resolved.
type accessGroup struct {
	r        *resolver
	n        int
	pc       *aspect.Pointcut
	timing   joinpoint.Timing
	params   []string
	files    []*pattern.Pattern
	funcs    []*pattern.Pattern
	target   *aspect.Target
	locals   []*aspect.LocalVar
	selected int // copies of code selected before local_var
}

// site is the accesses of one function on one line of one image.
type site struct {
	im   *linecode.Image
	file string
	line int
	fn   debugklasy.Function
	accs []debugklasy.Access
}

func (ag *accessGroup) resolve(recs []accessRec) error {
	var sites []*site
	type key struct {
		im   *linecode.Image
		file string
		line int
		fn   debugklasy.Function
	}
	idx := map[key]*site{}
	for _, rc := range recs {
		k := key{rc.im, rc.a.File, rc.a.Line, rc.a.Function}
		s := idx[k]
		if s == nil {
			s = &site{im: rc.im, file: rc.a.File, line: rc.a.Line, fn: rc.a.Function}
			idx[k] = s
			sites = append(sites, s)
		}
		s.accs = append(s.accs, rc.a)
	}
	for _, s := range sites {
		if err := ag.site(s); err != nil {
			return err
		}
	}
	return nil
}

// matchAny reports whether every pattern matches one of names: a path
// (MatchPath) or, with funcs, a function name.
func matchAny(ps []*pattern.Pattern, funcs bool, names ...string) bool {
	for _, p := range ps {
		ok := false
		for _, n := range names {
			ok = ok || n != "" && (funcs && p.Match(n) || !funcs && pattern.MatchPath(p, n))
		}
		if !ok {
			return false
		}
	}
	return true
}

// site finds the join points of one site in every copy of its function.
func (ag *accessGroup) site(s *site) error {
	b, err := s.im.Batch()
	if err != nil {
		return err
	}
	insts := b.Instances(s.fn.Name, s.fn.File)
	any := false
	for _, inst := range insts {
		if !matchAny(ag.funcs, true, s.fn.Name, inst.Host) || !matchAny(ag.files, false, s.file, s.fn.File, inst.HostFile) {
			continue
		}
		any = true
		ag.selected++
		lc := ag.lineCode(b, s, inst, s.line)
		for _, a := range s.accs {
			ag.access(b, s, inst, lc, a)
		}
	}
	if !any && len(insts) == 0 && matchAny(ag.funcs, true, s.fn.Name) && matchAny(ag.files, false, s.file, s.fn.File) {
		// The compiler removed every copy of the function (an inline
		// function inlined nowhere in live code, a discarded section).
		for _, a := range s.accs {
			jp := ag.newJP(s, dwarfmap.Instance{Name: s.fn.Name}, a)
			jp.Skipped = fmt.Sprintf("no code: %s has no out-of-line body or inlined copy in %s (the compiler removed it, or it is in code the linker discarded)", s.fn.Name, s.im.Label())
			ag.r.add(jp)
		}
	}
	return nil
}

type lineRowsKey struct {
	im   *linecode.Image
	file string
	line int
}

type hostLineKey struct {
	im   *linecode.Image
	file string
	line int
	host uint64
}

// hostLine returns the code of file:line in the out-of-line function
// whose ranges are host, read once per resolve.
func (r *resolver) hostLine(b *dwarfmap.Batch, im *linecode.Image, file string, line int, host [][2]uint64) *linecode.HostLine {
	if len(host) == 0 {
		return nil
	}
	k := hostLineKey{im, file, line, host[0][0]}
	if hl, ok := r.hostLines[k]; ok {
		return hl
	}
	fids := b.Files(file)
	hl := &linecode.HostLine{}
	rk := lineRowsKey{im, file, line}
	rows, ok := r.lineRows[rk]
	if !ok {
		rows = b.LineRows(file, line)
		r.lineRows[rk] = rows
	}
	// The rows in the host's ranges, found by address.
	for _, row := range linecode.RowsInRanges(rows, host) {
		end, ok := linecode.InRanges(host, row.Addr)
		if !ok {
			continue
		}
		if n := len(hl.Rows); n > 0 && hl.Rows[n-1].Addr == row.Addr {
			hl.Rows[n-1].Flags |= row.Flags & dwarfmap.RowStmt
			continue
		}
		next, ok := b.NextRowAddr(row.Addr)
		if !ok || next > end {
			next = end
		}
		seg := [2]uint64{row.Addr, next}
		// The last row at an address owns the instructions from there.
		at := b.RowsIn(row.Addr, row.Addr+1)
		owned := seg
		if last := at[len(at)-1]; !slices.Contains(fids, last.File) || int(last.Line) != line {
			owned = [2]uint64{}
		}
		hl.Rows = append(hl.Rows, row)
		hl.Owned = append(hl.Owned, owned)
		hl.Owner = append(hl.Owner, seg)
	}
	r.hostLines[k] = hl
	return hl
}

// lineCode is the part of the line's code in its host function that
// lies in copy inst: the rows in the copy's ranges, and the owned
// instructions in them (the rows of two copies inlined side by side are
// shared: a row of the line may start in one copy and cover code of
// both).
func (ag *accessGroup) lineCode(b *dwarfmap.Batch, s *site, inst dwarfmap.Instance, line int) *linecode.LineCode {
	host := inst.HostRanges
	if len(host) == 0 {
		host = inst.Ranges
	}
	hl := ag.r.hostLine(b, s.im, s.file, line, host)
	return hl.Code(line, func(addr uint64) bool { _, ok := linecode.InRanges(inst.Ranges, addr); return ok }, inst.Ranges)
}

// newJP is a join point of access a in copy inst, not placed yet.
func (ag *accessGroup) newJP(s *site, inst dwarfmap.Instance, a debugklasy.Access) *joinpoint.JoinPoint {
	jp := &joinpoint.JoinPoint{Advice: ag.n, Timing: ag.timing, Kind: joinpoint.Kprobe, Module: s.im.Module,
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
func (ag *accessGroup) access(b *dwarfmap.Batch, s *site, inst dwarfmap.Instance, lc *linecode.LineCode, a debugklasy.Access) {
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
		if ag.timing == joinpoint.After {
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
		ag.r.add(jp)
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
func (ag *accessGroup) baseOf(b *dwarfmap.Batch, inst dwarfmap.Instance, a debugklasy.Access, addr uint64) (baseexpr.SVal, error) {
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
func (ag *accessGroup) exact(b *dwarfmap.Batch, s *site, inst dwarfmap.Instance, lc *linecode.LineCode, a debugklasy.Access) (hit *exactHit, cands []cand) {
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
	acc, ok := x86code.Access(&in.Inst)
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

func (ag *accessGroup) noCandidate(insns []x86code.Insn, a debugklasy.Access, off, size, k int64) bool {
	for i := range insns {
		if _, ok := candidate(&insns[i], a, off, size, k); ok {
			return false
		}
	}
	return true
}

// pick chooses the accessing instruction among insns.
func (ag *accessGroup) pick(b *dwarfmap.Batch, inst dwarfmap.Instance, a debugklasy.Access, base baseexpr.SVal, insns []x86code.Insn, off, size, k int64) *exactHit {
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
		if c.acc.Branch && ag.timing == joinpoint.After {
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
func (ag *accessGroup) placeExact(b *dwarfmap.Batch, s *site, inst dwarfmap.Instance, lc *linecode.LineCode, a debugklasy.Access, ex *exactHit, via string) {
	jp := ag.newJP(s, inst, a)
	jp.Exact = true
	jp.Access.Via = via
	in := ex.before
	if ag.timing == joinpoint.After {
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
func (ag *accessGroup) placeLine(b *dwarfmap.Batch, s *site, inst dwarfmap.Instance, lc *linecode.LineCode, a debugklasy.Access, via string, cands []cand) {
	places, err := linecode.Places(b, lc)
	if err != nil {
		jp := ag.newJP(s, inst, a)
		jp.Skipped = "no code: " + err.Error()
		ag.r.add(jp)
		return
	}
	for _, pl := range places {
		jp := ag.newJP(s, inst, a)
		jp.Access.Via = via
		addr := pl.Before
		if ag.timing == joinpoint.After {
			addr = pl.After
		}
		ag.finish(b, s, inst, a, jp, addr, hookSpan{lo: pl.Before, hi: pl.End, cands: cands}, nil)
	}
}

// nearest applies KLASY's rule to a line without code in this copy: the
// nearest lines before and after it with code in the copy, if one's
// address and the other's lie in one basic block, stand in for it: the
// one before for before advice, the one after for after advice.
func (ag *accessGroup) nearest(b *dwarfmap.Batch, s *site, inst dwarfmap.Instance) (before, after uint64, line int, err error) {
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
				if ag.timing == joinpoint.After {
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
func (ag *accessGroup) finish(b *dwarfmap.Batch, s *site, inst dwarfmap.Instance, a debugklasy.Access, jp *joinpoint.JoinPoint, addr uint64, span hookSpan, tgt *ctxvalue.Value) {
	jp.Addr = addr
	if why := ag.checkAddr(b, s, inst, addr); why != "" {
		jp.Skipped = why
		ag.r.add(jp)
		return
	}
	args, skip, inScope := ag.bind(b, s, inst, a, jp, addr, span, tgt)
	if !inScope {
		return // local_var: not a join point here
	}
	jp.Args, jp.Skipped = args, skip
	ag.r.add(jp)
}

// checkAddr says why a hook cannot go at addr ("" if it can).
func (ag *accessGroup) checkAddr(b *dwarfmap.Batch, s *site, inst dwarfmap.Instance, addr uint64) string {
	return linecode.CheckHookAddr(b, s.im, inst.Host, addr)
}
