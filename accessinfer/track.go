package accessinfer

import (
	"debug/dwarf"
	"slices"
	"sort"
	"strings"

	"golang.org/x/arch/x86/x86asm"

	"github.com/klasy/klasy/accessinfer/dwscan"
	"github.com/klasy/klasy/accessinfer/members"
	"github.com/klasy/klasy/accessinfer/regs"
	"github.com/klasy/klasy/x86code"
)

// vkind is what tracking knows of a register's or a stack slot's value.
type vkind uint8

const (
	vNone      vkind = iota
	vPtr             // the address of an object of type t, plus k
	vStack           // the stack pointer at the function's entry, plus k
	vConst           // the constant k (an address, maybe)
	vPercpuOff       // this CPU's (or some CPU's) per-CPU offset
)

// val is copied at every instruction (a state holds 16): 24 bytes,
// and no pointers (the type, the provenance and the alternatives by
// number), so that copying states needs no write barriers and the
// collector has nothing in them to scan.
type val struct {
	kind   vkind
	percpu bool // vConst: a per-CPU offset was added (per_cpu_ptr, this_cpu_ptr)
	// deref: a vPtr loaded from a global or per-CPU pointer variable
	// (current is current_task's value), not a variable's own value.
	deref bool
	t     uint32 // the type's members.Type.ID in the worker's types
	k     int64
	why   uint32 // where the type came from (provenance): worker.whys
	// alts are other typings of a vPtr that DWARF gives at once (a
	// pointer and the container_of of it in one register), an index
	// into fnTrack.alts; 0: none.
	alts uint32
}

// typ is v's type.
func (ft *fnTrack) typ(v val) *members.Type { return ft.w.ts.ByID(v.t) }

// altv is v's other typings.
func (ft *fnTrack) altv(v val) []val { return ft.alts[v.alts] }

// same reports whether v and o are the same value (types by Key).
func (ft *fnTrack) same(v, o val) bool {
	if v.kind != o.kind || v.k != o.k || v.percpu != o.percpu {
		return false
	}
	if v.kind != vPtr {
		return true
	}
	if !ft.sameType(v.t, o.t) || len(ft.alts[v.alts]) != len(ft.alts[o.alts]) {
		return false
	}
	for i, a := range ft.alts[v.alts] {
		if !ft.same(a, ft.alts[o.alts][i]) {
			return false
		}
	}
	return true
}

// sameType reports whether types a and b (IDs) have one Key.
func (ft *fnTrack) sameType(a, b uint32) bool {
	return a == b || ft.typ(val{t: a}).Key() == ft.typ(val{t: b}).Key()
}

// slot is a stack slot holding a value, by its offset from the stack
// pointer at the function's entry.
type slot struct {
	off int64
	v   val
}

// state is what is known before an instruction: the 16 general
// registers (x86asm order: rax, rcx, rdx, rbx, rsp, rbp, rsi, rdi,
// r8..r15) and the stack slots written with a tracked value.
type state struct {
	regs  [16]val
	slots []slot
}

// copyFrom makes s a copy of o, reusing s's slots array.
func (s *state) copyFrom(o *state) {
	s.regs = o.regs
	s.slots = append(s.slots[:0], o.slots...)
}

func (s *state) slot(off int64) (val, bool) {
	i := sort.Search(len(s.slots), func(i int) bool { return s.slots[i].off >= off })
	if i < len(s.slots) && s.slots[i].off == off {
		return s.slots[i].v, true
	}
	return val{}, false
}

// setSlot writes n bytes at off: an 8-byte value is kept, anything else
// forgets the slots it overlaps.
// The state owns its slots (copyFrom copies them): they change in place.
func (s *state) setSlot(off int64, n int64, v val) {
	if n == 8 && v.kind != vNone {
		// DWARF's facts set a slot at every instruction of a
		// variable's range: most often to what it holds already.
		i := sort.Search(len(s.slots), func(i int) bool { return s.slots[i].off >= off })
		if i < len(s.slots) && s.slots[i].off == off && s.slots[i].v == v {
			return // slots never overlap: nothing else to forget
		}
	}
	out := s.slots[:0]
	for _, sl := range s.slots {
		if sl.off+8 <= off || sl.off >= off+n {
			out = append(out, sl)
		}
	}
	for i := len(out); i < len(s.slots); i++ {
		s.slots[i] = slot{} // no stale pointers for the collector
	}
	if n == 8 && v.kind != vNone {
		i := sort.Search(len(out), func(i int) bool { return out[i].off >= off })
		out = append(out, slot{})
		copy(out[i+1:], out[i:])
		out[i] = slot{off, v}
	}
	s.slots = out
}

// merge keeps what all predecessors agree on: a type seen on one path
// only is not a type at the join (perf's path walk picks one path
// instead; a join that keeps only agreements never names a member from
// a type that one of the paths into it does not have).
func (s *state) merge(o *state, ft *fnTrack) bool {
	changed := false
	for i := range s.regs {
		if s.regs[i].kind != vNone && !ft.same(s.regs[i], o.regs[i]) {
			s.regs[i] = val{}
			changed = true
		}
	}
	out := s.slots[:0] // s owns its slots: filtered in place
	for _, sl := range s.slots {
		if v, ok := o.slot(sl.off); ok && ft.same(v, sl.v) {
			out = append(out, sl)
		} else {
			changed = true
		}
	}
	clear(s.slots[len(out):])
	s.slots = out
	return changed
}

func (s *state) equal(o *state, ft *fnTrack) bool {
	for i := range s.regs {
		if s.regs[i].kind != o.regs[i].kind || (s.regs[i].kind != vNone && !ft.same(s.regs[i], o.regs[i])) {
			return false
		}
	}
	if len(s.slots) != len(o.slots) {
		return false
	}
	for i := range s.slots {
		if s.slots[i].off != o.slots[i].off || !ft.same(s.slots[i].v, o.slots[i].v) {
			return false
		}
	}
	return true
}

const rsp = 4

// fact is a register (or stack slot) that DWARF says holds a variable
// at an instruction.
type fact struct {
	reg   int   // index; -1 for a stack slot
	slot  int64 // entry-relative offset of the slot
	v     val
	depth int
}

// stackObj is a struct (or array) variable in the function's frame.
type stackObj struct {
	off    int64 // entry-relative
	t      *members.Type
	name   string
	ranges [][2]uint64
}

