// Package cover lists, for each position of a sequence (a function's
// instructions), the spans that cover it: the DWARF facts (a variable's
// location over a range of instructions) that hold at each instruction,
// the inlined copies' ranges that hold it. Positions between two
// consecutive span ends share one list, built once per such stretch, so
// the lists cost the spans' number, not the positions they cover.
package cover

import "slices"

// Lists keeps its arrays from one call to the next.
type Lists struct {
	events    []int64
	active    []int32
	pool      []int32
	stretches []stretch
}

type stretch struct {
	from, to int32 // positions [from, to)
	at, n    int32 // the list: pool[at : at+n]
}

// Fill sets out[i], for each position i < len(out), to the indexes into
// spans of the spans [lo, hi) holding i, in increasing order. The lists
// are shared between positions and valid until Fill's next call.
func (l *Lists) Fill(out [][]int32, spans [][2]int32) {
	n := int32(len(out))
	// An event is a span's start or end at a position: position, then
	// ends before starts, then the span, in the bits of one integer
	// (sorted without a comparison function).
	ev := l.events[:0]
	for k, sp := range spans {
		if lo, hi := max(sp[0], 0), min(sp[1], n); lo < hi {
			ev = append(ev, int64(hi)<<33|int64(k), int64(lo)<<33|1<<32|int64(k))
		}
	}
	slices.Sort(ev)
	l.events = ev
	l.active, l.pool, l.stretches = l.active[:0], l.pool[:0], l.stretches[:0]
	from := int32(0)
	for _, e := range ev {
		p, start, k := int32(e>>33), e&(1<<32) != 0, int32(uint32(e))
		if p != from {
			l.stretches = append(l.stretches, stretch{from: from, to: p, at: int32(len(l.pool)), n: int32(len(l.active))})
			l.pool = append(l.pool, l.active...)
			from = p
		}
		if !start {
			if j := slices.Index(l.active, k); j >= 0 {
				l.active = slices.Delete(l.active, j, j+1)
			}
			continue
		}
		j := len(l.active)
		for j > 0 && l.active[j-1] > k {
			j--
		}
		l.active = slices.Insert(l.active, j, k)
	}
	l.stretches = append(l.stretches, stretch{from: from, to: n, at: int32(len(l.pool)), n: int32(len(l.active))})
	l.pool = append(l.pool, l.active...)
	for _, s := range l.stretches {
		var list []int32
		if s.n > 0 {
			list = l.pool[s.at : s.at+s.n : s.at+s.n]
		}
		for i := s.from; i < s.to; i++ {
			out[i] = list
		}
	}
}
