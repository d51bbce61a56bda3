package table

import (
	"cmp"
	"slices"
	"sort"
	"sync"
)

// Finish computes the derived lookup arrays: the spans of live code
// first, then the others, independent of each other, concurrently.
func (t *Tables) Finish() {
	t.Spans = t.Spans[:0]
	for fi, f := range t.Funcs {
		if f.Flags&FuncDiscarded != 0 {
			continue
		}
		for _, r := range t.Ranges[f.RngOff : f.RngOff+f.RngN] {
			t.Spans = append(t.Spans, Span{Lo: r[0], Hi: r[1], Func: uint32(fi)})
		}
	}
	slices.SortStableFunc(t.Spans, func(a, b Span) int { return cmp.Compare(a.Lo, b.Lo) })
	dead := t.deadCode()
	var wg sync.WaitGroup
	do := func(f func()) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f()
		}()
	}
	liveRow := func(i int) bool { return dead == nil || !dead(t.Rows[i].Addr) }
	do(func() { t.ByAddr = sortRowsByAddr(t.Rows, liveRow) })
	do(func() { t.ByFile = sortRowsByFile(t.Rows, len(t.Files), liveRow) })
	do(func() {
		t.ByName = make([]uint32, 0, len(t.Funcs))
		for i, f := range t.Funcs {
			if f.Flags&FuncDiscarded == 0 {
				t.ByName = append(t.ByName, uint32(i))
			}
		}
		slices.SortStableFunc(t.ByName, func(a, b uint32) int {
			return cmp.Compare(t.Str(t.Funcs[a].Name), t.Str(t.Funcs[b].Name))
		})
	})
	do(func() {
		t.InlName = make([]uint32, 0, len(t.Inlines))
		for i, in := range t.Inlines {
			if in.Caller != NoFile && t.Funcs[in.Caller].Flags&FuncDiscarded != 0 ||
				dead != nil && in.RngN > 0 && dead(t.InlRanges[in.RngOff][0]) {
				continue // a copy in dead code
			}
			t.InlName = append(t.InlName, uint32(i))
		}
		slices.SortStableFunc(t.InlName, func(a, b uint32) int {
			return cmp.Compare(t.Str(t.Inlines[a].Name), t.Str(t.Inlines[b].Name))
		})
		t.InlSum = t.InlSum[:0]
		for _, i := range t.InlName {
			in := t.Inlines[i]
			if k := len(t.InlSum) - 1; k >= 0 && t.Str(t.InlSum[k].Name) == t.Str(in.Name) {
				t.InlSum[k].N++
				continue
			}
			t.InlSum = append(t.InlSum, InlineSum{Name: in.Name, N: 1, DeclFile: in.DeclFile, DeclLine: in.DeclLine})
		}
	})
	do(func() {
		slices.SortFunc(t.Structs, func(a, b Struct) int { return cmp.Compare(t.Str(a.Name), t.Str(b.Name)) })
	})
	wg.Wait()
}

// deadCode returns whether an address lies in the code of a discarded
// function and in no live one (t.Spans, computed), or nil if there is
// none.
func (t *Tables) deadCode() func(addr uint64) bool {
	var dead [][2]uint64
	for _, f := range t.Funcs {
		if f.Flags&FuncDiscarded != 0 {
			dead = append(dead, t.Ranges[f.RngOff:f.RngOff+f.RngN]...)
		}
	}
	if len(dead) == 0 {
		return nil
	}
	// Merged, so that one search finds the range holding an address:
	// code of discarded sections may all sit at 0.
	slices.SortFunc(dead, func(a, b [2]uint64) int { return cmp.Compare(a[0], b[0]) })
	merged := dead[:1]
	for _, r := range dead[1:] {
		if last := &merged[len(merged)-1]; r[0] <= last[1] {
			last[1] = max(last[1], r[1])
		} else {
			merged = append(merged, r)
		}
	}
	return func(addr uint64) bool {
		i := sort.Search(len(merged), func(i int) bool { return merged[i][0] > addr }) - 1
		if i < 0 || addr >= merged[i][1] {
			return false
		}
		_, live := t.FuncAt(addr)
		return !live
	}
}

// sortRowsByAddr orders the code rows that keep accepts by address.
// Sequences are already increasing, so sorting whole sequences by their
// first address usually yields a sorted list; overlapping sequences fall
// back to a full sort.
func sortRowsByAddr(rows []Row, keep func(int) bool) []uint32 {
	type seq struct{ start, end uint32 }
	var seqs []seq
	s := 0
	for i := range rows {
		if rows[i].Flags&RowEndSequence != 0 {
			if i > s {
				seqs = append(seqs, seq{uint32(s), uint32(i)})
			}
			s = i + 1
		}
	}
	if s < len(rows) {
		seqs = append(seqs, seq{uint32(s), uint32(len(rows))})
	}
	slices.SortStableFunc(seqs, func(a, b seq) int { return cmp.Compare(rows[a.start].Addr, rows[b.start].Addr) })
	out := make([]uint32, 0, len(rows))
	for _, q := range seqs {
		for i := q.start; i < q.end; i++ {
			if keep(int(i)) {
				out = append(out, i)
			}
		}
	}
	less := func(a, b uint32) int { return cmp.Compare(rows[a].Addr, rows[b].Addr) }
	if !slices.IsSortedFunc(out, less) {
		slices.SortStableFunc(out, less)
	}
	return out
}

// sortRowsByFile orders the rows that keep accepts by (file, line,
// address): a counting sort by file, then a small sort per file.
func sortRowsByFile(rows []Row, nfiles int, keep func(int) bool) []uint32 {
	count := make([]uint32, nfiles+1)
	n := 0
	for i, r := range rows {
		if keep(i) {
			count[r.File+1]++
			n++
		}
	}
	for i := 1; i < len(count); i++ {
		count[i] += count[i-1]
	}
	out := make([]uint32, n)
	pos := slices.Clone(count)
	for i, r := range rows {
		if keep(i) {
			out[pos[r.File]] = uint32(i)
			pos[r.File]++
		}
	}
	for f := 0; f < nfiles; f++ {
		part := out[count[f]:count[f+1]]
		slices.SortFunc(part, func(a, b uint32) int {
			if c := cmp.Compare(rows[a].Line, rows[b].Line); c != 0 {
				return c
			}
			if c := cmp.Compare(rows[a].Addr, rows[b].Addr); c != 0 {
				return c
			}
			return cmp.Compare(a, b)
		})
	}
	return out
}