// constPtr is a pointer variable whose value DWARF gives as a constant
// address over [lo, hi): GCC propagated it (tk_setup_internals(tk, ..)
// called only with &tk_core.timekeeper).
type constPtr struct {
	addr   uint64
	t      *members.Type
	name   string
	lo, hi uint64
}

// constVar finds the constant pointer variable in scope at pc whose
// object holds address a. The source may name the bytes through it
// (tk->xtime_sec) or through the global (tk_core.timekeeper.xtime_sec),
// the same instructions: the plugin records the global's levels above
// the variable's type only for the second. The variable's typing gives
// the levels both readings share.
func (ft *fnTrack) constVar(a, pc uint64) (object, bool) {
	for _, c := range ft.consts {
		if pc >= c.lo && pc < c.hi && a >= c.addr && a < c.addr+uint64(max(c.t.Size, 0)) {
			return object{t: c.t.ID(), off: int64(a - c.addr), why: ft.w.why("var ", c.name, ""), reg: -1}, true
		}
	}
	return object{}, false
}

// fnTrack is one function under analysis.
type fnTrack struct {
	w      *worker
	f      *dwscan.Function
	insns  []x86code.Insn
	g      *x86code.Graph
	graph  x86code.Graph // g's memory, reused from one function to the next
	arcs   x86code.Arcs  // g's arcs, and run's blocks' instructions
	rng    [][2]int
	objBuf []object      // objects' result
	got    []found       // lookObjs' buffer
	moves  [2][][2]int64 // copyMoves' [0], storesBeside's [1] results until their next call
	accs   []Access      // run's arena: its free part
	// facts[i] are the facts at instruction i (factsAt): where in pool
	// their indexes into fs start, and how many; no slice headers, so
	// setting them needs no write barriers.
	facts  [][2]int32
	fs     []fact
	spans  [][2]int32 // of fs[k]: instructions [i, j)
	counts []int32
	pool   []int32
	// sitesAt[i] are the inlined copies holding instruction i (indexes
	// into f.inlines), worked out at the first access emitted.
	free       []*state          // states no block holds any more
	alts       [][]val           // val.alts' typings, this function's (0: none)
	chainSets  [][]members.Chain // memResult.chains', this function's
	sitesBuilt bool
	sitesAt    [][2]int32 // in sitePool, as facts in pool (sitesOf)
	siteCounts []int32
	sitePool   []int32
	// callsAt's last answer, and the copies it was for.
	lastSites []int32
	lastCalls []CallSite
	applied   []appliedFacts
	gen       uint32 // applied's entries of this function
	// memAt[i] is instruction i's entry in looked, -1 if it has no
	// memory operand.
	memAt  []int32
	looked []lookEntry
	objs   []stackObj
	consts []constPtr
	// blockOf[i] is the block holding instruction i; copies[i] caches
	// copyAt(i): 0 not known yet, 1 no, 2 yes.
	index   x86code.Index
	blockOf []int32
	decoded [][]x86code.Insn // function's, by range
	dec     x86code.Decoder  // the worker's, its templates kept
	runBufs runBufs
	copies  []int8
	// named are the struct types the function names through a pointer
	// (its variables', its inlined copies' parameters'), worked out at
	// the first access that asks.
	named map[members.Key]bool
}

// factsAt are the indexes into fs of the facts at instruction i.
func (ft *fnTrack) factsAt(i int) []int32 {
	f := ft.facts[i]
	return ft.pool[f[0] : f[0]+f[1]]
}

// insnIndex is the index of the first instruction at pc or after.
func (ft *fnTrack) insnIndex(pc uint64) int { return ft.index.At(pc) }

// reset readies ft, and the buffers it keeps, for function f.
func (ft *fnTrack) reset(w *worker, f *dwscan.Function) {
	ft.w, ft.f, ft.g = w, f, nil
	ft.sitesBuilt = false
	ft.lastCalls = nil
	ft.named = nil
	clear(ft.alts)
	ft.alts = append(ft.alts[:0], nil)
	clear(ft.chainSets)
	ft.chainSets = append(ft.chainSets[:0], nil)
	clear(ft.fs)
	ft.fs = ft.fs[:0]
	ft.spans = ft.spans[:0]
	clear(ft.objs)
	ft.objs = ft.objs[:0]
	clear(ft.consts)
	ft.consts = ft.consts[:0]
}

// runBufs are run's arrays, by block, reused from one function to
// the next.
type runBufs struct {
	order, post, pos, uses []int
	seen, dirty            []bool
	outs                   []*state
	pats                   []map[int]members.Bits
	skips                  []map[int]bool
}

// grow returns s with length n, reusing its array when it is large
// enough; the elements are zero.
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n, n+n/4)
	}
	s = s[:n]
	clear(s)
	return s
}

