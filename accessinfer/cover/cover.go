// Package cover lists, for each position of a sequence (a function's
// instructions), the spans that cover it: the DWARF facts (a variable's
// location over a range of instructions) that hold at each instruction,
// the inlined copies' ranges that hold it. Positions between two
// consecutive span ends share one list, built once per such stretch, so
// the lists cost the spans' number, not the positions they cover.
package cover

// Lists keeps its arrays from one call to the next.
type Lists struct {
	head, next []int32 // events by position: a list through next
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
	n := int32(len(out))
	// head[p] starts the list of the spans starting at p, head[n+1+p]
	// that of those ending at p (2k a start of span k, 2k+1 its end):
	// found by position, not sorted.
	l.head, l.next = resize(l.head, 2*int(n)+2), resize(l.next, 2*len(spans))
	for i := range l.head {
		l.head[i] = -1
	}
	for k := len(spans) - 1; k >= 0; k-- {
		lo, hi := max(spans[k][0], 0), min(spans[k][1], n)
		if lo >= hi {
			continue
		}
		e := int32(2 * k)
		l.next[e], l.head[lo] = l.head[lo], e
		l.next[e+1], l.head[n+1+hi] = l.head[n+1+hi], e+1
	}
	l.active, l.pool, l.stretches = l.active[:0], l.pool[:0], l.stretches[:0]
	from := int32(0)
	for p := int32(0); p < n; p++ {
		if l.head[p] < 0 && l.head[n+1+p] < 0 {
			continue
		}
		l.stretches = append(l.stretches, stretch{from: from, to: p, at: int32(len(l.pool)) - int32(len(l.active)), n: int32(len(l.active))})
		from = p
		for e := l.head[n+1+p]; e >= 0; e = l.next[e] {
			k := e / 2
			for j, a := range l.active {
				if a == k {
					l.active = append(l.active[:j], l.active[j+1:]...)
					break
				}
			}
		}
		for e := l.head[p]; e >= 0; e = l.next[e] {
			k := e / 2
			j := len(l.active)
			for j > 0 && l.active[j-1] > k {
				j--
			}
			l.active = append(l.active, 0)
			copy(l.active[j+1:], l.active[j:])
			l.active[j] = k
		}
		l.pool = append(l.pool, l.active...)
	}
	l.stretches = append(l.stretches, stretch{from: from, to: n, at: int32(len(l.pool)) - int32(len(l.active)), n: int32(len(l.active))})
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

func resize(s []int32, n int) []int32 {
	if cap(s) < n {
		return make([]int32, n)
	}
	return s[:n]
}
