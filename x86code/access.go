package x86code

import (
	"cmp"
	"slices"

	"golang.org/x/arch/x86/x86asm"
)

// Insn is one decoded instruction at its address.
type Insn struct {
	PC   uint64
	Inst x86asm.Inst
	// acc is Access(&Inst) as an accCode, worked out when decoding
	// (a Decoder's once per template); 0 when not (an Insn made by
	// hand): Access then asks Inst.
	acc accCode
}

// Access is Access(&in.Inst). From a Decoder's template it costs no
// walk of the arguments: that walk's type tests, which branch one way
// or the other instruction after instruction, cost more than the rest.
func (in *Insn) Access() (MemAccess, bool) {
	c := in.acc
	if c == 0 {
		c = accessCode(&in.Inst)
	}
	return c.access(&in.Inst)
}

// End is the address of the next instruction.
func (in *Insn) End() uint64 { return in.PC + uint64(in.Inst.Len) }

// Decode decodes code loaded at base from its first byte to its end, as
// objdump does. A byte that does not decode is skipped (it is no
// instruction); decoding resumes at the next byte.
func Decode(code []byte, base uint64) []Insn {
	return DecodeAppend(make([]Insn, 0, len(code)/4), code, base)
}

// DecodeAppend is Decode appending to dst (a buffer reused from one
// function to the next).
func DecodeAppend(dst []Insn, code []byte, base uint64) []Insn {
	sweep(code, base, func(pc uint64, inst *x86asm.Inst) bool {
		if inst != nil {
			dst = append(dst, Insn{PC: pc, Inst: *inst, acc: accessCode(inst)})
		}
		return true
	})
	return dst
}

// EndsBlock reports whether inst ends a basic block: a jump, a return,
// a trap that does not return (Leaders' rule).
func EndsBlock(inst *x86asm.Inst) bool { return endsBlock(inst.Op) }

// MemKind says what an instruction does with its memory operand.
type MemKind uint8

const (
	Load  MemKind = iota + 1 // reads it
	Store                    // writes it
	RMW                      // reads and writes it (add [m], r; inc [m]; xchg)
	Addr                     // computes its address only (lea)
)

func (k MemKind) String() string {
	switch k {
	case Load:
		return "load"
	case Store:
		return "store"
	case RMW:
		return "rmw"
	case Addr:
		return "lea"
	}
	return "none"
}

// MemAccess is the explicit memory operand of an instruction and what
// the instruction does with it.
type MemAccess struct {
	Kind MemKind
	Mem  x86asm.Mem
	// Bytes is the operand's size (for lea, 0).
	Bytes int
	// Branch: the instruction transfers control (call [m], jmp [m]), so
	// the instruction after it is not what runs next.
	Branch bool
}

// Access returns the memory operand of inst and how it is used, ok false
// when inst has none (or only implicit ones: push, string instructions).
func Access(inst *x86asm.Inst) (MemAccess, bool) {
	return accessCode(inst).access(inst)
}

// accCode is what Access says of an instruction but its operand's
// displacement: 0 not known; accNone no memory operand; otherwise its
// argument's index (bits 0-1), its MemKind (bits 2-4) and Branch (5).
type accCode uint8

const (
	accNone   accCode = 1 << 7
	accBranch accCode = 1 << 5
)

// access is the MemAccess c describes, of inst.
func (c accCode) access(inst *x86asm.Inst) (MemAccess, bool) {
	if c == accNone {
		return MemAccess{}, false
	}
	acc := MemAccess{Mem: inst.Args[c&3].(x86asm.Mem), Kind: MemKind(c >> 2 & 7), Bytes: inst.MemBytes, Branch: c&accBranch != 0}
	if acc.Kind == Addr {
		acc.Bytes = 0
	}
	return acc, true
}

// accessCode works out inst's accCode (never 0).
func accessCode(inst *x86asm.Inst) accCode {
	acc, mi, ok := accessOf(inst)
	if !ok {
		return accNone
	}
	c := accCode(mi) | accCode(acc.Kind)<<2
	if acc.Branch {
		c |= accBranch
	}
	return c
}