func (ft *fnTrack) buildFacts() {
	ts := ft.w.ts
	n := len(ft.insns)
	ft.facts = grow(ft.facts, n)
	defer func() {
		// One array for all the instructions' lists.
		ft.counts = grow(ft.counts, n)
		total := 0
		for _, sp := range ft.spans {
			for i := sp[0]; i < sp[1]; i++ {
				ft.counts[i]++
			}
			total += int(sp[1] - sp[0])
		}
		ft.pool = grow(ft.pool, total)
		at := int32(0)
		for i, c := range ft.counts {
			ft.facts[i] = [2]int32{at, 0}
			at += c
		}
		for k, sp := range ft.spans {
			for i := sp[0]; i < sp[1]; i++ {
				f := &ft.facts[i]
				ft.pool[f[0]+f[1]] = int32(k)
				f[1]++
			}
		}
	}()
	// An entry of applied is this function's only when its gen is
	// ft.gen: nothing to reset at each instruction (two passes over all
	// of them, with the collector's barriers, cost more than prepare).
	ft.gen++
	if cap(ft.applied) < n {
		ft.applied = make([]appliedFacts, n, n+n/4)
	}
	ft.applied = ft.applied[:n]
	ft.memAt = grow(ft.memAt, n)
	clear(ft.looked)
	ft.looked = ft.looked[:0]
	for i := range ft.insns {
		ft.memAt[i] = -1
		if acc, ok := ft.insns[i].Access(); ok {
			ft.memAt[i] = int32(len(ft.looked))
			ft.looked = append(ft.looked, lookEntry{acc: acc})
		}
	}
	for vi := range ft.f.Vars {
		v := &ft.f.Vars[vi]
		t := ts.Get(v.Type)
		if t == nil {
			continue
		}
		var pv val
		obj := false
		switch {
		case t.Kind == members.Ptr:
			p := ts.Pointee(t)
			if !members.Useful(p) {
				continue
			}
			pv = val{kind: vPtr, t: p.ID(), why: ft.w.why("var ", v.Name, "")}
		case t.Kind == members.Struct || t.Kind == members.Union || t.Kind == members.Array:
			obj = true
		default:
			continue
		}
		scope := v.Scope
		if scope == nil {
			scope = ft.f.Ranges
		}
		for _, p := range v.Pieces {
			w := dwscan.Describe(p.Expr)
			if w.Kind == dwscan.LocNone || w.Kind == dwscan.LocAddr || (w.Kind == dwscan.LocConst && obj) {
				continue
			}
			for _, sr := range scope {
				lo, hi := max(p.Lo, sr[0]), min(p.Hi, sr[1])
				if p.Lo == 0 && p.Hi == dwscan.Everywhere {
					lo, hi = sr[0], sr[1]
				}
				if lo >= hi {
					continue
				}
				if w.Kind == dwscan.LocConst {
					if !v.Param || v.Depth != 0 {
						// A local or an inlined copy's parameter: the
						// function itself took the address (tk =
						// &tk_core.timekeeper; read_seqcount_begin(&tk_core.seq)),
						// which the plugin records.
						continue
					}
					ft.consts = append(ft.consts, constPtr{addr: uint64(w.Off), t: ft.typ(pv), name: v.Name, lo: lo, hi: hi})
					continue
				}
				if obj {
					if w.Kind == dwscan.LocFrame && ft.f.CFAFrame {
						ft.objs = append(ft.objs, stackObj{off: 8 + w.Off, t: t, name: v.Name, ranges: [][2]uint64{{lo, hi}}})
					}
					continue
				}
				fc := fact{reg: -1, v: pv, depth: v.Depth}
				switch w.Kind {
				case dwscan.LocReg:
					if w.Reg > 15 {
						continue
					}
					fc.reg = regs.FromDWARF[w.Reg]
				case dwscan.LocRegPlus:
					if w.Reg > 15 {
						continue
					}
					fc.reg = regs.FromDWARF[w.Reg]
					fc.v.k = -w.Off
				case dwscan.LocFrame:
					if !ft.f.CFAFrame {
						continue
					}
					fc.slot = 8 + w.Off
				}
				i, j := ft.insnIndex(lo), ft.insnIndex(hi)
				if i < j {
					ft.fs = append(ft.fs, fc)
					ft.spans = append(ft.spans, [2]int32{int32(i), int32(j)})
				}
			}
		}
	}
}

// apply sets what DWARF says at instruction i. A deeper scope wins
// over a variable of the same type; two variables of different types in
// one register (a pointer and its container_of, at one depth or in
// nested scopes) are both kept, as alternatives.
func (ft *fnTrack) apply(s *state, i int) {
	if ft.facts[i][1] == 0 {
		return
	}
	ap := &ft.applied[i]
	if ap.gen != ft.gen {
		ft.prepare(i)
	}
	rs := ap.regs
	if ap.from >= 0 {
		rs = ft.applied[ap.from].regs
	}
	for _, rv := range rs {
		s.regs[rv.reg] = rv.v
	}
	if sp := s.regs[rsp]; sp.kind == vStack {
		for _, k := range ft.factsAt(i) {
			if f := &ft.fs[k]; f.reg < 0 {
				s.setSlot(f.slot, 8, f.v)
			}
		}
	}
}

// regVal is a register DWARF gives a value at an instruction.
type regVal struct {
	reg   int
	v     val
	depth int
}

// appliedFacts are what apply sets at an instruction, worked out once.
type appliedFacts struct {
	gen  uint32 // done for the function of this fnTrack.gen
	regs []regVal
	// from >= 0: the same as instruction from's regs (not copied).
	from int32
}

// prepare works out what DWARF's facts at instruction i set. An
// instruction has a few: a list searched, not a table of 16 registers
// cleared for each.
func (ft *fnTrack) prepare(i int) {
	ap := &ft.applied[i]
	ap.gen, ap.from = ft.gen, -1
	clear(ap.regs) // an earlier function's
	ap.regs = ap.regs[:0]
	if i > 0 && ft.applied[i-1].gen == ft.gen && slices.Equal(ft.factsAt(i-1), ft.factsAt(i)) {
		// The same facts as the instruction before (a location covers
		// a range): the same registers, read from there.
		ap.from = int32(i - 1)
		if p := ft.applied[i-1].from; p >= 0 {
			ap.from = p
		}
		return
	}
	for _, k := range ft.factsAt(i) {
		f := &ft.fs[k]
		if f.reg < 0 {
			continue
		}
		j := 0
		for j < len(ap.regs) && ap.regs[j].reg != f.reg {
			j++
		}
		if j == len(ap.regs) {
			ap.regs = append(ap.regs, regVal{reg: f.reg, v: f.v, depth: f.depth})
			continue
		}
		b := &ap.regs[j]
		switch {
		case f.depth > b.depth:
			old := b.v
			b.v, b.depth = f.v, f.depth
			if !ft.sameType(old.t, f.v.t) {
				// An outer scope's variable of another type in the
				// same register (n, and va = rb_entry(n, ..) in a block
				// inside): both typings, as at one depth.
				for _, a := range append([]val{old}, ft.altv(old)...) {
					a.alts = 0
					ft.addAlt(b, a)
				}
			}
		case f.depth < b.depth && !ft.sameType(b.v.t, f.v.t), f.depth == b.depth && !ft.same(b.v, f.v):
			ft.addAlt(b, f.v)
		}
	}
}

// addAlt adds v to b's typings, once.
func (ft *fnTrack) addAlt(b *regVal, v val) {
	m := b.v
	m.alts = 0
	if ft.same(m, v) {
		return
	}
	as := ft.altv(b.v)
	for _, a := range as {
		if ft.same(a, v) {
			return
		}
	}
	ft.alts = append(ft.alts, append(as[:len(as):len(as)], v))
	b.v.alts = uint32(len(ft.alts) - 1)
}

// object is what a memory operand addresses, when tracking knows.
type object struct {
	t     uint32 // members.Type.ID
	off   int64  // of the access in t
	why   uint32 // worker.whys
	reg   int    // DWARF register of the base, -1 if none
	base  int64  // the object starts at reg + base
	stack bool   // a stack slot that is no known object
	frame bool   // a struct variable in the frame
	slot  int64
	// indexed: an index register adds to the address.
	indexed bool
	// percpuBase: the kernel's per-CPU offsets (isPercpuBase).
	percpuBase bool
	deref      bool // val.deref of the base
}

