package table

import (
	"bytes"
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
	// Whether each row is live, decided once for both row orders: a
	// search of the dead ranges per row and per order cost more.
	var liveRows []bool
	if dead != nil {
		liveRows = make([]bool, len(t.Rows))
		for i := range t.Rows {
			liveRows[i] = !dead(t.Rows[i].Addr)
		}
	}
	liveRow := func(i int) bool { return liveRows == nil || liveRows[i] }
	do(func() { t.ByAddr = sortRowsByAddr(t.Rows, liveRow) })
	do(func() { t.ByFile = sortRowsByFile(t.Rows, len(t.Files), liveRow) })
	do(func() {
		t.ByName = make([]uint32, 0, len(t.Funcs))
		for i, f := range t.Funcs {
			if f.Flags&FuncDiscarded == 0 {
				t.ByName = append(t.ByName, uint32(i))
			}
		}
		t.ByName, _ = t.sortByName(t.ByName, func(i uint32) StrRef { return t.Funcs[i].Name })
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
		var rank []uint32
		t.InlName, rank = t.sortByName(t.InlName, func(i uint32) StrRef { return t.Inlines[i].Name })
		t.InlSum = t.InlSum[:0]
		for k, i := range t.InlName {
			in := t.Inlines[i]
			if n := len(t.InlSum) - 1; n >= 0 && rank[k] == rank[k-1] {
				t.InlSum[n].N++
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
// address, index) without comparing rows: from the order by (address,
// index), stable counting sorts by line (two 16-bit digits) and then by
// file. Rows are sorted this way at every cold index build: comparison
// sorts per file cost several times more.
func sortRowsByFile(rows []Row, nfiles int, keep func(int) bool) []uint32 {
	cur := rowsByAddrIndex(rows, keep)
	next := make([]uint32, len(cur))
	var maxLine uint32
	for _, i := range cur {
		maxLine = max(maxLine, rows[i].Line)
	}
	count := make([]uint32, 1<<16+1)
	for shift := 0; shift < 32 && maxLine>>shift != 0; shift += 16 {
		clear(count)
		for _, i := range cur {
			count[(rows[i].Line>>shift)&0xffff+1]++
		}
		for d := 1; d < len(count); d++ {
			count[d] += count[d-1]
		}
		for _, i := range cur {
			d := (rows[i].Line >> shift) & 0xffff
			next[count[d]] = i
			count[d]++
		}
		cur, next = next, cur
	}
	// By file, last: reading each row's file in line order would miss
	// the cache at every row, so the files are gathered in one pass
	// first.
	files := next
	for k, i := range cur {
		files[k] = rows[i].File
	}
	count = make([]uint32, nfiles+1)
	for _, f := range files {
		count[f+1]++
	}
	for f := 1; f < len(count); f++ {
		count[f] += count[f-1]
	}
	out := make([]uint32, len(cur))
	for k, i := range cur {
		out[count[files[k]]] = i
		count[files[k]]++
	}
	return out
}

// rowsByAddrIndex orders the rows that keep accepts, end-of-sequence rows
// too, by (address, index): whole sequences by their first address, then
// the rare runs of rows at one address by index, or a full sort if
// sequences overlap.
func rowsByAddrIndex(rows []Row, keep func(int) bool) []uint32 {
	type seq struct{ start, end uint32 } // end is past the end row
	var seqs []seq
	s := 0
	for i := range rows {
		if rows[i].Flags&RowEndSequence != 0 {
			seqs = append(seqs, seq{uint32(s), uint32(i + 1)})
			s = i + 1
		}
	}
	if s < len(rows) {
		seqs = append(seqs, seq{uint32(s), uint32(len(rows))})
	}
	slices.SortFunc(seqs, func(a, b seq) int {
		if c := cmp.Compare(rows[a.start].Addr, rows[b.start].Addr); c != 0 {
			return c
		}
		return cmp.Compare(a.start, b.start)
	})
	out := make([]uint32, 0, len(rows))
	for _, q := range seqs {
		for i := q.start; i < q.end; i++ {
			if keep(int(i)) {
				out = append(out, i)
			}
		}
	}
	byAddrIndex := func(a, b uint32) int {
		if c := cmp.Compare(rows[a].Addr, rows[b].Addr); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	}
	for k := 1; k < len(out); k++ {
		if rows[out[k]].Addr < rows[out[k-1]].Addr {
			slices.SortFunc(out, byAddrIndex)
			return out
		}
	}
	for lo := 0; lo < len(out); {
		hi := lo + 1
		for hi < len(out) && rows[out[hi]].Addr == rows[out[lo]].Addr {
			hi++
		}
		if hi-lo > 1 {
			slices.Sort(out[lo:hi])
		}
		lo = hi
	}
	return out
}

// sortByName orders idx stably by the names name gives them and returns
// each entry's name rank beside it (equal ranks, equal names): the
// distinct names are sorted once, then idx by rank with a counting sort,
// instead of comparing two names for each pair of entries.
func (t *Tables) sortByName(idx []uint32, name func(uint32) StrRef) (out, ranks []uint32) {
	ids := map[StrRef]uint32{}
	var refs []StrRef
	of := make([]uint32, len(idx)) // each entry's name, as an index into refs
	for k, i := range idx {
		r := name(i)
		j, ok := ids[r]
		if !ok {
			j = uint32(len(refs))
			ids[r] = j
			refs = append(refs, r)
		}
		of[k] = j
	}
	str := func(j uint32) []byte { r := refs[j]; return t.Strs[r.Off : r.Off+r.Len] }
	order := make([]uint32, len(refs))
	for j := range order {
		order[j] = uint32(j)
	}
	slices.SortFunc(order, func(a, b uint32) int { return bytes.Compare(str(a), str(b)) })
	rank := make([]uint32, len(refs))
	var r uint32
	for k, j := range order {
		if k > 0 && !bytes.Equal(str(j), str(order[k-1])) {
			r++
		}
		rank[j] = r
	}
	count := make([]uint32, len(refs)+1)
	for _, j := range of {
		count[rank[j]+1]++
	}
	for d := 1; d < len(count); d++ {
		count[d] += count[d-1]
	}
	out, ranks = make([]uint32, len(idx)), make([]uint32, len(idx))
	for k, i := range idx {
		rk := rank[of[k]]
		out[count[rk]], ranks[count[rk]] = i, rk
		count[rk]++
	}
	return out, ranks
}
