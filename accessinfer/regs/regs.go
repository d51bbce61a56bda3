package regs

import (
	"golang.org/x/arch/x86/x86asm"

	"github.com/klasy/klasy/x86code"
)

// Index maps any width of a general register to its index (x86asm's
// 64-bit order), and reports whether it is the full 64-bit register.
func Index(r x86asm.Reg) (int, bool, bool) {
	e := regTable[r] // asked at nearly every instruction: a table, not a search
	return int(e & 15), e&full != 0, e&known != 0
}

const (
	full  = 1 << 4
	known = 1 << 5
)

// regTable holds Index's answer for every register, by value.
var regTable = func() (t [256]uint8) {
	for r := range t {
		t[r] = indexOf(x86asm.Reg(r))
	}
	return t
}()

func indexOf(r x86asm.Reg) uint8 {
	switch {
	case r >= x86asm.RAX && r <= x86asm.R15:
		return uint8(r-x86asm.RAX) | full | known
	case r >= x86asm.EAX && r <= x86asm.R15L:
		return uint8(r-x86asm.EAX) | known
	case r >= x86asm.AX && r <= x86asm.R15W:
		return uint8(r-x86asm.AX) | known
	case r >= x86asm.AL && r <= x86asm.BL:
		return uint8(r-x86asm.AL) | known
	case r >= x86asm.AH && r <= x86asm.BH:
		return uint8(r-x86asm.AH) | known
	case r >= x86asm.SPB && r <= x86asm.R15B:
		return uint8(r-x86asm.SPB+4) | known
	}
	return 0
}

// ToDWARF maps Index's order (x86asm's) to DWARF register numbers;
// FromDWARF maps DWARF's 0-15 back.
var (
	ToDWARF   = x86code.DWARFOf
	FromDWARF = func() (t [16]int) {
		for i, d := range ToDWARF {
			t[d] = i
		}
		return t
	}()
)

// CallerSaved are clobbered by a call (System V), by Index.
var CallerSaved = []int{0, 1, 2, 6, 7, 8, 9, 10, 11}

// Writes reports whether inst may write register index ri.
func Writes(inst *x86asm.Inst, ri int) bool {
	return WriteMask(inst)&(1<<ri) != 0
}

// WriteMask has bit ri set for each register index ri that inst may
// write (Writes): one pass for all sixteen.
func WriteMask(inst *x86asm.Inst) uint16 {
	if !KnownOp(inst.Op) {
		return 0xffff
	}
	var m uint16
	if d, ok := inst.Args[0].(x86asm.Reg); ok && !ReadsOnly(inst.Op) {
		if di, _, ok := Index(d); ok {
			m |= 1 << di
		}
	}
	if inst.Op == x86asm.CALL {
		for _, c := range CallerSaved {
			m |= 1 << c
		}
	}
	return m
}

// ReadsOnly: the instruction reads its first operand, writes no register.
func ReadsOnly(op x86asm.Op) bool {
	switch op {
	case x86asm.CMP, x86asm.TEST, x86asm.BT, x86asm.PUSH:
		return true
	}
	return false
}

// KnownOp: the instruction writes no register but its first operand
// (and the flags), or none.
func KnownOp(op x86asm.Op) bool {
	// Asked at every instruction: a table, not the switch's search.
	if int(op) < len(knownOps) {
		return knownOps[op]
	}
	return knownOp(op)
}

var knownOps = func() []bool {
	t := make([]bool, x86asm.XTEST+1)
	for op := range t {
		t[op] = knownOp(x86asm.Op(op))
	}
	return t
}()