// objects resolves a memory operand in state s: one object, or one per
// typing DWARF gives the base register.
func (ft *fnTrack) objects(s *state, m x86asm.Mem, next uint64, pc uint64) []object {
	if m.Segment == 0 && m.Index != 0 && m.Scale == 1 {
		// base + index with scale 1: either may be the pointer.
		bi, _, ok1 := regs.Index(m.Base)
		ii, _, ok2 := regs.Index(m.Index)
		if ok1 && ok2 && s.regs[bi].kind != vPtr && s.regs[ii].kind == vPtr {
			m.Base, m.Index = m.Index, m.Base
		}
	}
	o, ok := ft.object(s, m, next, pc)
	if !ok {
		return nil
	}
	o.indexed = m.Index != 0
	out := append(ft.objBuf[:0], o) // valid until the next call
	if bi, _, ok := regs.Index(m.Base); ok && m.Base != x86asm.RIP && s.regs[bi].kind == vPtr {
		for _, alt := range ft.altv(s.regs[bi]) {
			ao := o
			ao.t, ao.off, ao.why, ao.base, ao.deref = alt.t, alt.k+m.Disp, alt.why, -alt.k, alt.deref
			out = append(out, ao)
		}
	}
	ft.objBuf = out
	return out
}

// object resolves a memory operand in state s.
func (ft *fnTrack) object(s *state, m x86asm.Mem, next uint64, pc uint64) (object, bool) {
	gl := ft.w.g
	if m.Segment == x86asm.GS {
		var a uint64
		switch {
		case m.Base == 0 && m.Index == 0:
			a = uint64(m.Disp)
		case m.Base == x86asm.RIP:
			a = next + uint64(m.Disp)
		default:
			bi, _, ok := regs.Index(m.Base)
			if !ok || m.Index != 0 || s.regs[bi].kind != vConst {
				return object{}, false
			}
			a = uint64(s.regs[bi].k + m.Disp)
		}
		g, off, ok := gl.find(a, true)
		if !ok {
			return object{}, false
		}
		return object{t: ft.w.ts.Get(g.Type).ID(), off: off, why: ft.w.why("per-CPU ", g.Name, ""), reg: -1, percpuBase: isPercpuBase(g.Name)}, true
	}
	if m.Segment != 0 {
		return object{}, false
	}
	global := func(a uint64, why string, indexed bool) (object, bool) {
		g, off, ok := gl.find(a, false)
		if !ok {
			return object{}, false
		}
		if o, ok := ft.constVar(a, pc); ok && !indexed {
			return o, true
		}
		t := ft.w.ts.Get(g.Type)
		if indexed && (t == nil || t.Kind != members.Array) {
			return object{}, false
		}
		return object{t: t.ID(), off: off, why: ft.w.why(why, g.Name, ""), reg: -1, percpuBase: isPercpuBase(g.Name)}, true
	}
	switch {
	case m.Base == x86asm.RIP:
		return global(next+uint64(m.Disp), "global ", false)
	case m.Base == 0:
		return global(uint64(m.Disp), "global ", m.Index != 0)
	}
	bi, _, ok := regs.Index(m.Base)
	if !ok {
		return object{}, false
	}
	v := s.regs[bi]
	switch v.kind {
	case vPtr:
		return object{t: v.t, off: v.k + m.Disp, why: v.why, reg: regs.ToDWARF[bi], base: -v.k, deref: v.deref}, true
	case vStack:
		if m.Index != 0 {
			return object{}, false
		}
		so := v.k + m.Disp
		for _, o := range ft.objs {
			if so >= o.off && so < o.off+o.t.Size && pc >= o.ranges[0][0] && pc < o.ranges[0][1] {
				return object{t: o.t.ID(), off: so - o.off, why: ft.w.why("stack var ", o.name, ""), reg: regs.ToDWARF[bi], base: o.off - v.k, frame: true}, true
			}
		}
		return object{stack: true, slot: so}, true
	case vConst:
		if m.Index != 0 {
			return object{}, false
		}
		g, off, ok := gl.find(uint64(v.k+m.Disp), v.percpu)
		if !ok {
			return object{}, false
		}
		if o, ok := ft.constVar(uint64(v.k+m.Disp), pc); ok && !v.percpu {
			o.reg, o.base = regs.ToDWARF[bi], int64(uint64(v.k+m.Disp)-uint64(o.off))-v.k
			return o, true
		}
		why := "global "
		if v.percpu {
			why = "per-CPU "
		}
		return object{t: ft.w.ts.Get(g.Type).ID(), off: off, why: ft.w.why(why, g.Name, ""), reg: regs.ToDWARF[bi], base: int64(g.Addr) - v.k}, true
	}
	return object{}, false
}

var noMem memResult // look's result without a memory operand

// result of looking at one instruction's memory operand.
type memResult struct {
	acc x86code.MemAccess
	obj object
	// chains are the members, an index into fnTrack.chainSets (0:
	// none): a memResult holds no pointers, copied with no write
	// barriers, its array not scanned by the collector.
	chains uint32
	loaded val  // the value a load gives its destination
	test   bool // the bits picked out are tested against a constant
}

// isPercpuBase names the kernel's per-CPU offsets: adding one to a
// per-CPU variable's address gives a CPU's copy of it.
func isPercpuBase(name string) bool {
	return name == "this_cpu_off" || name == "__per_cpu_offset"
}

// look resolves instruction i's memory operand in state s: the object,
// the members (with the bitfield patterns pats and hints from the block
// [i, end)). When DWARF gives the base register two types (a pointer
// and the container_of of it, both in scope), each is tried: the
// members are those of the only typing under which the access falls on
// a member, or the innermost member all typings agree on.
func (ft *fnTrack) look(s *state, i, end int, pats map[int]members.Bits, skip map[int]bool) (*memResult, bool) {
	if ft.memAt[i] < 0 {
		return &noMem, false
	}
	e := &ft.looked[ft.memAt[i]]
	if !e.ready {
		e.ready = true
		acc := e.acc
		e.regs = [3]int{-1, -1, -1}
		if bi, _, ok := regs.Index(acc.Mem.Base); ok {
			e.regs[0] = bi
		}
		if ii, _, ok := regs.Index(acc.Mem.Index); ok {
			e.regs[1] = ii
		}
		if acc.Kind == x86code.Store {
			if sr, ok := ft.insns[i].Inst.Args[1].(x86asm.Reg); ok {
				if si, full, ok := regs.Index(sr); ok && full {
					e.regs[2] = si
				}
			}
		}
	}
	// The result depends on the registers the operand names (and, for
	// a store, the one it stores) and on nothing else of the state but
	// the stack slots a load from the frame reads: worked out again
	// only when those registers changed.
	var key [3]val
	for k, ri := range e.regs {
		if ri >= 0 {
			key[k] = s.regs[ri]
		}
	}
	if e.cached && ft.same(key[0], e.key[0]) && ft.same(key[1], e.key[1]) && ft.same(key[2], e.key[2]) {
		return &e.r, true
	}
	e.key = key
	ft.lookSlow(&e.r, s, i, end, e.acc, pats, skip)
	e.cached = !e.r.obj.stack
	return &e.r, true // valid until look's next call at i: not copied
}

