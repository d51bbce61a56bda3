package cover

import (
	"cmp"
	"slices"

	"github.com/klasy/klasy/x86code"
)

// Coverage from block counts (klasy cover). A hook on each basic block
// of a function counts how often the block runs; from those counts the
// arcs of the control flow graph are derived as KernInst derived them
// (Tamches' dissertation, ch. 7): the counts of the arcs into a block
// sum to its count, as do those of the arcs out of it, so wherever only
// one arc of such a sum is unknown, it is the difference, and where the
// known ones leave nothing, every unknown one is 0. Repeated until
// nothing changes, this determines most arcs; the others get the upper
// bound the sums leave them (KernInst's estimate), marked as not
// determined. A block that could not be hooked is one more unknown of
// the same sums. Two virtual arcs close the graph: the function's entry
// (the calls) and each exit (ret, a tail call).
//
// A source line's count is gcov's: the times the line was entered, that
// is, the counts of the arcs into the blocks holding its code from
// blocks that do not, plus the cycles that stay within them. With the
// intra-line arcs known, that is the sum of the line's block counts less
// the intra-line arcs, plus the cycles among them.
//
// What the graph does not show weakens the sums, and klasy drops the
// ones it cannot trust: the arcs into blocks when the function has an
// indirect jump (whose targets are not followed), those out of a block
// ending in one, those into a block nothing known reaches (an exception
// fixup). A call that does not return still counts as falling through.
// The hooks go live one by one, and their counts are read while they
// run: a function running at that moment can leave a sum off by a few,
// which klasy reports as inconsistent rather than forcing.

// SourceLine is a line of a source file.
type SourceLine struct {
	File string
	Line int
}

// CoverBlock is one basic block's count.
type CoverBlock struct {
	Start, End uint64
	// Count is how often the block ran, when Known: measured by its
	// hook, or Derived from the others when it has none (Skipped says
	// why).
	Count   uint64
	Known   bool
	Derived bool
	Skipped string
	// Lines are the source lines whose code the block holds.
	Lines []SourceLine
}

// CoverArc is one arc of the control flow graph with its count.
type CoverArc struct {
	// From and To are block starts; From 0 is the function's entry (the
	// arc counts its calls), To 0 is leaving the function.
	From, To uint64
	// Count is exact when Determined; otherwise Bound, when HasBound, is
	// the most it can be.
	Count      uint64
	Determined bool
	Bound      uint64
	HasBound   bool
}

// CoverLine is a source line's count: gcov's, the times it was entered.
type CoverLine struct {
	SourceLine
	Count uint64
	// Known is false when no block holding the line has a count.
	Known bool
	// Estimated: an arc between two blocks of the line, or a block of
	// it, has no count: Count is the greatest count of its blocks.
	Estimated bool
	// Unexecuted: a block holding the line never ran while the line did
	// (gcov's "*").
	Unexecuted bool
}

// FuncCover is the coverage of one function.
type FuncCover struct {
	Blocks []CoverBlock // by address
	Arcs   []CoverArc   // entry first, then by From and To
	Lines  []CoverLine  // by file and line
	// Inconsistent counts the sums the counts do not satisfy.
	Inconsistent int
}

// Calls is the entry arc: how often the function was called.
func (fc *FuncCover) Calls() CoverArc {
	for _, a := range fc.Arcs {
		if a.From == 0 {
			return a
		}
	}
	return CoverArc{}
}

// Determined counts the arcs whose count is exact.
func (fc *FuncCover) Determined() int {
	n := 0
	for _, a := range fc.Arcs {
		if a.Determined {
			n++
		}
	}
	return n
}

