package cover

import (
	"math/rand"
	"slices"
	"testing"
)

// TestFill checks Fill against the definition, position by position, on
// random spans (empty ones, shared ends, spans past the end) and on a
// second call reusing the arrays.
func TestFill(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	var l Lists
	for round := 0; round < 500; round++ {
		n := 1 + r.Intn(60)
		spans := make([][2]int32, r.Intn(12))
		for k := range spans {
			lo := int32(r.Intn(n + 5))
			spans[k] = [2]int32{lo, lo + int32(r.Intn(20)) - 2}
		}
		out := make([][]int32, n)
		for i := range out {
			out[i] = []int32{-1} // Fill sets every position
		}
		l.Fill(out, spans)
		for i := range out {
			var want []int32
			for k, sp := range spans {
				if sp[0] <= int32(i) && int32(i) < sp[1] {
					want = append(want, int32(k))
				}
			}
			if !slices.Equal(out[i], want) {
				t.Fatalf("round %d, spans %v: position %d has %v, want %v", round, spans, i, out[i], want)
			}
		}
	}
}
