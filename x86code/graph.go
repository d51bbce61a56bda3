package x86code

import (
	"cmp"
	"slices"

	"golang.org/x/arch/x86/x86asm"
)

// Range is one address range of a function's machine code (a function
// with a .cold part has two).
type Range struct {
	Addr uint64
	Code []byte
}

// Graph is the control flow graph of one function's machine code, as
// far as its direct branches tell: the basic blocks (Leaders' rule:
// calls do not end a block) and the arcs that fall-through and direct
// branches make between them. Branches between the function's ranges
// are arcs; a jump out of them (a tail call, the return thunk) or a
// return leaves the function.
type Graph struct {
	Entry  uint64       // the function's entry
	Blocks []GraphBlock // by address
	// Indirect are the indirect jumps (jmp *%rax, jmp *table(,%rax,8)):
	// their targets, such as a jump table's, are not followed, so the
	// blocks only they reach are not known where they start.
	Indirect []Insn
	lead     []bool // FuncGraphInto's leaders, reused
	// succs holds the blocks' Succs, three places each (a branch's
	// target, a patched one, the next instruction), reused.
	succs   []uint64
	reached []bool   // markPadding's, reused
	cands   []uint64 // markPadding's, reused
	// starts are the blocks' starts, by address: Block searches them
	// (8 bytes apart) rather than the blocks (over 200 bytes each).
	starts []uint64
	pcs    []uint64 // FuncGraphInto's instruction addresses, reused
	// at holds, for each byte of the ranges, the index in its range of
	// the instruction starting there, -1 if none: a look-up, not a
	// search, for each branch target. Reused.
	at []int32
}

// GraphBlock is one basic block [Start, End) and the arcs leaving it.
type GraphBlock struct {
	Start, End uint64
	// Succs are the starts of the blocks it may go to next, by address
	// (fall-through, branch targets inside the function).
	Succs []uint64
	// Exit: it may leave the function (ret, a jump out of its code).
	Exit bool
	// Indirect: it ends with an indirect jump, so its successors are
	// unknown (Succs and Exit do not hold them).
	Indirect bool
	// Padding: only int3 or nop instructions, after a block that does
	// not fall into it and reached by no branch: filler between the
	// function's code and its end, never run.
	Padding bool
	// Last is its last instruction.
	Last Insn
}

// PatchedBranches are the jumps the kernel patches in at run time (a
// static branch: a nop or a jmp the kernel rewrites, by site address,
// with its target): each may go either way, so each ends a block with
// two successors.
type PatchedBranches map[uint64]uint64

// FuncGraph builds the graph of a function entered at entry whose code
// is in ranges (by address, each starting with an instruction). patched
// may be nil.
func FuncGraph(entry uint64, ranges []Range, patched PatchedBranches) *Graph {
	decoded := make([][]Insn, len(ranges))
	for i, r := range ranges {
		decoded[i] = Decode(r.Code, r.Addr)
	}
	return FuncGraphDecoded(entry, ranges, decoded, patched)
}

// FuncGraphDecoded is FuncGraph for a caller that has decoded the
// ranges already: decoded[i] is Decode(ranges[i].Code, ranges[i].Addr).
func FuncGraphDecoded(entry uint64, ranges []Range, decoded [][]Insn, patched PatchedBranches) *Graph {
	return FuncGraphInto(&Graph{}, entry, ranges, decoded, patched)
}

