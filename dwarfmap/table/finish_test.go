package table

import (
	"cmp"
	"fmt"
	"math/rand"
	"slices"
	"testing"
)

// TestSortOrders checks Finish's row and name orders against plain
// comparison sorts, on tables with what real ones hold: overlapping
// sequences, rows sharing an address, lines past 65,535, dead code and
// names shared by many entries.
func TestSortOrders(t *testing.T) {
	for seed := int64(1); seed <= 20; seed++ {
		rnd := rand.New(rand.NewSource(seed))
		x := &Tables{}
		name := func() StrRef {
			s := fmt.Sprintf("f%d", rnd.Intn(40))
			r := StrRef{Off: uint32(len(x.Strs)), Len: uint32(len(s))}
			x.Strs = append(x.Strs, s...) // the same name at several offsets too
			return r
		}
		nfiles := 1 + rnd.Intn(30)
		for i := 0; i < nfiles; i++ {
			x.Files = append(x.Files, name())
		}
		for s := 0; s < 200; s++ {
			addr := uint64(rnd.Intn(4000))
			end := uint64(0)
			if seed%2 == 0 {
				// Sequences that do not overlap, laid out backwards: each
				// one's end row is at the address where the one before
				// it in the table starts.
				addr = 100_000 - uint64(s)*100
				end = addr + 100
			}
			for n := rnd.Intn(12); n >= 0; n-- {
				line := uint32(rnd.Intn(50))
				if rnd.Intn(8) == 0 {
					line = uint32(rnd.Intn(1 << 20))
				}
				x.Rows = append(x.Rows, Row{Addr: addr, File: uint32(rnd.Intn(nfiles)), Line: line})
				addr += uint64(rnd.Intn(3)) // 0: rows at one address
			}
			if end == 0 {
				end = addr + 1
			}
			x.Rows = append(x.Rows, Row{Addr: end, File: uint32(rnd.Intn(nfiles)), Line: uint32(rnd.Intn(50)), Flags: RowEndSequence})
		}
		for f := 0; f < 50; f++ {
			lo := uint64(rnd.Intn(4000))
			fl := uint32(0)
			if f%7 == 0 {
				fl = FuncDiscarded
			}
			x.Funcs = append(x.Funcs, Func{Name: name(), Flags: fl, RngOff: uint32(len(x.Ranges)), RngN: 1})
			x.Ranges = append(x.Ranges, [2]uint64{lo, lo + uint64(rnd.Intn(300))})
		}
		for i := 0; i < 300; i++ {
			x.Inlines = append(x.Inlines, Inline{Name: name(), Caller: uint32(rnd.Intn(len(x.Funcs)))})
		}
		x.Finish()

		dead := x.deadCode()
		live := func(i int) bool { return dead == nil || !dead(x.Rows[i].Addr) }
		var byFile []uint32
		for i := range x.Rows {
			if live(i) {
				byFile = append(byFile, uint32(i))
			}
		}
		slices.SortFunc(byFile, func(a, b uint32) int {
			ra, rb := x.Rows[a], x.Rows[b]
			return cmp.Or(cmp.Compare(ra.File, rb.File), cmp.Compare(ra.Line, rb.Line), cmp.Compare(ra.Addr, rb.Addr), cmp.Compare(a, b))
		})
		if !slices.Equal(x.ByFile, byFile) {
			t.Fatalf("seed %d: ByFile\n%v, want\n%v", seed, x.ByFile, byFile)
		}
		var byName []uint32
		for i, f := range x.Funcs {
			if f.Flags&FuncDiscarded == 0 {
				byName = append(byName, uint32(i))
			}
		}
		slices.SortStableFunc(byName, func(a, b uint32) int { return cmp.Compare(x.Str(x.Funcs[a].Name), x.Str(x.Funcs[b].Name)) })
		if !slices.Equal(x.ByName, byName) {
			t.Fatalf("seed %d: ByName %v, want %v", seed, x.ByName, byName)
		}
		var inlName []uint32
		for i, in := range x.Inlines {
			if x.Funcs[in.Caller].Flags&FuncDiscarded == 0 {
				inlName = append(inlName, uint32(i))
			}
		}
		slices.SortStableFunc(inlName, func(a, b uint32) int { return cmp.Compare(x.Str(x.Inlines[a].Name), x.Str(x.Inlines[b].Name)) })
		if !slices.Equal(x.InlName, inlName) {
			t.Fatalf("seed %d: InlName %v, want %v", seed, x.InlName, inlName)
		}
		n := 0
		for k, i := range inlName {
			if k == 0 || x.Str(x.Inlines[i].Name) != x.Str(x.Inlines[inlName[k-1]].Name) {
				n++
			}
		}
		if len(x.InlSum) != n {
			t.Fatalf("seed %d: %d inline sums, want %d (one per distinct name)", seed, len(x.InlSum), n)
		}
	}
}