// access is x86code.Access of instruction i, worked out in buildFacts.
func (ft *fnTrack) access(i int) (x86code.MemAccess, bool) {
	if k := ft.memAt[i]; k >= 0 {
		return ft.looked[k].acc, true
	}
	return x86code.MemAccess{}, false
}

// lookEntry caches look's work at one instruction.
type lookEntry struct {
	ready  bool // regs worked out
	cached bool
	acc    x86code.MemAccess
	regs   [3]int // base, index, stored register (-1: none)
	key    [3]val
	r      memResult
}

// lookSlow is look without the cache, into r.
func (ft *fnTrack) lookSlow(r *memResult, s *state, i, end int, acc x86code.MemAccess, pats map[int]members.Bits, skip map[int]bool) {
	var cs []members.Chain
	*r, cs = ft.lookObjs(s, i, end, acc, pats, skip)
	if len(cs) > 0 {
		ft.chainSets = append(ft.chainSets, cs)
		r.chains = uint32(len(ft.chainSets) - 1)
	}
	r.test = pats[i].Test
}

// found is lookObjs' answer: a memResult and its members.
type found struct {
	r      memResult
	chains []members.Chain
}

func (ft *fnTrack) lookObjs(s *state, i, end int, acc x86code.MemAccess, pats map[int]members.Bits, skip map[int]bool) (memResult, []members.Chain) {
	in := &ft.insns[i]
	r := found{r: memResult{acc: acc}}
	objs := ft.objects(s, acc.Mem, in.End(), in.PC)
	if len(objs) == 0 {
		return r.r, r.chains
	}
	if len(objs) == 1 {
		r.r.obj = objs[0]
		r.chains, r.r.loaded = ft.resolveObj(s, i, end, acc, objs[0], pats, skip)
		return r.r, r.chains
	}
	got := ft.got[:0]
	defer func() { ft.got = got[:0] }()
	for _, o := range objs {
		c, l := ft.resolveObj(s, i, end, acc, o, pats, skip)
		if len(c) > 0 {
			got = append(got, found{memResult{acc: acc, obj: o, loaded: l}, c})
		}
	}
	switch {
	case len(got) == 1:
		for _, o := range objs {
			// Also a pointer to a struct the typing's holds at offset 0 (tp, sk),
			// not fitting: a cast (inet_csk(sk)->icsk_ack), to which is not told.
			if o.off == got[0].r.obj.off && ft.w.ts.EmbedsAtZero(ft.w.ts.ByID(got[0].r.obj.t), ft.w.ts.ByID(o.t)) {
				got[0].chains = members.TrimZeroLevels(ft.w.ts, got[0].chains)
				// Left with a struct at offset 0 and nothing decided
				// inside it (a union there): nothing is decided.
				cs := got[0].chains[:0]
				for _, c := range got[0].chains {
					mt := ft.w.ts.Get(c[0].Member.Type)
					if !(len(c) == 1 && c[0].BitOff == 0 && mt != nil && (mt.Kind == members.Struct || mt.Kind == members.Union)) {
						cs = append(cs, c)
					}
				}
				got[0].chains = cs
				break
			}
		}
		return got[0].r, got[0].chains
	case len(got) > 1:
		// Agreeing typings: keep the innermost member they share.
		best := got[0]
		for _, g := range got[1:] {
			if len(g.chains) != 1 || len(best.chains) != 1 {
				return r.r, r.chains
			}
			x, y := g.chains[0][len(g.chains[0])-1], best.chains[0][len(best.chains[0])-1]
			if x.Member.Name != y.Member.Name || x.Container.Key() != y.Container.Key() || x.BitOff != y.BitOff {
				return r.r, r.chains
			}
			if len(g.chains[0]) < len(best.chains[0]) {
				best = g
			}
		}
		c := best.chains[0]
		best.chains = []members.Chain{c[len(c)-1:]}
		return best.r, best.chains
	}
	return r.r, r.chains
}