// accessOf is Access, with the index of the operand.
func accessOf(inst *x86asm.Inst) (MemAccess, int, bool) {
	mi := -1
	for i, a := range inst.Args {
		if a == nil {
			break
		}
		if _, ok := a.(x86asm.Mem); ok {
			mi = i
			break
		}
	}
	if mi < 0 {
		return MemAccess{}, mi, false
	}
	m := inst.Args[mi].(x86asm.Mem)
	acc := MemAccess{Mem: m, Bytes: inst.MemBytes}
	switch inst.Op {
	case x86asm.LEA:
		acc.Kind, acc.Bytes = Addr, 0
	case x86asm.NOP, x86asm.PREFETCHNTA, x86asm.PREFETCHT0, x86asm.PREFETCHT1, x86asm.PREFETCHT2, x86asm.PREFETCHW,
		x86asm.CLFLUSH, x86asm.INVLPG:
		return MemAccess{}, mi, false
	case x86asm.CALL, x86asm.JMP, x86asm.LCALL, x86asm.LJMP:
		acc.Kind, acc.Branch = Load, true
	case x86asm.CMP, x86asm.TEST, x86asm.BT, x86asm.PUSH, x86asm.UCOMISS, x86asm.UCOMISD, x86asm.COMISS, x86asm.COMISD:
		acc.Kind = Load
	case x86asm.POP,
		// One operand, written: saved state and control words, stores of
		// the x87 stack, descriptor-table registers.
		x86asm.FXSAVE, x86asm.FXSAVE64, x86asm.XSAVE, x86asm.XSAVE64, x86asm.XSAVEOPT, x86asm.XSAVEOPT64,
		x86asm.XSAVEC, x86asm.XSAVES, x86asm.FNSAVE, x86asm.FNSTENV, x86asm.FNSTCW, x86asm.FNSTSW, x86asm.STMXCSR,
		x86asm.FST, x86asm.FSTP, x86asm.FIST, x86asm.FISTP, x86asm.FISTTP, x86asm.FBSTP,
		x86asm.SGDT, x86asm.SIDT, x86asm.SLDT, x86asm.STR, x86asm.SMSW:
		acc.Kind = Store
	case x86asm.XCHG, x86asm.CMPXCHG, x86asm.CMPXCHG8B, x86asm.CMPXCHG16B, x86asm.XADD:
		acc.Kind = RMW
	case x86asm.ADD, x86asm.ADC, x86asm.SUB, x86asm.SBB, x86asm.AND, x86asm.OR, x86asm.XOR,
		x86asm.INC, x86asm.DEC, x86asm.NEG, x86asm.NOT,
		x86asm.SHL, x86asm.SHR, x86asm.SAR, x86asm.ROL, x86asm.ROR, x86asm.RCL, x86asm.RCR,
		x86asm.SHLD, x86asm.SHRD, x86asm.BTS, x86asm.BTR, x86asm.BTC:
		if mi == 0 {
			acc.Kind = RMW
		} else {
			acc.Kind = Load
		}
	default:
		// mov, movzx, setcc, cmovcc, SSE moves and the rest: the memory
		// operand is written when it is the destination (first in Intel
		// order) and read otherwise.
		if mi == 0 && len(inst.Args) > 1 && inst.Args[1] != nil {
			acc.Kind = Store
		} else if mi == 0 && isSetcc(inst.Op) {
			acc.Kind = Store
		} else {
			acc.Kind = Load
		}
	}
	return acc, mi, true
}

func isSetcc(op x86asm.Op) bool {
	switch op {
	case x86asm.SETA, x86asm.SETAE, x86asm.SETB, x86asm.SETBE, x86asm.SETE, x86asm.SETG, x86asm.SETGE,
		x86asm.SETL, x86asm.SETLE, x86asm.SETNE, x86asm.SETNO, x86asm.SETNP, x86asm.SETNS, x86asm.SETO,
		x86asm.SETP, x86asm.SETS:
		return true
	}
	return false
}

// DWARFReg is the x86-64 DWARF register number of a 64-bit general
// register (System V psABI fig. 3.36), -1 for others. A narrower name of
// a register (eax for rax) is the same register.
func DWARFReg(r x86asm.Reg) int {
	switch {
	case r >= x86asm.RAX && r <= x86asm.R15:
		return DWARFOf[r-x86asm.RAX]
	case r >= x86asm.EAX && r <= x86asm.R15L:
		return DWARFOf[r-x86asm.EAX]
	}
	return -1
}

// DWARFOf maps rax, rcx, rdx, rbx, rsp, rbp, rsi, rdi, r8..r15 (x86asm's
// order) to DWARF numbers.
var DWARFOf = [16]int{0, 2, 1, 3, 7, 6, 4, 5, 8, 9, 10, 11, 12, 13, 14, 15}

// LeadersOf is Leaders for code already decoded (Decode) that spans
// [base, end).
func LeadersOf(insns []Insn, base, end uint64) []uint64 {
	leaders := []uint64{base}
	next := base
	var targets []uint64
	for i := range insns {
		in := &insns[i]
		if in.PC != next && in.PC < end {
			// A byte that did not decode ends a block; a new one starts
			// after it.
			leaders = append(leaders, in.PC)
		}
		next = in.End()
		if t, ok := branchTarget(&in.Inst, next); ok && t >= base && t < end {
			targets = append(targets, t)
		}
		if endsBlock(in.Inst.Op) && next < end {
			leaders = append(leaders, next)
		}
	}
	// Branch targets are leaders where an instruction starts there.
	for _, t := range targets {
		if _, ok := slices.BinarySearchFunc(insns, t, func(in Insn, t uint64) int { return cmp.Compare(in.PC, t) }); ok {
			leaders = append(leaders, t)
		}
	}
	slices.Sort(leaders)
	leaders = slices.Compact(leaders)
	// The start of code that does not decode is no leader.
	return slices.DeleteFunc(leaders, func(l uint64) bool {
		_, ok := slices.BinarySearchFunc(insns, l, func(in Insn, t uint64) int { return cmp.Compare(in.PC, t) })
		return !ok
	})
}

// Scan decodes code loaded at base once for the instruction starts and
// the basic block leaders (Leaders' rule), keeping no instruction.
func Scan(code []byte, base uint64) (starts, leaders []uint64) {
	end := base + uint64(len(code))
	starts = make([]uint64, 0, len(code)/4)
	leaders = []uint64{base}
	var targets []uint64
	next := base
	sweep(code, base, func(pc uint64, inst *x86asm.Inst) bool {
		if inst == nil {
			return true
		}
		if pc != next {
			leaders = append(leaders, pc)
		}
		starts = append(starts, pc)
		next = pc + uint64(inst.Len)
		if t, ok := branchTarget(inst, next); ok && t >= base && t < end {
			targets = append(targets, t)
		}
		if endsBlock(inst.Op) && next < end {
			leaders = append(leaders, next)
		}
		return true
	})
	for _, t := range targets {
		if _, ok := slices.BinarySearch(starts, t); ok {
			leaders = append(leaders, t)
		}
	}
	slices.Sort(leaders)
	leaders = slices.Compact(leaders)
	leaders = slices.DeleteFunc(leaders, func(l uint64) bool {
		_, ok := slices.BinarySearch(starts, l)
		return !ok
	})
	return starts, leaders
}
