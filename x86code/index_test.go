package x86code

import (
	"slices"
	"testing"
)

// TestIndex finds the first instruction at or after every address of a
// function's code, and around it, as a search of the addresses does:
// with its ranges next to each other (a table) and far apart (a .cold
// part, searched).
func TestIndex(t *testing.T) {
	for _, second := range []uint64{0x1100, 0x900000} {
		ranges := []Range{{Addr: 0x1000, Code: small}, {Addr: second, Code: small}}
		var insns []Insn
		for _, r := range ranges {
			insns = append(insns, Decode(r.Code, r.Addr)...)
		}
		var x Index
		x.Reset(insns, ranges)
		for _, r := range ranges {
			for pc := r.Addr - 2; pc <= r.Addr+uint64(len(r.Code))+2; pc++ {
				want, _ := slices.BinarySearchFunc(insns, pc, func(in Insn, a uint64) int { return int(int64(in.PC) - int64(a)) })
				if got := x.At(pc); got != want {
					t.Errorf("second range at %#x: At(%#x) = %d, want %d", second, pc, got, want)
				}
			}
		}
	}
}
