// Package cover lists, for each position of a sequence (a function's
// instructions), the spans that cover it: the DWARF facts (a variable's
// location over a range of instructions) that hold at each instruction.
// Positions between two consecutive span ends share one list, built
// once per such stretch, so the work grows with the spans rather than
// with the positions they cover.
package cover

import (
	"cmp"
	"math"
	"slices"
)

// Lists keeps its arrays from one call to the next.
type Lists struct {
	byLo, byHi []int32
	active     []int32
	pool       []int32
	stretches  []stretch
}

type stretch struct {
	from, to int32 // positions [from, to)
	at, n    int32 // the list: pool[at : at+n]
}

// Fill sets out[i], for each position i < len(out), to the indexes into
// spans of the spans [lo, hi) holding i, in increasing order. The lists
// are shared between positions and valid until Fill's next call.
func (l *Lists) Fill(out [][]int32, spans [][2]int32) {
	clear(out)
	nf := len(spans)
	l.byLo, l.byHi = resize(l.byLo, nf), resize(l.byHi, nf)
	for k := range nf {
		l.byLo[k], l.byHi[k] = int32(k), int32(k)
	}
	slices.SortFunc(l.byLo, func(a, b int32) int { return cmp.Compare(spans[a][0], spans[b][0]) })
	slices.SortFunc(l.byHi, func(a, b int32) int { return cmp.Compare(spans[a][1], spans[b][1]) })
	l.active, l.pool, l.stretches = l.active[:0], l.pool[:0], l.stretches[:0]
	lo, hi := 0, 0 // next of byLo, byHi
	for lo < nf || hi < nf {
		// The next position where the set changes.
		at := int32(math.MaxInt32)
		if lo < nf {
			at = spans[l.byLo[lo]][0]
		}
		if hi < nf {
			at = min(at, spans[l.byHi[hi]][1])
		}
		if n := len(l.stretches); n > 0 {
			l.stretches[n-1].to = at
		}
		for ; hi < nf && spans[l.byHi[hi]][1] == at; hi++ {
			if i, ok := slices.BinarySearch(l.active, l.byHi[hi]); ok {
				l.active = slices.Delete(l.active, i, i+1)
			}
		}
		for ; lo < nf && spans[l.byLo[lo]][0] == at; lo++ {
			if k := l.byLo[lo]; spans[k][0] < spans[k][1] {
				i, _ := slices.BinarySearch(l.active, k)
				l.active = slices.Insert(l.active, i, k)
			}
		}
		l.stretches = append(l.stretches, stretch{from: at, to: at, at: int32(len(l.pool)), n: int32(len(l.active))})
		l.pool = append(l.pool, l.active...)
	}
	for _, s := range l.stretches {
		list := l.pool[s.at : s.at+s.n : s.at+s.n]
		for i := max(s.from, 0); i < s.to && int(i) < len(out); i++ {
			out[i] = list
		}
	}
}

func resize(s []int32, n int) []int32 {
	if cap(s) < n {
		return make([]int32, n)
	}
	return s[:n]
}