// FuncGraphInto is FuncGraphDecoded building into g, over the graph it
// held before: a caller going through many functions (accessinfer)
// reuses the blocks' memory, with their instructions ~300 MB for a
// vmlinux.
func FuncGraphInto(g *Graph, entry uint64, ranges []Range, decoded [][]Insn, patched PatchedBranches) *Graph {
	type rangeInsns struct {
		lo, hi uint64
		insns  []Insn
		pcs    []uint64 // the instructions' addresses, searched
		at     []int32  // by byte from lo: the instruction starting there, -1 if none
	}
	var rs []rangeInsns
	pcs, ats := g.pcs[:0], g.at[:0]
	for i, r := range ranges {
		at, bytes := len(pcs), len(ats)
		for k := range decoded[i] {
			pcs = append(pcs, decoded[i][k].PC)
		}
		ats = slices.Grow(ats, len(r.Code))[:bytes+len(r.Code)]
		byByte := ats[bytes:]
		for k := range byByte {
			byByte[k] = -1
		}
		for k := range decoded[i] {
			if off := decoded[i][k].PC - r.Addr; off < uint64(len(byByte)) {
				byByte[off] = int32(k)
			}
		}
		rs = append(rs, rangeInsns{r.Addr, r.Addr + uint64(len(r.Code)), decoded[i], pcs[at:len(pcs):len(pcs)], byByte})
	}
	g.pcs, g.at = pcs, ats
	inCode := func(a uint64) bool {
		for _, r := range rs {
			if a >= r.lo && a < r.hi {
				return true
			}
		}
		return false
	}
	isStart := func(a uint64) bool {
		for _, r := range rs {
			if a >= r.lo && a < r.hi {
				return r.at[a-r.lo] >= 0
			}
		}
		return false
	}
	g.Entry, g.Indirect, g.succs = entry, g.Indirect[:0], g.succs[:0]
	// The leaders: a flag per instruction, range after range (at[k] is
	// range k's first), set at an address in every range holding an
	// instruction there.
	at, n := make([]int, len(rs)), 0
	for k, r := range rs {
		at[k], n = n, n+len(r.insns)
	}
	lead := g.lead[:0]
	lead = append(lead, make([]bool, n)...)
	g.lead = lead
	nlead := 0
	mark := func(a uint64) {
		for k, r := range rs {
			if a >= r.lo && a < r.hi {
				if i := int(r.at[a-r.lo]); i >= 0 && !lead[at[k]+i] {
					lead[at[k]+i] = true
					nlead++
				}
			}
		}
	}
	mark(entry)
	for _, r := range rs {
		mark(r.lo)
		next := r.lo
		for i := range r.insns {
			in := &r.insns[i]
			if in.PC != next {
				mark(in.PC) // after a byte that did not decode
			}
			next = in.End()
			ts, nt := branchTargets(in, patched)
			for _, t := range ts[:nt] {
				if inCode(t) && isStart(t) {
					mark(t)
				}
			}
			if endsGraphBlock(in, patched) && next < r.hi {
				mark(next)
			}
			if isIndirectJump(&in.Inst) {
				g.Indirect = append(g.Indirect, *in)
			}
		}
	}
	if n := nlead + 1; cap(g.Blocks) < n {
		g.Blocks = make([]GraphBlock, 0, n) // one per leader, and one past a byte that did not decode, mostly
	}
	g.Blocks = g.Blocks[:0]
	for k, r := range rs {
		var cur *GraphBlock
		// The block's last instruction is copied into it (Last) once,
		// when the block is closed, not at every instruction.
		for i := range r.insns {
			in := &r.insns[i]
			if lead[at[k]+i] || cur == nil {
				if cur != nil {
					cur.Last = r.insns[i-1]
					cur.close(in.PC, inCode, isStart, patched, &g.succs)
				}
				g.Blocks = append(g.Blocks, GraphBlock{Start: in.PC})
				cur = &g.Blocks[len(g.Blocks)-1]
			}
			cur.End = in.End()
			if i+1 < len(r.insns) && r.insns[i+1].PC != in.End() {
				// A byte that does not decode ends the block.
				cur.Last = *in
				cur.close(0, inCode, isStart, patched, &g.succs)
				cur = nil
			}
		}
		if cur != nil {
			cur.Last = r.insns[len(r.insns)-1]
			cur.close(0, inCode, isStart, patched, &g.succs)
		}
	}
	// The ranges come by address, mostly: their blocks are in order.
	byStart := func(a, b GraphBlock) int { return cmp.Compare(a.Start, b.Start) }
	if !slices.IsSortedFunc(g.Blocks, byStart) {
		slices.SortFunc(g.Blocks, byStart)
	}
	g.starts = g.starts[:0]
	for i := range g.Blocks {
		g.starts = append(g.starts, g.Blocks[i].Start)
	}
	g.markPadding(func(lo, hi uint64) []Insn {
		for _, r := range rs {
			if lo >= r.lo && lo < r.hi {
				i, _ := slices.BinarySearch(r.pcs, lo)
				j := i
				for j < len(r.insns) && r.insns[j].PC < hi {
					j++
				}
				return r.insns[i:j]
			}
		}
		return nil
	})
	return g
}

