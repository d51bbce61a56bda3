package bitpat

import (
	"golang.org/x/arch/x86/x86asm"

	"github.com/klasy/klasy/accessinfer/members"
	"github.com/klasy/klasy/accessinfer/regs"
	"github.com/klasy/klasy/x86code"
)

// Find finds, in the block [lo, hi), the loads of a bitfield's
// storage unit whose bits the following instructions pick out (shr,
// and, test, bt) and the load-modify-store sequences that write some of
// its bits (and with a mask, or, store back): the bits each load tests
// and each store changes, relative to the first byte accessed. skip
// marks the loads that are part of a write. A pattern begun in the
// block may run on to end (>= hi) along the straight path into the
// next block when that block is reached from this one only (the store
// back after a branch on other flags), and the store may go through a
// copy of the load's base register, or the base moved by a constant
// (see bases), that copy made as far back as start (<= lo), the block
// before when it is this one's only way in. access(i) is
// x86code.Access of insns[i] (the caller's, worked out once per
// function).
func Find(insns []x86code.Insn, access func(i int) (x86code.MemAccess, bool), start, lo, hi, end int) (map[int]members.Bits, map[int]bool) {
	var pats map[int]members.Bits
	var skip map[int]bool
	put := func(i int, b members.Bits) {
		if pats == nil {
			pats = map[int]members.Bits{}
		}
		pats[i] = b
	}
	for i := lo; i < hi; i++ {
		inst := &insns[i].Inst
		acc, ok := access(i)
		if !ok || acc.Kind == x86code.Addr || acc.Bytes <= 0 || acc.Bytes > 8 {
			continue
		}
		width := uint(acc.Bytes * 8)
		unit := uint64(1)<<width - 1
		if width == 64 {
			unit = ^uint64(0)
		}
		// Direct forms: test/and/or/xor/bt* with an immediate on memory.
		if imm, ok := inst.Args[1].(x86asm.Imm); ok {
			if _, isMem := inst.Args[0].(x86asm.Mem); isMem {
				m := uint64(imm) & unit
				switch inst.Op {
				case x86asm.TEST:
					put(i, members.Bits{OK: true, Mask: m, Test: true})
				case x86asm.OR, x86asm.XOR:
					put(i, members.Bits{OK: true, Mask: m})
				case x86asm.AND:
					put(i, members.Bits{OK: true, Mask: ^m & unit})
				case x86asm.BT, x86asm.BTS, x86asm.BTR, x86asm.BTC:
					put(i, members.Bits{OK: true, Mask: 1 << (uint64(imm) % uint64(width)), Test: inst.Op == x86asm.BT})
				}
				continue
			}
		}
		if acc.Kind != x86code.Load || (inst.Op != x86asm.MOV && inst.Op != x86asm.MOVZX && inst.Op != x86asm.MOVSX) {
			continue
		}
		dst, ok := inst.Args[0].(x86asm.Reg)
		if !ok {
			continue
		}
		ri, _, ok := regs.Index(dst)
		if !ok {
			continue
		}
		var shift uint
		var andMask, orMask uint64
		haveAnd, merged := false, false
		al := bases(insns, start, i, acc.Mem)
		// Past hi only the store back is looked for: anything else
		// ends the pattern as at the block's end.
		past, hiAnd, hiHave, hiOr := false, uint64(0), false, uint64(0)
		for j := i + 1; j < end && j < i+20; j++ {
			if j == hi {
				past, hiAnd, hiHave, hiOr = true, andMask, haveAnd, orMask
			}
			nx := &insns[j].Inst
			// Stored back to the same place: a write of the changed bits.
			if nacc, ok := movStore(nx, j, access); ok && (regs.SameAddr(&insns[i], &insns[j], acc.Mem, nacc.Mem) || al.same(acc.Mem, nacc.Mem)) {
				if sr, ok := nx.Args[1].(x86asm.Reg); ok {
					if si, _, ok := regs.Index(sr); ok && si == ri && shift == 0 && (haveAnd || orMask != 0) {
						changed := orMask
						if haveAnd {
							changed |= ^andMask
						}
						changed &= unit
						if changed != 0 {
							put(j, members.Bits{OK: true, Mask: changed})
							if merged {
								// The load is also what the source reads,
								// for a member that is no bitfield
								// (p->flags = (p->flags & ~m) | v).
								put(i, members.Bits{OK: true, Mask: changed})
							} else {
								if skip == nil {
									skip = map[int]bool{}
								}
								skip[i] = true
							}
							goto done
						}
					}
				}
				break
			}
			al.step(nx)
			d, isReg := nx.Args[0].(x86asm.Reg)
			dj := -1
			if isReg {
				dj, _, _ = regs.Index(d)
			}
			imm, hasImm := nx.Args[1].(x86asm.Imm)
			if dj == ri && hasImm {
				switch nx.Op {
				case x86asm.SHR, x86asm.SAR:
					if haveAnd || orMask != 0 {
						if past {
							goto fallback
						}
						goto done
					}
					shift += uint(imm)
					continue
				case x86asm.AND:
					if !haveAnd {
						andMask, haveAnd = uint64(imm)<<shift, true
					} else {
						andMask &= uint64(imm) << shift
					}
					continue
				case x86asm.OR, x86asm.XOR:
					orMask |= uint64(imm) << shift
					continue
				case x86asm.TEST:
					if past {
						goto fallback
					}
					put(i, members.Bits{OK: true, Mask: (uint64(imm) << shift) & unit, Test: true})
					goto done
				case x86asm.BT:
					if past {
						goto fallback
					}
					put(i, members.Bits{OK: true, Mask: (1 << (uint64(imm) + uint64(shift))) & unit, Test: true})
					goto done
				}
			}
			// The and-ed unit or-ed with a register (the new bits, built
			// apart): a write of the bits the and cleared when the
			// result is stored back (the check above), not a read of
			// the bits it kept. The result may be in the other register.
			if sr, ok := nx.Args[1].(x86asm.Reg); ok && isReg && haveAnd && shift == 0 && (nx.Op == x86asm.OR || nx.Op == x86asm.XOR) {
				if si, _, ok := regs.Index(sr); ok && (si == ri || dj == ri) && dj >= 0 {
					ri, merged = dj, true
					continue
				}
			}
			if _, ok := nx.Args[1].(x86asm.Mem); ok && dj == ri && haveAnd && shift == 0 && (nx.Op == x86asm.OR || nx.Op == x86asm.XOR) {
				merged = true // the new bits read from memory (a spilled value)
				continue
			}
			// A copy of the merged value to another register (kept to
			// test the new bits) leaves it where it is, to be stored.
			if sr, ok := nx.Args[1].(x86asm.Reg); ok && isReg && merged && nx.Op == x86asm.MOV && dj != ri {
				if si, _, ok := regs.Index(sr); ok && si == ri {
					continue
				}
			}
			// Any other use of the register ends the pattern: what was
			// and-ed so far is what the code looks at.
			if regs.Uses(nx, ri) || regs.Writes(nx, ri) {
				if past {
					goto fallback
				}
				if haveAnd && orMask == 0 {
					// Compared with a constant: a test (p->bf == 3).
					_, cmpImm := nx.Args[1].(x86asm.Imm)
					put(i, members.Bits{OK: true, Mask: andMask & unit, Test: nx.Op == x86asm.CMP && dj == ri && cmpImm})
				}
				goto done
			}
		}
		if past {
			goto fallback
		}
		if haveAnd && orMask == 0 {
			put(i, members.Bits{OK: true, Mask: andMask & unit})
		}
		goto done
	fallback:
		if hiHave && hiOr == 0 {
			put(i, members.Bits{OK: true, Mask: hiAnd & unit})
		}
	done:
	}
	return pats, skip
}

// movStore is the operand a mov, insns[j], stores to (ok false for
// any other instruction).
func movStore(inst *x86asm.Inst, j int, access func(int) (x86code.MemAccess, bool)) (x86code.MemAccess, bool) {
	if inst.Op != x86asm.MOV {
		return x86code.MemAccess{}, false
	}
	acc, ok := access(j)
	return acc, ok && acc.Kind == x86code.Store
}