// Cover computes a function's coverage from its graph, the counts of
// the blocks that were hooked (by block start), why the others were not,
// and the source lines of a block's code.
func Cover(g *x86code.Graph, counts map[uint64]uint64, skipped map[uint64]string, lines func(lo, hi uint64) []SourceLine) *FuncCover {
	fc := &FuncCover{}
	node := map[uint64]int{} // block start -> index in fc.Blocks
	for _, b := range g.Blocks {
		if b.Padding {
			continue
		}
		cb := CoverBlock{Start: b.Start, End: b.End, Skipped: skipped[b.Start]}
		if c, ok := counts[b.Start]; ok {
			cb.Count, cb.Known = c, true
		}
		if lines != nil {
			cb.Lines = lines(b.Start, b.End)
		}
		node[b.Start] = len(fc.Blocks)
		fc.Blocks = append(fc.Blocks, cb)
	}
	// The unknowns: the arcs, then the blocks without a count.
	type arcKey struct{ from, to uint64 }
	arcIdx := map[arcKey]int{}
	addArc := func(from, to uint64) {
		k := arcKey{from, to}
		if _, ok := arcIdx[k]; !ok {
			arcIdx[k] = len(fc.Arcs)
			fc.Arcs = append(fc.Arcs, CoverArc{From: from, To: to})
		}
	}
	if _, ok := node[g.Entry]; ok {
		addArc(0, g.Entry)
	}
	in, out := map[uint64][]int{}, map[uint64][]int{}
	for _, b := range g.Blocks {
		if _, ok := node[b.Start]; !ok {
			continue
		}
		for _, s := range b.Succs {
			if _, ok := node[s]; ok {
				addArc(b.Start, s)
			}
		}
		if b.Exit {
			addArc(b.Start, 0)
		}
	}
	for i, a := range fc.Arcs {
		if a.From != 0 {
			out[a.From] = append(out[a.From], i)
		}
		if a.To != 0 {
			in[a.To] = append(in[a.To], i)
		}
	}
	nArcs := len(fc.Arcs)
	vals := make([]int64, nArcs, nArcs+len(fc.Blocks))
	known := make([]bool, nArcs, nArcs+len(fc.Blocks))
	blockVar := map[uint64]int{}
	for _, b := range fc.Blocks {
		if !b.Known {
			blockVar[b.Start] = len(vals)
			vals = append(vals, 0)
			known = append(known, false)
		}
	}
	// The sums: sum(coef*var) = konst.
	type term struct {
		v    int
		coef int64
	}
	type equation struct {
		terms []term
		konst int64
	}
	var eqs []equation
	sum := func(b CoverBlock, arcs []int) {
		e := equation{}
		for _, a := range arcs {
			e.terms = append(e.terms, term{a, 1})
		}
		if b.Known {
			e.konst = int64(b.Count)
		} else {
			e.terms = append(e.terms, term{blockVar[b.Start], -1})
		}
		eqs = append(eqs, e)
	}
	for _, gb := range g.Blocks {
		i, ok := node[gb.Start]
		if !ok {
			continue
		}
		b := fc.Blocks[i]
		if !gb.Indirect {
			sum(b, out[b.Start])
		}
		if len(g.Indirect) == 0 && len(in[b.Start]) > 0 {
			sum(b, in[b.Start])
		}
	}
	bad := make([]bool, len(eqs))
	// rest is what e leaves for its unknowns; pos is true when they
	// all add (no block count without a hook among them).
	rest := func(e equation) (r int64, unknowns int, pos bool) {
		r, pos = e.konst, true
		for _, t := range e.terms {
			switch {
			case known[t.v]:
				r -= t.coef * vals[t.v]
			default:
				unknowns++
				pos = pos && t.coef > 0
			}
		}
		return r, unknowns, pos
	}
	for changed := true; changed; {
		changed = false
		for i, e := range eqs {
			if bad[i] {
				continue
			}
			r, n, _ := rest(e)
			switch {
			case n == 0:
				bad[i] = r != 0
			case n == 1:
				for _, t := range e.terms {
					if known[t.v] {
						continue
					}
					if v := r / t.coef; v >= 0 {
						vals[t.v], known[t.v], changed = v, true, true
					} else {
						bad[i] = true
					}
				}
			}
		}
		if changed {
			continue
		}
		// A sum of counts that leaves nothing for its unknowns makes
		// each of them 0 (counts are never negative).
		for i, e := range eqs {
			if r, n, pos := rest(e); !bad[i] && n > 1 && pos && r == 0 {
				for _, t := range e.terms {
					if !known[t.v] {
						vals[t.v], known[t.v], changed = 0, true, true
					}
				}
			}
		}
	}
	for _, b := range bad {
		if b {
			fc.Inconsistent++
		}
	}
	for i := range fc.Arcs {
		a := &fc.Arcs[i]
		if known[i] {
			a.Count, a.Determined = uint64(vals[i]), true
			continue
		}
		// KernInst's estimate: the least of what the sums holding the
		// arc leave for their unknown arcs.
		for j, e := range eqs {
			if bad[j] || !slices.ContainsFunc(e.terms, func(t term) bool { return t.v == i }) {
				continue
			}
			if r, _, pos := rest(e); pos && r >= 0 && (!a.HasBound || uint64(r) < a.Bound) {
				a.Bound, a.HasBound = uint64(r), true
			}
		}
	}
	for i := range fc.Blocks {
		b := &fc.Blocks[i]
		if v, ok := blockVar[b.Start]; ok && known[v] {
			b.Count, b.Known, b.Derived = uint64(vals[v]), true, true
		}
	}
	slices.SortStableFunc(fc.Arcs, func(a, b CoverArc) int {
		if (a.From == 0) != (b.From == 0) {
			if a.From == 0 {
				return -1
			}
			return 1
		}
		if c := cmp.Compare(a.From, b.From); c != 0 {
			return c
		}
		// Leaving the function last.
		return cmp.Compare(a.To-1, b.To-1)
	})
	fc.Lines = lineCounts(fc)
	return fc
}