// close ends block b before next (0: no instruction follows in its
// range) and works out its arcs from its last instruction, its Succs in
// three places of pool.
func (b *GraphBlock) close(next uint64, inCode, isStart func(uint64) bool, patched PatchedBranches, pool *[]uint64) {
	n := len(*pool)
	if cap(*pool)-n < 3 {
		*pool = make([]uint64, 0, max(1024, 2*cap(*pool)))
		n = 0
	}
	b.Succs, *pool = (*pool)[n:n:n+3], (*pool)[:n+3]
	in := &b.Last
	falls := true
	switch {
	case isIndirectJump(&in.Inst):
		b.Indirect, falls = true, false
	case in.Inst.Op == x86asm.JMP:
		falls = false
	case in.Inst.Op == x86asm.RET || in.Inst.Op == x86asm.LRET || in.Inst.Op == x86asm.IRET ||
		in.Inst.Op == x86asm.IRETD || in.Inst.Op == x86asm.IRETQ || in.Inst.Op == x86asm.SYSRET ||
		in.Inst.Op == x86asm.SYSEXIT || in.Inst.Op == x86asm.HLT:
		b.Exit, falls = true, false
	}
	// ud2 falls through: a WARN() goes on after its trap (a BUG()
	// does not, and no block after it runs then either).
	ts, nt := branchTargets(in, patched)
	for _, t := range ts[:nt] {
		if inCode(t) && isStart(t) {
			b.Succs = append(b.Succs, t)
		} else if !inCode(t) {
			b.Exit = true // a tail call, the return thunk
		}
	}
	if falls && next != 0 && in.End() == next {
		b.Succs = append(b.Succs, next)
	}
	slices.Sort(b.Succs)
	b.Succs = slices.Compact(b.Succs)
}

// markPadding marks the blocks of int3 and nop that nothing reaches.
// Only a block ending in one may be padding: the arcs are searched for
// those alone (few, mostly the int3 after each ret), not each arc's
// block.
func (g *Graph) markPadding(insns func(lo, hi uint64) []Insn) {
	cands := g.cands[:0]
	for i := range g.Blocks {
		b := &g.Blocks[i]
		if b.Start != g.Entry && (isInt3(&b.Last.Inst) || b.Last.Inst.Op == x86asm.NOP) {
			cands = append(cands, b.Start)
		}
	}
	g.cands = cands
	if len(cands) == 0 {
		return
	}
	reached := g.reached[:0]
	reached = append(reached, make([]bool, len(cands))...)
	g.reached = reached
	for _, b := range g.Blocks {
		for _, s := range b.Succs {
			if j, ok := slices.BinarySearch(cands, s); ok {
				reached[j] = true
			}
		}
	}
	for k, start := range cands {
		if reached[k] {
			continue
		}
		i, _ := g.Block(start)
		b := &g.Blocks[i]
		pad := true
		for _, in := range insns(b.Start, b.End) {
			if !isInt3(&in.Inst) && in.Inst.Op != x86asm.NOP {
				pad = false
				break
			}
		}
		b.Padding = pad
	}
}

// branchTargets are the addresses a direct branch (or a patched one) at
// in may go to besides the next instruction.
// Most functions have no patched branch: no look-up then (a call
// even into a nil map).
func branchTargets(in *Insn, patched PatchedBranches) (out [2]uint64, n int) {
	if t, ok := branchTarget(&in.Inst, in.End()); ok {
		out[n], n = t, n+1
	}
	if len(patched) > 0 {
		if t, ok := patched[in.PC]; ok {
			out[n], n = t, n+1
		}
	}
	return out, n
}

