package suggest

import (
	"fmt"
	"slices"
	"strings"
)

// DidYouMean names the candidates closest to name (at most three, by
// edit distance, within a third of its length), as "; did you mean X?",
// or "" if none is close.
func DidYouMean(name string, candidates []string) string {
	type scored struct {
		s string
		d int
	}
	limit := max(2, len(name)/3)
	var best []scored
	seen := map[string]bool{}
	for _, c := range candidates {
		if seen[c] || c == name {
			continue
		}
		seen[c] = true
		if abs(len(c)-len(name)) > limit {
			continue
		}
		if d := editDistance(strings.ToLower(name), strings.ToLower(c), limit); d <= limit {
			best = append(best, scored{c, d})
		}
	}
	if len(best) == 0 {
		return ""
	}
	slices.SortStableFunc(best, func(a, b scored) int {
		if a.d != b.d {
			return a.d - b.d
		}
		return strings.Compare(a.s, b.s)
	})
	var names []string
	for _, b := range best[:min(3, len(best))] {
		names = append(names, b.s)
	}
	return fmt.Sprintf("; did you mean %s?", strings.Join(names, ", "))
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// editDistance is the Levenshtein distance of a and b, or limit+1 once
// it is sure to exceed limit.
func editDistance(a, b string, limit int) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		rowMin := cur[0]
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			rowMin = min(rowMin, cur[j])
		}
		if rowMin > limit {
			return limit + 1
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