func knownOp(op x86asm.Op) bool {
	switch op {
	case x86asm.MOV, x86asm.MOVZX, x86asm.MOVSX, x86asm.MOVSXD, x86asm.LEA,
		x86asm.ADD, x86asm.SUB, x86asm.AND, x86asm.OR, x86asm.XOR, x86asm.ADC, x86asm.SBB,
		x86asm.INC, x86asm.DEC, x86asm.NEG, x86asm.NOT,
		x86asm.SHL, x86asm.SHR, x86asm.SAR, x86asm.ROL, x86asm.ROR, x86asm.RCL, x86asm.RCR,
		x86asm.SHLD, x86asm.SHRD, x86asm.BSF, x86asm.BSR, x86asm.BSWAP, x86asm.POPCNT,
		x86asm.LZCNT, x86asm.TZCNT, x86asm.BTS, x86asm.BTR, x86asm.BTC, x86asm.BT,
		x86asm.CMP, x86asm.TEST, x86asm.NOP, x86asm.PUSH, x86asm.POP, x86asm.CALL, x86asm.RET,
		x86asm.JMP, x86asm.JA, x86asm.JAE, x86asm.JB, x86asm.JBE, x86asm.JE, x86asm.JG, x86asm.JGE,
		x86asm.JL, x86asm.JLE, x86asm.JNE, x86asm.JNO, x86asm.JNP, x86asm.JNS, x86asm.JO, x86asm.JP, x86asm.JS,
		x86asm.CMOVA, x86asm.CMOVAE, x86asm.CMOVB, x86asm.CMOVBE, x86asm.CMOVE, x86asm.CMOVG, x86asm.CMOVGE,
		x86asm.CMOVL, x86asm.CMOVLE, x86asm.CMOVNE, x86asm.CMOVNO, x86asm.CMOVNP, x86asm.CMOVNS, x86asm.CMOVO,
		x86asm.CMOVP, x86asm.CMOVS,
		x86asm.SETA, x86asm.SETAE, x86asm.SETB, x86asm.SETBE, x86asm.SETE, x86asm.SETG, x86asm.SETGE,
		x86asm.SETL, x86asm.SETLE, x86asm.SETNE, x86asm.SETNO, x86asm.SETNP, x86asm.SETNS, x86asm.SETO,
		x86asm.SETP, x86asm.SETS,
		x86asm.UD2, x86asm.INT, x86asm.LFENCE, x86asm.MFENCE, x86asm.SFENCE, x86asm.PAUSE,
		x86asm.PREFETCHNTA, x86asm.PREFETCHT0, x86asm.PREFETCHT1, x86asm.PREFETCHT2, x86asm.PREFETCHW,
		x86asm.MOVQ, x86asm.MOVD, x86asm.MOVDQU, x86asm.MOVDQA, x86asm.MOVUPS, x86asm.MOVAPS,
		x86asm.PXOR, x86asm.XORPS, x86asm.MOVNTI, x86asm.IMUL:
		return true
	}
	return false
}

// FeedsRepString reports whether the address lea instruction i
// computes reaches %rdi or %rsi (through movs) of a rep stos or rep movs
// later in its block.
func FeedsRepString(insns []x86code.Insn, i, end int) bool {
	dst, ok := insns[i].Inst.Args[0].(x86asm.Reg)
	if !ok {
		return false
	}
	di, full, ok := Index(dst)
	if !ok || !full {
		return false
	}
	holds := uint32(1) << di
	for j := i + 1; j < end && j <= i+16; j++ {
		nx := &insns[j].Inst
		stos := nx.Op == x86asm.STOSB || nx.Op == x86asm.STOSW || nx.Op == x86asm.STOSD || nx.Op == x86asm.STOSQ
		// (SSE's movsd has F2, not the rep prefix, required below.)
		movs := nx.Op == x86asm.MOVSB || nx.Op == x86asm.MOVSW || nx.Op == x86asm.MOVSD || nx.Op == x86asm.MOVSQ
		if stos || movs {
			rep := false
			for _, p := range nx.Prefix {
				rep = rep || p&^x86asm.PrefixImplicit == x86asm.PrefixREP
			}
			rdi, _, _ := Index(x86asm.RDI)
			rsi, _, _ := Index(x86asm.RSI)
			return rep && (holds&(1<<rdi) != 0 || (movs && holds&(1<<rsi) != 0))
		}
		if nx.Op == x86asm.MOV {
			if d, ok := nx.Args[0].(x86asm.Reg); ok {
				if dj, f, ok := Index(d); ok {
					src, isReg := nx.Args[1].(x86asm.Reg)
					si := -1
					if isReg {
						si, _, _ = Index(src)
					}
					if f && si >= 0 && holds&(1<<si) != 0 {
						holds |= 1 << dj
					} else {
						holds &^= 1 << dj
					}
					continue
				}
			}
		}
		for r := 0; r < 16; r++ {
			if holds&(1<<r) != 0 && Writes(nx, r) {
				holds &^= 1 << r
			}
		}
		if holds == 0 {
			return false
		}
	}
	return false
}