// resolveObj is look for one typing of the base: the members and the
// value a load gives.
func (ft *fnTrack) resolveObj(s *state, i, end int, acc x86code.MemAccess, obj object, pats map[int]members.Bits, skip map[int]bool) (chains []members.Chain, loaded val) {
	if obj.stack {
		if acc.Kind == x86code.Load && acc.Bytes == 8 {
			loaded, _ = s.slot(obj.slot)
		}
		return nil, loaded
	}
	ts := ft.w.ts
	if obj.percpuBase {
		return nil, val{kind: vPercpuOff}
	}
	t := ts.ByID(obj.t)
	if t == nil {
		return nil, loaded
	}
	n := int64(acc.Bytes)
	if acc.Kind == x86code.Addr || n <= 0 {
		n = 1
	}
	a := members.Use{Off: obj.off, N: n, Addr: acc.Kind == x86code.Addr || regs.WholeArea(ft.insns[i].Inst.Op), Indexed: obj.indexed, Load: acc.Kind == x86code.Load}
	// A pointer loaded from the object.
	if t.Kind == members.Ptr && obj.off == 0 && n == 8 && acc.Kind == x86code.Load {
		if p := ts.Pointee(t); members.Useful(p) {
			loaded = val{kind: vPtr, t: p.ID(), why: obj.why, deref: true}
		}
		return nil, loaded
	}
	if t.Kind != members.Struct && t.Kind != members.Union && t.Kind != members.Array {
		return nil, loaded
	}
	if obj.frame && acc.Kind == x86code.Store {
		// A store into a struct in the frame is most often its
		// initializer (struct x y = {...}, the zeroing of
		// CONFIG_INIT_STACK_ALL_ZERO at its declaration) or a struct
		// copy into it, neither a member access in the source (the
		// plugin records none); an assignment to its member looks the
		// same: not decided.
		return nil, loaded
	}
	if obj.frame && acc.Kind == x86code.Addr && regs.FeedsRepString(ft.insns, i, end) {
		// The address of a struct in the frame that a rep stos or rep
		// movs starts at: the zeroing of its initializer (struct x y =
		// {..} beyond the bytes stored apart) or a copy into it, no
		// member's address in the source.
		return nil, loaded
	}
	var memset members.Chain
	if acc.Kind == x86code.Addr && regs.AlignedRep(ft.insns, i, end) {
		// The middle of an inlined memset or memcpy (memset(info, 0,
		// sizeof(*info))): its first and last words stored apart, the
		// rest by a rep stos or movs from 8 bytes past the start the
		// source named, rounded down. The members here are the source's
		// only where they hold that start too.
		cs := ts.ObjectAccess(t, members.Use{Off: obj.off - 8, N: 1, Addr: true})
		if len(cs) == 0 {
			return nil, loaded
		}
		memset = cs[0]
	} else if d, ok := regs.MemsetWord(ft.insns, i, end); ok && acc.Kind == x86code.Store {
		// Its first or last word, stored apart: the same.
		cs := ts.ObjectAccess(t, members.Use{Off: obj.off - acc.Mem.Disp + d, N: 1, Addr: true})
		if len(cs) == 0 {
			return nil, loaded
		}
		memset = cs[0]
	}
	if t.Name == "__va_list_tag" {
		// va_arg's expansion: the compiler's, no member access in
		// the source.
		return nil, loaded
	}
	if skip[i] {
		return nil, loaded // the load of a bitfield unit that a later store writes back
	}
	if b, ok := pats[i]; ok {
		a.Bits = b
		a.Bits.Base += obj.off * 8
	}
	a.Hint = ft.hintFor(s, i, end, acc)
	for _, p := range []string{"var ", "stack var ", "global ", "per-CPU "} {
		a.Declared = a.Declared || strings.HasPrefix(ft.w.whys[obj.why], p)
	}
	// A pointer loaded from a global is typed by the global's declared
	// pointee as a loaded member's is by the member's: the source may
	// have cast it (current_thread_info() is (struct thread_info
	// *)current, task_thread_info(current) &current->thread_info: the
	// same instructions), so its offset-0 levels are not decided.
	a.Declared = a.Declared && !obj.deref
	if lo, hi, ok := ft.copySpan(i, end, false, false); ok {
		if acc.Kind == x86code.Load && t.Kind == members.Struct && t.Size >= 24 && ft.storedToFrame(s, i, end) {
			// Loads beside each other whose values go to the frame,
			// three quarters of a struct or more, with gaps (the
			// member the source sets apart: t = *table; t.data = &tmp):
			// the struct copied into a local, no member read in the
			// source.
			ivs, _ := ft.copyMoves(i, end, false, false)
			if at := acc.Mem.Disp - obj.off; 4*covered(ivs, at, at+t.Size) >= 3*t.Size {
				return nil, loaded
			}
		}
		// In the object's offsets.
		a.Copy, a.CopyLo, a.CopyHi = true, obj.off+lo-acc.Mem.Disp, obj.off+hi-acc.Mem.Disp
	}
	if lo, hi, ok := ft.copySpan(i, end, true, false); ok {
		a.Init, a.InitLo, a.InitHi = true, obj.off+lo-acc.Mem.Disp, obj.off+hi-acc.Mem.Disp
	}
	if a.Init && acc.Kind == x86code.Store && regs.ImmStore(ft.insns, i) {
		if lo, hi, ok := ft.copySpan(i, end, true, true); ok {
			a.Consts, a.ConstLo, a.ConstHi = true, obj.off+lo-acc.Mem.Disp, obj.off+hi-acc.Mem.Disp
		}
	}
	if acc.Kind == x86code.Store {
		a.Stores = ft.storesBeside(i, obj.off-acc.Mem.Disp)
	}
	pc := ft.insns[i].PC
	a.WrapOK = func(t *members.Type) bool { ptr, val := ft.wrapperParamAt(pc, t); return ptr || val }
	a.ByVal = func(t *members.Type) bool { _, val := ft.wrapperParamAt(pc, t); return val }
	if acc.Kind == x86code.Store {
		a.Assign = a.ByVal
	}
	chains = ft.trimHierarchy(ts.ObjectAccess(t, a))
	if memset != nil {
		chains = members.Within(chains, memset)
	}
	if acc.Kind == x86code.Load && n == 8 && len(chains) == 1 {
		last := chains[0][len(chains[0])-1]
		mt := ts.Get(last.Member.Type)
		switch {
		case mt != nil && mt.Kind == members.Ptr && last.BitSize == 64:
			// The only member the 8 bytes touch is this pointer: the load is it.
			if p := ts.Pointee(mt); members.Useful(p) {
				loaded = val{kind: vPtr, t: p.ID(), why: ft.w.why(nameOf(last.Container), ".", last.Member.Name)}
			}
		case mt != nil && mt.Kind == members.Array:
			if el := ts.Get(mt.Elem); el != nil && el.Kind == members.Ptr {
				if p := ts.Pointee(el); members.Useful(p) {
					loaded = val{kind: vPtr, t: p.ID(), why: ft.w.why(nameOf(last.Container), ".", last.Member.Name+"[]")}
				}
			}
		}
	}
	return chains, loaded
}

// trimHierarchy drops the outer levels of a chain that starts down a
// class hierarchy, structs of several members each embedding the next
// at offset 0, two levels deep or more (tcp_sock, inet_connection_sock,
// inet_sock, sock; not wrappers as kref, refcount_t, atomic_t), above the innermost of them the function has a pointer to:
// the source casts between these pointers (tcp_sk(sk), inet_sk(sk)),
// and with tp and sk both in the function, tp->inet_conn.icsk_inet.sk.
// __sk_common.skc_state at offset 0 of a tcp_sock is most often
// sk->sk_state: the register's typing does not tell which pointer the
// source went through, and the levels above sock are not decided.
func (ft *fnTrack) trimHierarchy(cs []members.Chain) []members.Chain {
	for i, c := range cs {
		k := 0
		for j := 1; j < len(c) && c[j-1].BitOff == 0 && ft.w.ts.NumMembers(c[j-1].Container) >= 3; j++ {
			if j >= 2 && ft.w.ts.NumMembers(c[j].Container) >= 3 && ft.namesType(c[j].Container) {
				k = j
			}
			if ft.namesBase(c[j].Container) {
				k = j
			}
		}
		cs[i] = c[k:]
	}
	return cs
}

