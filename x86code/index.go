package x86code

import "slices"

// Index finds a function's instructions by address: the first at or
// after an address, from a table by byte of the code (a look-up, not a
// search), or a search of their addresses where the function's ranges
// lie far apart (a .cold part). Its memory is reused from one function
// to the next.
type Index struct {
	pcs []uint64
	tab []int32 // At(lo + x) is tab[x]
	lo  uint64
}

// Reset indexes insns, the code of ranges decoded, by address.
func (x *Index) Reset(insns []Insn, ranges []Range) {
	x.pcs, x.tab = x.pcs[:0], x.tab[:0]
	for i := range insns {
		x.pcs = append(x.pcs, insns[i].PC)
	}
	if len(ranges) == 0 {
		return
	}
	lo, hi, size := ranges[0].Addr, ranges[0].Addr, uint64(0)
	for _, r := range ranges {
		lo, hi = min(lo, r.Addr), max(hi, r.Addr+uint64(len(r.Code)))
		size += uint64(len(r.Code))
	}
	if hi-lo > 2*size+64 {
		return
	}
	x.lo = lo
	n := int(hi-lo) + 1
	x.tab = slices.Grow(x.tab, n)[:n]
	if !slices.IsSorted(x.pcs) {
		k := 0
		for i := range x.tab {
			for k < len(x.pcs) && x.pcs[k] < lo+uint64(i) {
				k++
			}
			x.tab[i] = int32(k)
		}
		return
	}
	// By instruction, not by byte: the bytes up to each one's address
	// (from the one before's, on) are its.
	i := 0
	for k, pc := range x.pcs {
		for ; i < n && lo+uint64(i) <= pc; i++ {
			x.tab[i] = int32(k)
		}
	}
	for ; i < n; i++ {
		x.tab[i] = int32(len(x.pcs))
	}
}

// At is the index of the first instruction at pc or after.
func (x *Index) At(pc uint64) int {
	if pc >= x.lo && pc-x.lo < uint64(len(x.tab)) {
		return int(x.tab[pc-x.lo])
	}
	i, _ := slices.BinarySearch(x.pcs, pc)
	return i
}
