package bitpat

import (
	"golang.org/x/arch/x86/x86asm"

	"github.com/klasy/klasy/accessinfer/members"
	"github.com/klasy/klasy/accessinfer/regs"
	"github.com/klasy/klasy/x86code"
)

// aliases holds the registers known to hold a load's base register
// plus a constant (by register index, a bit of has each), from the load
// on: the compiler stores a bitfield's unit back through a copy of the
// base made before the load (tcp_gso_segment's nskb kept in %r13 while
// %rax is reused) or through the base moved on to the next member
// (skb_complete_wifi_ack's add $0x30,%rdi before the store). An array,
// not a map: bases runs at every load of every function.
type aliases struct {
	has uint16
	off [16]int64
}

func (a *aliases) get(r int) (int64, bool) { return a.off[r], a.has&(1<<r) != 0 }
func (a *aliases) set(r int, o int64)      { a.off[r], a.has = o, a.has|1<<r }
func (a *aliases) del(r int)               { a.has &^= 1 << r }

// bases finds the aliases of m's base register at the load insns[i]:
// the base itself unless the load overwrites it, and the registers a
// 64-bit register move in [lo, i) made equal to it, neither changed
// since.
func bases(insns []x86code.Insn, lo, i int, m x86asm.Mem) (a aliases) {
	b, is64, ok := regs.Index(m.Base)
	if !ok || !is64 || m.Index != 0 || m.Base == x86asm.RIP {
		return a
	}
	a.set(b, 0)
	var written uint16
	for k := i - 1; k >= lo && k >= i-20; k-- {
		inst := &insns[k].Inst
		if written&(1<<b) != 0 || implicit(inst.Op) {
			break
		}
		if inst.Op == x86asm.MOV {
			x, okx := inst.Args[1].(x86asm.Reg)
			y, oky := inst.Args[0].(x86asm.Reg)
			xi, x64, okx2 := regs.Index(x)
			yi, y64, oky2 := regs.Index(y)
			if okx && oky && okx2 && oky2 && x64 && y64 {
				if yi == b && written&(1<<xi) == 0 {
					a.set(xi, 0)
				} else if xi == b && written&(1<<yi) == 0 {
					a.set(yi, 0)
				}
			}
		}
		written |= regs.WriteMask(inst)
	}
	if d, ok := insns[i].Inst.Args[0].(x86asm.Reg); ok {
		if di, _, ok := regs.Index(d); ok {
			a.del(di)
		}
	}
	return a
}

// same reports whether n, a store's operand, is m's address through
// an alias.
func (a *aliases) same(m, n x86asm.Mem) bool {
	if a.has == 0 || n.Index != 0 || n.Segment != m.Segment {
		return false
	}
	ni, _, ok := regs.Index(n.Base)
	if !ok || n.Base == x86asm.RIP {
		return false
	}
	o, ok := a.get(ni)
	return ok && o+n.Disp == m.Disp
}

// step follows inst's effect on the aliases: a move or lea from an
// alias makes another, add and sub of a constant move one, any other
// write ends one.
func (a *aliases) step(inst *x86asm.Inst) {
	if a.has == 0 {
		return
	}
	if implicit(inst.Op) {
		a.has = 0
		return
	}
	d, ok := inst.Args[0].(x86asm.Reg)
	if !ok {
		return
	}
	di, d64, ok := regs.Index(d)
	if !ok {
		return
	}
	if _, alias := a.get(di); !alias && !regs.Writes(inst, di) {
		return
	}
	if d64 {
		switch src := inst.Args[1].(type) {
		case x86asm.Reg:
			if si, s64, ok := regs.Index(src); ok && s64 && inst.Op == x86asm.MOV {
				if o, ok := a.get(si); ok {
					a.set(di, o)
					return
				}
			}
		case x86asm.Mem:
			if si, s64, ok := regs.Index(src.Base); ok && s64 && inst.Op == x86asm.LEA && src.Index == 0 && src.Base != x86asm.RIP {
				if o, ok := a.get(si); ok {
					a.set(di, o+src.Disp)
					return
				}
			}
		case x86asm.Imm:
			if o, ok := a.get(di); ok && (inst.Op == x86asm.ADD || inst.Op == x86asm.SUB) {
				if inst.Op == x86asm.SUB {
					src = -src
				}
				a.set(di, o+int64(src))
				return
			}
		}
	}
	if regs.Writes(inst, di) {
		a.del(di)
	}
}

// implicit reports whether op may write registers other than its
// first operand (a call clobbers the caller-saved ones): the aliases
// are not followed across it.
func implicit(op x86asm.Op) bool {
	switch op {
	case x86asm.CALL, x86asm.XCHG, x86asm.XADD, x86asm.CMPXCHG, x86asm.MUL, x86asm.DIV, x86asm.IDIV,
		x86asm.CPUID, x86asm.RDMSR, x86asm.RDTSC, x86asm.RDTSCP, x86asm.CQO, x86asm.CDQ, x86asm.POP, x86asm.LEAVE,
		x86asm.STOSB, x86asm.STOSW, x86asm.STOSD, x86asm.STOSQ, x86asm.MOVSB, x86asm.MOVSW, x86asm.MOVSD, x86asm.MOVSQ,
		x86asm.LODSB, x86asm.LODSW, x86asm.LODSD, x86asm.LODSQ, x86asm.SYSCALL:
		return true
	}
	return false
}

// FindBlocks runs Find on each block of order (rng: each block's
// instructions, blockOf: each instruction's block, preds: each block's
// predecessors) over its Span, into pats and skips by block, what it
// found in a next block moved there (Rehome). access is Find's.
func FindBlocks(insns []x86code.Insn, access func(i int) (x86code.MemAccess, bool), rng [][2]int, blockOf []int32, preds [][]int, order []int, pats []map[int]members.Bits, skips []map[int]bool) {
	for _, b := range order {
		start, end := Span(rng, blockOf, preds, b)
		pats[b], skips[b] = Find(insns, access, start, rng[b][0], rng[b][1], end)
	}
	Rehome(pats, rng, blockOf, order)
}

// Span is where Find may look around block b: on into the next block when b is
// its only way in (the store back after a branch), and back into the
// block before when that is b's only way in (a copy of the base made
// there).
func Span(rng [][2]int, blockOf []int32, preds [][]int, b int) (start, end int) {
	start, end = rng[b][0], rng[b][1]
	if end < len(blockOf) {
		if n := blockOf[end]; n >= 0 && len(preds[n]) == 1 && preds[n][0] == b {
			end = rng[n][1]
		}
	}
	if start > 0 && len(preds[b]) == 1 {
		if p := blockOf[start-1]; p >= 0 && preds[b][0] == int(p) {
			start = rng[p][0]
		}
	}
	return start, end
}

// Rehome moves what Find found for a block in the next one (a store
// back after a branch) into that block's patterns.
func Rehome(pats []map[int]members.Bits, rng [][2]int, blockOf []int32, order []int) {
	for _, b := range order {
		for i, p := range pats[b] {
			if i >= rng[b][0] && i < rng[b][1] {
				continue
			}
			n := blockOf[i]
			if pats[n] == nil {
				pats[n] = map[int]members.Bits{}
			}
			if _, ok := pats[n][i]; !ok {
				pats[n][i] = p
			}
			delete(pats[b], i)
		}
	}
}