// AlignedRep reports whether the address lea instruction i computes is
// rounded down (and with a negative constant) and then starts a rep
// stos or rep movs (FeedsRepString).
func AlignedRep(insns []x86code.Insn, i, end int) bool {
	dst, ok := insns[i].Inst.Args[0].(x86asm.Reg)
	di, full, ok2 := Index(dst)
	for j := i + 1; ok && ok2 && full && j < end && j <= i+8; j++ {
		nx := &insns[j].Inst
		if imm, isImm := nx.Args[1].(x86asm.Imm); isImm && nx.Op == x86asm.AND && nx.Args[0] == dst {
			return imm < 0 && FeedsRepString(insns, j, end)
		}
		if Writes(nx, di) {
			return false
		}
	}
	return false
}

// SameAddr reports whether memory operand m of instruction a and n of
// instruction b are the same address: RIP-relative ones by the address
// they resolve to.
func SameAddr(a, b *x86code.Insn, m, n x86asm.Mem) bool {
	if m.Base != x86asm.RIP || n.Base != x86asm.RIP || m.Segment != n.Segment {
		return m == n
	}
	return a.End()+uint64(m.Disp) == b.End()+uint64(n.Disp)
}

// MemUses reports whether memory operand m's address reads register
// index ri.
func MemUses(m x86asm.Mem, ri int) bool {
	for _, r := range []x86asm.Reg{m.Base, m.Index} {
		if i, _, ok := Index(r); ok && i == ri {
			return true
		}
	}
	return false
}

// Uses reports whether inst reads register index ri (roughly: names
// it anywhere).
func Uses(inst *x86asm.Inst, ri int) bool {
	for _, a := range inst.Args {
		switch a := a.(type) {
		case x86asm.Reg:
			if i, _, ok := Index(a); ok && i == ri {
				return true
			}
		case x86asm.Mem:
			if MemUses(a, ri) {
				return true
			}
		}
	}
	return false
}

// WholeArea reports whether op's memory operand is the start of a
// structure the instruction reads or writes whole (a descriptor table
// register's limit and base, an FPU or XSAVE area): the source hands
// the asm the structure's address (native_load_gdt(&gdt_descr),
// os_xrstor(&fpstate->regs.xsave, ..)), naming no member inside it.
func WholeArea(op x86asm.Op) bool {
	switch op {
	case x86asm.LGDT, x86asm.LIDT, x86asm.SGDT, x86asm.SIDT,
		x86asm.FXSAVE, x86asm.FXSAVE64, x86asm.FXRSTOR, x86asm.FXRSTOR64,
		x86asm.XSAVE, x86asm.XSAVE64, x86asm.XSAVEC, x86asm.XSAVEC64, x86asm.XSAVEOPT, x86asm.XSAVEOPT64,
		x86asm.XSAVES, x86asm.XSAVES64, x86asm.XRSTOR, x86asm.XRSTOR64, x86asm.XRSTORS, x86asm.XRSTORS64,
		x86asm.FNSAVE, x86asm.FRSTOR, x86asm.FLDENV, x86asm.FNSTENV:
		return true
	}
	return false
}

// Alias finds among insns[from:to] the last lea setting one 64-bit
// register to the other plus a constant, one of them base: the other
// register, what it holds less base, the lea's index (-1: none). GCC's
// inline memcpy(&io->addr, ..) stores its first word through io's
// register, the rest through one set so to the member.
func Alias(insns []x86code.Insn, base x86asm.Reg, from, to int) (other x86asm.Reg, delta int64, at int) {
	at = -1
	for j := from; j < to; j++ {
		in := &insns[j].Inst
		d, ok := in.Args[0].(x86asm.Reg)
		lm, ok2 := in.Args[1].(x86asm.Mem)
		if _, full, _ := Index(d); in.Op != x86asm.LEA || !ok || !ok2 || !full || lm.Index != 0 || lm.Segment != 0 || lm.Base == d {
			continue
		}
		if base == d && lm.Base != 0 && lm.Base != x86asm.RIP {
			other, delta, at = lm.Base, -lm.Disp, j
		} else if base == lm.Base {
			other, delta, at = d, lm.Disp, j
		}
	}
	return other, delta, at
}

