package dwarfmap

import (
	"fmt"
	"sort"

	"golang.org/x/arch/x86/x86asm"
)

// Block is a basic block [Start, End) of machine code.
type Block struct {
	Start, End uint64
	Func       string
}

// BasicBlock returns the basic block holding addr, found by decoding the
// function range around it with x86asm: blocks start at the range start,
// at every branch target inside the range and after every jump or
// return. Calls do not end a block (the callee returns), matching what
// KLASY's nearest-line fallback needs: two addresses in one block run
// together or not at all.
func (x *Index) BasicBlock(addr uint64) (b Block, err error) {
	defer func() {
		if r := recover(); r != nil {
			b, err = Block{}, fmt.Errorf("decoding code at %#x: %v", addr, r)
		}
	}()
	if err := x.needImage(); err != nil {
		return Block{}, err
	}
	if x, err = x.use(funcAtSecs); err != nil {
		return Block{}, err
	}
	fi, ok := x.FuncAt(addr)
	if !ok {
		return Block{}, fmt.Errorf("no function with debug info at %#x", addr)
	}
	for _, r := range fi.Ranges {
		if addr < r[0] || addr >= r[1] {
			continue
		}
		code := x.img.ReadText(r[0], r[1]-r[0])
		if code == nil {
			return Block{}, fmt.Errorf("no code bytes for %s at %#x in the image", fi.Name, r[0])
		}
		leaders, err := blockLeaders(code, r[0])
		if err != nil {
			return Block{}, fmt.Errorf("decoding %s: %w", fi.Name, err)
		}
		i := sort.Search(len(leaders), func(i int) bool { return leaders[i] > addr })
		b := Block{Start: leaders[i-1], End: r[1], Func: fi.Name}
		if i < len(leaders) {
			b.End = leaders[i]
		}
		return b, nil
	}
	return Block{}, fmt.Errorf("%#x is not in %s", addr, fi.Name)
}

// SameBlock reports whether a and b lie in one basic block.
func (x *Index) SameBlock(a, b uint64) (bool, error) {
	ba, err := x.BasicBlock(a)
	if err != nil {
		return false, err
	}
	return b >= ba.Start && b < ba.End, nil
}

// blockLeaders returns the sorted first addresses of the basic blocks of
// code loaded at base. Instruction boundaries found on the way are also
// checked: a branch into the middle of an instruction is an error.
func blockLeaders(code []byte, base uint64) ([]uint64, error) {
	end := base + uint64(len(code))
	starts := map[uint64]bool{}
	leaders := map[uint64]bool{base: true}
	for off := 0; off < len(code); {
		pc := base + uint64(off)
		starts[pc] = true
		inst, err := x86asm.Decode(code[off:], 64)
		if err != nil || inst.Len == 0 {
			// Padding or data in the text (int3 fill, ud2 tails): a block
			// boundary, then resynchronise a byte later.
			leaders[pc+1] = true
			off++
			continue
		}
		next := pc + uint64(inst.Len)
		if t, ok := branchTarget(inst, next); ok && t >= base && t < end {
			leaders[t] = true
		}
		if endsBlock(inst.Op) && next < end {
			leaders[next] = true
		}
		off += inst.Len
	}
	out := make([]uint64, 0, len(leaders))
	for l := range leaders {
		if l < end && starts[l] {
			out = append(out, l)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out, nil
}

func branchTarget(inst x86asm.Inst, next uint64) (uint64, bool) {
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