// lineCounts applies gcov's rule to the blocks and arcs of fc.
func lineCounts(fc *FuncCover) []CoverLine {
	byLine := map[SourceLine][]int{}
	var order []SourceLine
	for i, b := range fc.Blocks {
		for _, l := range b.Lines {
			if len(byLine[l]) == 0 || byLine[l][len(byLine[l])-1] != i {
				if len(byLine[l]) == 0 {
					order = append(order, l)
				}
				byLine[l] = append(byLine[l], i)
			}
		}
	}
	slices.SortFunc(order, func(a, b SourceLine) int {
		if c := cmp.Compare(a.File, b.File); c != 0 {
			return c
		}
		return cmp.Compare(a.Line, b.Line)
	})
	var out []CoverLine
	for _, l := range order {
		idx := byLine[l]
		cl := CoverLine{SourceLine: l}
		in := map[uint64]bool{}
		var sum, most uint64
		zero, unknown := false, false
		for _, i := range idx {
			b := fc.Blocks[i]
			in[b.Start] = true
			if !b.Known {
				unknown = true
				continue
			}
			cl.Known = true
			sum += b.Count
			most = max(most, b.Count)
			zero = zero || b.Count == 0
		}
		if !cl.Known {
			out = append(out, cl)
			continue
		}
		// The arcs between blocks of the line.
		var intra []CoverArc
		exact := !unknown
		for _, a := range fc.Arcs {
			if a.From != 0 && a.To != 0 && in[a.From] && in[a.To] {
				intra = append(intra, a)
				exact = exact && a.Determined
			}
		}
		if exact {
			var within uint64
			for _, a := range intra {
				within += a.Count
			}
			cl.Count = sum - min(within, sum) + cycles(intra)
		} else {
			cl.Count, cl.Estimated = most, true
		}
		cl.Unexecuted = zero && cl.Count > 0
		out = append(out, cl)
	}
	return out
}

// cycles sums the cycles among arcs as gcov does: take a cycle whose
// arcs all have counts left, add the least of them, take it off each of
// its arcs, and again until no cycle is left.
func cycles(arcs []CoverArc) uint64 {
	left := make([]uint64, len(arcs))
	for i, a := range arcs {
		left[i] = a.Count
	}
	var total uint64
	for {
		path := findCycle(arcs, left)
		if path == nil {
			return total
		}
		least := left[path[0]]
		for _, i := range path {
			least = min(least, left[i])
		}
		for _, i := range path {
			left[i] -= least
		}
		total += least
	}
}

// findCycle returns the arcs of a cycle among those with a count left,
// nil if there is none.
func findCycle(arcs []CoverArc, left []uint64) []int {
	state := map[uint64]int{} // 0 new, 1 on the path, 2 done
	var path []int            // arcs on the current path
	var from []uint64         // the block each arc of path leaves
	var visit func(n uint64) []int
	visit = func(n uint64) []int {
		state[n] = 1
		for i, a := range arcs {
			if a.From != n || left[i] == 0 {
				continue
			}
			path, from = append(path, i), append(from, n)
			switch state[a.To] {
			case 1:
				k := slices.Index(from, a.To)
				return slices.Clone(path[k:])
			case 0:
				if c := visit(a.To); c != nil {
					return c
				}
			}
			path, from = path[:len(path)-1], from[:len(from)-1]
		}
		state[n] = 2
		return nil
	}
	for _, a := range arcs {
		if state[a.From] == 0 {
			if c := visit(a.From); c != nil {
				return c
			}
		}
	}
	return nil
}