// Holds says whether, with the lea at index at from Alias, base at
// instruction i and other at instruction j (both after it) hold what
// they held there: other at j is then base at i plus the lea's
// constant.
func Holds(insns []x86code.Insn, at, i, j int, base, other x86asm.Reg) bool {
	keeps := func(to int, r x86asm.Reg) bool {
		ri, _, _ := Index(r)
		for t := at + 1; t < to; t++ {
			if Writes(&insns[t].Inst, ri) {
				return false
			}
		}
		return to > at
	}
	return at >= 0 && keeps(i, base) && keeps(j, other)
}

// MemsetWord reports whether store i of an immediate, through a base
// register without index, is a head or tail word of an inlined memset:
// within 8 instructions a lea of that base plus start+8 is rounded down
// to start a rep stos (AlignedRep), and the store is at start or past
// it. start is the displacement the memset begins at.
func MemsetWord(insns []x86code.Insn, i, end int) (start int64, ok bool) {
	in := &insns[i].Inst
	m, isMem := in.Args[0].(x86asm.Mem)
	if _, isImm := in.Args[1].(x86asm.Imm); in.Op != x86asm.MOV || !isMem || !isImm || m.Index != 0 || m.Segment != 0 || m.Base == x86asm.RIP {
		return 0, false
	}
	bi, full, ok := Index(m.Base)
	if !ok || !full {
		return 0, false
	}
	for _, dir := range []int{1, -1} {
		for j := i + dir; j >= 0 && j < end && j >= i-8 && j <= i+8; j += dir {
			nx := &insns[j].Inst
			if l, isMem := nx.Args[1].(x86asm.Mem); nx.Op == x86asm.LEA && isMem && l.Base == m.Base && l.Index == 0 && AlignedRep(insns, j, end) {
				return l.Disp - 8, m.Disp >= l.Disp-8
			}
			if Writes(nx, bi) {
				break
			}
		}
	}
	return 0, false
}

// RSPDelta is how far the pushes and pops of instructions [from, to)
// move the stack pointer; false if another instruction writes it.
func RSPDelta(insns []x86code.Insn, from, to int) (int64, bool) {
	sp, _, _ := Index(x86asm.RSP)
	var d int64
	for j := from; j < to; j++ {
		switch in := &insns[j].Inst; {
		case in.Op == x86asm.PUSH:
			d -= 8
		case in.Op == x86asm.POP:
			d += 8
		case Writes(in, sp) || in.Op == x86asm.CALL:
			return 0, false
		}
	}
	return d, true
}

// RetStore reports whether instruction j stores %rax or %rdx as a
// call before it in its block (which starts at lo) left them: a struct
// returned in registers (inode->i_mtime = current_time(inode)) stored
// whole.
func RetStore(insns []x86code.Insn, lo, j int) bool {
	in := &insns[j].Inst
	if in.Op != x86asm.MOV {
		return false
	}
	r, ok := in.Args[1].(x86asm.Reg)
	if _, isMem := in.Args[0].(x86asm.Mem); !isMem || !ok || (r != x86asm.RAX && r != x86asm.RDX) {
		return false
	}
	ri, _, _ := Index(r)
	for k := j - 1; k >= lo && k >= j-16; k-- {
		p := &insns[k].Inst
		if p.Op == x86asm.CALL {
			return true
		}
		if Writes(p, ri) {
			return false
		}
	}
	return false
}

// ImmStore reports whether instruction j is a mov of an immediate to
// memory.
func ImmStore(insns []x86code.Insn, j int) bool {
	in := &insns[j].Inst
	if in.Op != x86asm.MOV {
		return false
	}
	_, isMem := in.Args[0].(x86asm.Mem)
	_, isImm := in.Args[1].(x86asm.Imm)
	return isMem && isImm
}

// StoredNext reports whether the register r that instruction i loads
// is next used, before end, by a mov storing all of it to memory.
func StoredNext(insns []x86code.Insn, i, end int, r x86asm.Reg) bool {
	ri, _, ok := Index(r)
	if !ok {
		return false
	}
	for j := i + 1; j < end && j <= i+8; j++ {
		nx := &insns[j].Inst
		if nx.Op == x86asm.MOV {
			if s, ok := nx.Args[1].(x86asm.Reg); ok && s == r {
				m, isMem := nx.Args[0].(x86asm.Mem)
				return isMem && !MemUses(m, ri)
			}
		}
		if Uses(nx, ri) || Writes(nx, ri) {
			return false
		}
	}
	return false
}
