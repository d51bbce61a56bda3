package collect

import (
	"cmp"
	"slices"
)

// segment is a run of outs[fn][lo:hi] in one of fn's address ranges.
type segment struct {
	fn, lo, hi  int
	first, last uint64
}

// Merge returns the elements of outs, outs[i] those of function i by
// address (addr) already, in the order slices.SortStableFunc of their
// concatenation by address gives. ranges(i) are function i's address
// ranges: functions' ranges do not overlap, so the runs of each in one
// range, ordered by their first addresses, follow one another; if
// some do not (overlapping ranges), the concatenation is sorted.
func Merge[T any](outs [][]T, addr func(*T) uint64, ranges func(i int) [][2]uint64) []T {
	n := 0
	var segs []segment
	for i, o := range outs {
		n += len(o)
		rs := ranges(i)
		in := func(a uint64) int {
			for k, r := range rs {
				if a >= r[0] && a < r[1] {
					return k
				}
			}
			return -1
		}
		for lo := 0; lo < len(o); {
			first := addr(&o[lo])
			hi := lo + 1
			if len(rs) > 1 {
				k := in(first)
				for hi < len(o) && in(addr(&o[hi])) == k {
					hi++
				}
			} else {
				hi = len(o)
			}
			segs = append(segs, segment{fn: i, lo: lo, hi: hi, first: first, last: addr(&o[hi-1])})
			lo = hi
		}
	}
	slices.SortFunc(segs, func(a, b segment) int {
		return cmp.Or(cmp.Compare(a.first, b.first), cmp.Compare(a.fn, b.fn), cmp.Compare(a.lo, b.lo))
	})
	all := make([]T, 0, n)
	for k, s := range segs {
		if k > 0 {
			// Each element is after the one before by (address,
			// function, position): the stable sort's order.
			p := segs[k-1]
			if p.last > s.first || p.last == s.first && (p.fn > s.fn || p.fn == s.fn && p.hi > s.lo) {
				return sorted(outs, addr, n)
			}
		}
		all = append(all, outs[s.fn][s.lo:s.hi]...)
	}
	return all
}

// sorted is Merge by a stable sort of the concatenation.
func sorted[T any](outs [][]T, addr func(*T) uint64, n int) []T {
	all := make([]T, 0, n)
	for _, o := range outs {
		all = append(all, o...)
	}
	slices.SortStableFunc(all, func(a, b T) int { return cmp.Compare(addr(&a), addr(&b)) })
	return all
}
