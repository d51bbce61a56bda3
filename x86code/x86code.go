// Package x86code reads x86-64 machine code with golang.org/x/arch's
// x86asm: where the basic blocks of a function start (KLASY's
// nearest-line rule asks whether two addresses run together) and where
// its instructions start (a probe or a patch goes on an instruction
// boundary, never inside one).
//
// Code is decoded linearly from its first byte, as objdump does. A byte
// that does not decode (padding, data in the text) counts as a one-byte
// gap: decoding resumes at the next byte. A Decoder gives x86asm's
// answers faster over a whole image, from templates of the
// instructions' shapes.
package x86code

import (
	"fmt"
	"sort"

	"golang.org/x/arch/x86/x86asm"
)

// sweep decodes code loaded at base from its first byte, calling fn with
// each instruction, or with inst nil for a byte that does not decode,
// until fn returns false.
func sweep(code []byte, base uint64, fn func(pc uint64, inst *x86asm.Inst) bool) {
	// One Inst for the whole sweep: fn gets a pointer to it, which
	// would move a fresh one to the heap for every instruction.
	var inst x86asm.Inst
	for off := 0; off < len(code); {
		pc := base + uint64(off)
		var err error
		inst, err = x86asm.Decode(code[off:], 64)
		if err != nil || inst.Len == 0 {
			if !fn(pc, nil) {
				return
			}
			off++
			continue
		}
		if !fn(pc, &inst) {
			return
		}
		off += inst.Len
	}
}

// Leaders returns the sorted first addresses of the basic blocks of code
// loaded at base: its first byte, every branch target inside it, and the
// instruction after every jump or return. Calls do not end a block (the
// callee returns): two addresses in one block run together or not at
// all. A byte that does not decode ends a block, and a new one starts
// after it. Branch targets inside an instruction are not leaders.
func Leaders(code []byte, base uint64) []uint64 {
	end := base + uint64(len(code))
	starts := map[uint64]bool{}
	leaders := map[uint64]bool{base: true}
	sweep(code, base, func(pc uint64, inst *x86asm.Inst) bool {
		starts[pc] = true
		if inst == nil {
			leaders[pc+1] = true
			return true
		}
		next := pc + uint64(inst.Len)
		if t, ok := branchTarget(inst, next); ok && t >= base && t < end {
			leaders[t] = true
		}
		if endsBlock(inst.Op) && next < end {
			leaders[next] = true
		}
		return true
	})
	out := make([]uint64, 0, len(leaders))
	for l := range leaders {
		if l < end && starts[l] {
			out = append(out, l)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// IsBoundary reports whether an instruction of code (loaded at base)
// starts at addr, decoding from the start of code. The start of a byte
// that does not decode is not a boundary.
func IsBoundary(code []byte, base, addr uint64) (bool, error) {
	if addr < base || addr-base >= uint64(len(code)) {
		return false, fmt.Errorf("%#x is outside the code at %#x..%#x", addr, base, base+uint64(len(code)))
	}
	found := false
	sweep(code, base, func(pc uint64, inst *x86asm.Inst) bool {
		found = pc == addr && inst != nil
		return pc < addr
	})
	return found, nil
}

func branchTarget(inst *x86asm.Inst, next uint64) (uint64, bool) {
	if !endsBlock(inst.Op) || inst.Op == x86asm.RET {
		return 0, false
	}
	for _, a := range inst.Args {
		if rel, ok := a.(x86asm.Rel); ok {
			return uint64(int64(next) + int64(rel)), true
		}
	}
	return 0, false
}

func endsBlock(op x86asm.Op) bool {
	switch op {
	case x86asm.JA, x86asm.JAE, x86asm.JB, x86asm.JBE, x86asm.JCXZ, x86asm.JE, x86asm.JECXZ,
		x86asm.JG, x86asm.JGE, x86asm.JL, x86asm.JLE, x86asm.JMP, x86asm.JNE, x86asm.JNO,
		x86asm.JNP, x86asm.JNS, x86asm.JO, x86asm.JP, x86asm.JRCXZ, x86asm.JS,
		x86asm.LOOP, x86asm.LOOPE, x86asm.LOOPNE, x86asm.RET, x86asm.LRET, x86asm.IRET,
		x86asm.IRETD, x86asm.IRETQ, x86asm.UD2, x86asm.HLT, x86asm.SYSRET, x86asm.SYSEXIT:
		return true
	}
	return false
}