// endsGraphBlock reports whether the block ends after in.
func endsGraphBlock(in *Insn, patched PatchedBranches) bool {
	if endsBlock(in.Inst.Op) {
		return true
	}
	_, ok := patched[in.PC]
	return ok
}

// isIndirectJump reports whether inst is a jmp through a register or
// memory (jmp *%rax, jmp *0x10(,%rax,8)).
func isIndirectJump(inst *x86asm.Inst) bool {
	if inst.Op != x86asm.JMP {
		return false
	}
	switch inst.Args[0].(type) {
	case x86asm.Reg, x86asm.Mem:
		return true
	}
	return false
}

// Block returns the index of the block starting at addr.
func (g *Graph) Block(addr uint64) (int, bool) {
	if len(g.starts) == len(g.Blocks) {
		return slices.BinarySearch(g.starts, addr)
	}
	// A graph made by hand (tests): its blocks searched.
	return slices.BinarySearchFunc(g.Blocks, addr, func(b GraphBlock, a uint64) int { return cmp.Compare(b.Start, a) })
}

// Reachable returns the starts of the blocks reached from the entry
// through the known arcs.
func (g *Graph) Reachable() map[uint64]bool {
	seen := map[uint64]bool{}
	if _, ok := g.Block(g.Entry); !ok {
		return seen
	}
	stack := []uint64{g.Entry}
	seen[g.Entry] = true
	for len(stack) > 0 {
		s := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		i, _ := g.Block(s)
		for _, t := range g.Blocks[i].Succs {
			if !seen[t] {
				seen[t] = true
				stack = append(stack, t)
			}
		}
	}
	return seen
}

// isInt3 reports whether inst is int3 (0xcc), the padding between
// functions and after a return.
func isInt3(inst *x86asm.Inst) bool {
	return inst.Op == x86asm.INT && inst.Len == 1
}

// Arcs are a graph's arcs between its blocks, by block index; their
// memory is reused from one graph to the next (ArcsInto).
type Arcs struct {
	// Succs[i] are the blocks block i goes to, in its Succs' order;
	// Preds[j] the blocks that go to block j, by index.
	Succs, Preds [][]int
	pool         []int
	arcs         [][2]int
}

// ArcsInto fills a with g's arcs, each block's start searched once.
func (g *Graph) ArcsInto(a *Arcs) {
	nb := len(g.Blocks)
	a.arcs = a.arcs[:0]
	for i := range g.Blocks {
		for _, s := range g.Blocks[i].Succs {
			if j, ok := g.Block(s); ok {
				a.arcs = append(a.arcs, [2]int{i, j})
			}
		}
	}
	a.Succs, a.Preds = resize(a.Succs, nb), resize(a.Preds, nb)
	// Counts first (in the pool, before its lists), then each list
	// sliced from the pool and filled in arc order.
	if n := 2*len(a.arcs) + 2*nb; cap(a.pool) < n {
		a.pool = make([]int, n)
	}
	nsucc, npred := a.pool[:nb], a.pool[nb:2*nb]
	clear(nsucc)
	clear(npred)
	for _, e := range a.arcs {
		nsucc[e[0]]++
		npred[e[1]]++
	}
	at := 2 * nb
	for i := 0; i < nb; i++ {
		a.Succs[i] = a.pool[at : at : at+nsucc[i]]
		at += nsucc[i]
		a.Preds[i] = a.pool[at : at : at+npred[i]]
		at += npred[i]
	}
	for _, e := range a.arcs {
		a.Succs[e[0]] = append(a.Succs[e[0]], e[1])
		a.Preds[e[1]] = append(a.Preds[e[1]], e[0])
	}
}

// resize returns s with length n, reusing its array when large enough.
func resize(s [][]int, n int) [][]int {
	if cap(s) < n {
		return make([][]int, n)
	}
	return s[:n]
}
