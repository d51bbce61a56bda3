// Package regflow relates the registers of one basic block to a base
// register: another register a lea set to the base plus a constant,
// while neither changes. Inference uses it to see the moves of a copy
// through both as one copy (GCC's inline memcpy(&io->addr, ..) stores
// its first word through io's register, the rest through one set to
// the member).
package regflow

import (
	"golang.org/x/arch/x86/x86asm"

	"github.com/klasy/klasy/x86code"
)

// Writes says whether an instruction may change a register (the
// caller's model of the instructions).
type Writes func(inst *x86asm.Inst, r x86asm.Reg) bool

// Alias finds among insns[from:to] the last lea setting one 64-bit
// register to the other plus a constant, one of them base: the other
// register, what it holds less base, the lea's index (-1: none).
func Alias(insns []x86code.Insn, base x86asm.Reg, from, to int) (other x86asm.Reg, delta int64, at int) {
	at = -1
	for j := from; j < to; j++ {
		in := &insns[j].Inst
		d, ok := in.Args[0].(x86asm.Reg)
		lm, ok2 := in.Args[1].(x86asm.Mem)
		if in.Op != x86asm.LEA || !ok || !ok2 || d < x86asm.RAX || d > x86asm.R15 || lm.Index != 0 || lm.Segment != 0 || lm.Base == d {
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
func Holds(insns []x86code.Insn, writes Writes, at, i, j int, base, other x86asm.Reg) bool {
	keeps := func(to int, r x86asm.Reg) bool {
		for t := at + 1; t < to; t++ {
			if writes(&insns[t].Inst, r) {
				return false
			}
		}
		return to > at
	}
	return at >= 0 && keeps(i, base) && keeps(j, other)
}
