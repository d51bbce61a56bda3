package collect

import (
	"cmp"
	"math/rand"
	"reflect"
	"slices"
	"testing"
)

type elem struct {
	addr uint64
	fn   int
	seq  int
}

// stable is what Merge must give: a stable sort of the concatenation.
func stable(outs [][]elem) []elem {
	var all []elem
	for _, o := range outs {
		all = append(all, o...)
	}
	slices.SortStableFunc(all, func(a, b elem) int { return cmp.Compare(a.addr, b.addr) })
	return all
}

// TestMerge merges functions laid out as in a kernel: each in one or two
// ranges (a .cold part far away, between other functions' cold parts),
// several elements at an address, and, where ranges overlap, elements
// of two functions at one address.
func TestMerge(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for round := 0; round < 200; round++ {
		nf := 1 + rng.Intn(30)
		overlap := round%4 == 3
		ranges := make([][][2]uint64, nf)
		outs := make([][]elem, nf)
		hot, cold := uint64(0x1000), uint64(0x100000)
		for i := range nf {
			size := uint64(1 + rng.Intn(64))
			ranges[i] = append(ranges[i], [2]uint64{hot, hot + size})
			hot += size
			if overlap && rng.Intn(3) == 0 {
				hot -= size / 2
			}
			if rng.Intn(3) == 0 {
				csize := uint64(1 + rng.Intn(16))
				ranges[i] = append(ranges[i], [2]uint64{cold, cold + csize})
				cold += csize
			}
			if rng.Intn(2) == 0 {
				slices.Reverse(ranges[i]) // not by address in DWARF
			}
			var addrs []uint64
			for _, r := range ranges[i] {
				for k := 0; k < rng.Intn(8); k++ {
					a := r[0] + uint64(rng.Int63n(int64(r[1]-r[0])))
					for d := 0; d <= rng.Intn(2); d++ {
						addrs = append(addrs, a)
					}
				}
			}
			slices.Sort(addrs)
			for k, a := range addrs {
				outs[i] = append(outs[i], elem{a, i, k})
			}
		}
		got := Merge(outs, func(e *elem) uint64 { return e.addr }, func(i int) [][2]uint64 { return ranges[i] })
		if want := stable(outs); !reflect.DeepEqual(got, want) && !(len(got) == 0 && len(want) == 0) {
			t.Fatalf("round %d (overlap %v): merged\n%v\nstable sort\n%v", round, overlap, got, want)
		}
	}
}