// namesBase says whether t, a class of a hierarchy, holds at offset 0,
// two levels down or more, another class the function has a pointer to
// (members.HoldsClass): inet_connection_sock holds inet_sock, which
// holds sock. The source casts that pointer to t (inet_csk(sk)->icsk_ack
// where tp = tcp_sk(sk) is the same register), which compiles as
// tp->inet_conn.icsk_ack does: the levels above t are not decided.
func (ft *fnTrack) namesBase(t *members.Type) bool {
	return ft.w.ts.HoldsClass(t, 1, ft.namesType)
}

// namesType says whether the function has a pointer to t.
func (ft *fnTrack) namesType(t *members.Type) bool {
	if ft.named == nil {
		ts := ft.w.ts
		ft.named = map[members.Key]bool{}
		add := func(off dwarf.Offset) {
			if p := ts.Pointee(ts.Get(off)); p != nil && (p.Kind == members.Struct || p.Kind == members.Union) {
				ft.named[p.Key()] = true
			}
		}
		for i := range ft.f.Vars {
			add(ft.f.Vars[i].Type)
		}
		for i := range ft.f.Params {
			add(ft.f.Params[i].Type)
		}
	}
	return ft.named[t.Key()]
}

func nameOf(t *members.Type) string {
	if t == nil {
		return "?"
	}
	return t.Name
}

// hintFor looks at what the block does with the value an access moves.
func (ft *fnTrack) hintFor(s *state, i, end int, acc x86code.MemAccess) members.Hint {
	in := &ft.insns[i].Inst
	var h members.Hint
	switch acc.Kind {
	case x86code.Store:
		switch src := in.Args[1].(type) {
		case x86asm.Imm:
			h.Imm = true
		case x86asm.Reg:
			if ri, full, ok := regs.Index(src); ok && full {
				if v := s.regs[ri]; v.kind == vPtr && v.k == 0 {
					h.PtrTo = ft.typ(v).Key()
				}
			}
		}
	case x86code.Load:
		dst, ok := in.Args[0].(x86asm.Reg)
		if !ok {
			return h
		}
		ri, full, ok := regs.Index(dst)
		if !ok || !full {
			return h
		}
		// DWARF names the loaded value at the next instruction.
		if i+1 < len(ft.insns) {
			for _, k := range ft.factsAt(i + 1) {
				f := &ft.fs[k]
				if f.reg == ri && f.v.k == 0 {
					h.PtrTo = ft.typ(f.v).Key()
				}
			}
		}
		// It is dereferenced before it is overwritten.
		for j := i + 1; j < end && j < i+16; j++ {
			nx := &ft.insns[j].Inst
			if a, ok := ft.access(j); ok && a.Kind != x86code.Addr {
				if bi, _, ok := regs.Index(a.Mem.Base); ok && bi == ri && a.Mem.Segment == 0 {
					h.IsPtr = true
					break
				}
			}
			if regs.Writes(nx, ri) {
				break
			}
		}
	}
	return h
}

// copyAt reports whether instruction i, in a block ending before end,
// moves bytes from memory to memory through a register: a mov load
// whose register is next read by a mov store of it (of the same width)
// before anything else reads or writes it, or that store.
func (ft *fnTrack) copyAt(i, end int) bool {
	// The same for every state, and asked again by each memory
	// instruction nearby (copySpan): worked out once.
	if c := ft.copies[i]; c != 0 {
		return c == 2
	}
	ok := ft.copyAtSlow(i, end)
	ft.copies[i] = 1
	if ok {
		ft.copies[i] = 2
	}
	return ok
}

func (ft *fnTrack) copyAtSlow(i, end int) bool {
	in := &ft.insns[i].Inst
	if _, ok := in.Args[0].(x86asm.Mem); ok && in.Op == x86asm.PUSH {
		return true // onto the stack: a struct passed by value, word by word
	}
	if in.Op != x86asm.MOV {
		return false
	}
	if dst, ok := in.Args[0].(x86asm.Reg); ok {
		if _, isMem := in.Args[1].(x86asm.Mem); isMem {
			return regs.StoredNext(ft.insns, i, end, dst)
		}
		return false
	}
	src, ok := in.Args[1].(x86asm.Reg)
	if !ok {
		return false
	}
	if _, isMem := in.Args[0].(x86asm.Mem); !isMem {
		return false
	}
	// The store: its register loaded by a mov from memory just before.
	ri, _, ok := regs.Index(src)
	if !ok {
		return false
	}
	lo := ft.blockStart(i)
	for j := i - 1; j >= lo && j >= i-8; j-- {
		p := &ft.insns[j].Inst
		if d, ok := p.Args[0].(x86asm.Reg); ok && d == src && p.Op == x86asm.MOV {
			if _, isMem := p.Args[1].(x86asm.Mem); isMem {
				return regs.StoredNext(ft.insns, j, end, src)
			}
			return false
		}
		if regs.Uses(p, ri) || regs.Writes(p, ri) {
			return false
		}
	}
	return false
}

// copySpan is, for instruction i that moves memory to memory (copyAt),
// the displacements [lo, hi) that it and the moves of the same kind
// through the same base register (or one a lea set to it plus a
// constant: regs.Alias; a global's, by address) around it in its block
// (up to 32 instructions away) cover contiguously. With imm, stores of
// immediates count too; with only, they alone do.
func (ft *fnTrack) copySpan(i, end int, imm, only bool) (lo, hi int64, ok bool) {
	ivs, ok := ft.copyMoves(i, end, imm, only)
	if !ok {
		return 0, 0, false
	}
	acc := ft.looked[ft.memAt[i]].acc
	lo, hi = acc.Mem.Disp, acc.Mem.Disp+int64(max(acc.Bytes, 1))
	for grown := true; grown; {
		grown = false
		for _, v := range ivs {
			if v[0] <= hi && v[1] >= lo && (v[0] < lo || v[1] > hi) {
				lo, hi, grown = min(lo, v[0]), max(hi, v[1]), true
			}
		}
	}
	return lo, hi, true
}

// copyMoves lists the displacements [lo, hi) that copySpan's moves
// write or read, contiguous or not.
func (ft *fnTrack) copyMoves(i, end int, imm, only bool) ([][2]int64, bool) {
	acc := ft.looked[ft.memAt[i]].acc
	m := acc.Mem
	rip := m.Base == x86asm.RIP
	// Immediates stored to a global: most often INIT_LIST_HEAD's address.
	moves := func(j int) bool {
		return (!only && (ft.copyAt(j, end) || ft.retStore(j))) || (imm && !rip && regs.ImmStore(ft.insns, j))
	}
	if !moves(i) || m.Index != 0 || m.Base == 0 {
		return nil, false
	}
	ivs := ft.moves[0][:0]
	defer func() { ft.moves[0] = ivs }()
	start := max(ft.blockStart(i), i-32)
	other, delta, ak := regs.Alias(ft.insns, m.Base, start, min(end, i+33))
	for j := start; j < end && j <= i+32; j++ {
		if ft.memAt[j] < 0 {
			continue
		}
		o := ft.looked[ft.memAt[j]].acc
		if o.Kind != acc.Kind || o.Mem.Index != 0 || o.Mem.Segment != m.Segment || o.Bytes <= 0 {
			continue
		}
		d, same := int64(0), o.Mem.Base == m.Base
		if rip && same { // a global copied: by addresses, in i's terms
			d = int64(ft.insns[j].End()) - int64(ft.insns[i].End())
		} else if same && m.Base == x86asm.RSP && j != i {
			// The stack pointer moved by the pushes between (push
			// 0x10(%rsp) thrice passes a struct of three words).
			d, same = regs.RSPDelta(ft.insns, min(i, j), max(i, j))
			if j < i {
				d = -d
			}
		} else if !same && !rip && o.Mem.Base == other && regs.Holds(ft.insns, ak, i, j, m.Base, other) {
			d, same = delta, true
		}
		if !same || (j != i && !moves(j)) {
			continue
		}
		ivs = append(ivs, [2]int64{o.Mem.Disp + d, o.Mem.Disp + d + int64(o.Bytes)})
	}
	return ivs, true
}

// covered is how many bytes of [lo, hi) the intervals ivs hold.
func covered(ivs [][2]int64, lo, hi int64) int64 {
	sort.Slice(ivs, func(a, b int) bool { return ivs[a][0] < ivs[b][0] })
	var n int64
	at := lo // bytes below at are counted
	for _, v := range ivs {
		if b, e := max(v[0], at), min(v[1], hi); e > b {
			n, at = n+e-b, e
		}
	}
	return n
}

// storedToFrame reports whether the value load instruction i gives is
// next stored (storedNext) into the frame.
func (ft *fnTrack) storedToFrame(s *state, i, end int) bool {
	dst, ok := ft.insns[i].Inst.Args[0].(x86asm.Reg)
	if !ok {
		return false
	}
	for j := i + 1; j < end && j <= i+8; j++ {
		nx := &ft.insns[j].Inst
		if nx.Op == x86asm.MOV {
			if r, ok := nx.Args[1].(x86asm.Reg); ok && r == dst {
				m, isMem := nx.Args[0].(x86asm.Mem)
				if !isMem || m.Segment != 0 {
					return false
				}
				bi, _, ok := regs.Index(m.Base)
				return ok && m.Base != x86asm.RIP && s.regs[bi].kind == vStack
			}
		}
	}
	return false
}

// storesBeside lists the bytes that the movs to memory through
// instruction i's base register (no index) on its straight path, up to
// 32 instructions away, write, as offsets from the base plus shift. The
// path runs across the start of a block that is only a jump target
// (two initializers sharing their tail: *insn++ = BPF_..(..) in each
// case of a switch), not across a jump or a return.
func (ft *fnTrack) storesBeside(i int, shift int64) [][2]int64 {
	m := ft.looked[ft.memAt[i]].acc.Mem
	if m.Index != 0 || m.Base == 0 || m.Base == x86asm.RIP {
		return nil
	}
	bi, _, _ := regs.Index(m.Base)
	out := ft.moves[1][:0]
	defer func() { ft.moves[1] = out }()
	// The register holds the same base from after its last write
	// before i to its next write after.
	start := i
	for lo := max(0, i-32); start > lo && !regs.Writes(&ft.insns[start-1].Inst, bi) && !x86code.EndsBlock(&ft.insns[start-1].Inst); start-- {
	}
	for j := start; j < len(ft.insns) && j <= i+32; j++ {
		if j > i && (regs.Writes(&ft.insns[j].Inst, bi) || x86code.EndsBlock(&ft.insns[j-1].Inst)) {
			break
		}
		if ft.memAt[j] < 0 || ft.insns[j].Inst.Op != x86asm.MOV {
			continue
		}
		o := ft.looked[ft.memAt[j]].acc
		if o.Kind != x86code.Store || o.Mem.Base != m.Base || o.Mem.Index != 0 || o.Mem.Segment != m.Segment || o.Bytes <= 0 {
			continue
		}
		out = append(out, [2]int64{o.Mem.Disp + shift, o.Mem.Disp + shift + int64(o.Bytes)})
	}
	return out
}

// retStore is regs.RetStore within instruction j's block (not looked
// up for an instruction that is no mov).
func (ft *fnTrack) retStore(j int) bool {
	return ft.insns[j].Inst.Op == x86asm.MOV && regs.RetStore(ft.insns, ft.blockStart(j), j)
}

// blockStart is the first instruction of the block holding i.
func (ft *fnTrack) blockStart(i int) int {
	if i < len(ft.blockOf) && ft.blockOf[i] >= 0 {
		return ft.rng[ft.blockOf[i]][0]
	}
	if b, ok := ft.g.Block(ft.insns[i].PC); ok {
		return ft.insnIndex(ft.g.Blocks[b].Start)
	}
	// Not a block start: the block before it.
	k := sort.Search(len(ft.g.Blocks), func(k int) bool { return ft.g.Blocks[k].Start > ft.insns[i].PC }) - 1
	if k < 0 {
		return 0
	}
	return ft.insnIndex(ft.g.Blocks[k].Start)
}

// wrapperParamAt reports whether an inlined copy holding pc has a
// parameter of pointer to t, and one of type t.
func (ft *fnTrack) wrapperParamAt(pc uint64, t *members.Type) (ptr, byVal bool) {
	ts := ft.w.ts
	k := t.Key()
	for _, p := range ft.f.Params {
		in := false
		for _, r := range p.Scope {
			if pc >= r[0] && pc < r[1] {
				in = true
				break
			}
		}
		if !in {
			continue
		}
		pt := ts.Get(p.Type)
		if pt != nil && pt.Kind == members.Ptr {
			if pt = ts.Pointee(pt); pt != nil && pt.Key() == k {
				ptr = true
			}
		} else if pt != nil && pt.Key() == k {
			byVal = true
		}
	}
	return ptr, byVal
}
