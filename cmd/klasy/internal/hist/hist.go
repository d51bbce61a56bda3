// Package hist lays out and draws histograms as bpftrace does: hist()'s
// power-of-two buckets, lhist()'s linear ones, each printed bucket's
// label, bounds and bar, and its JSON form. klasy trace --hist and
// --lhist and klasy stats's HIST, LHIST and TIMER maps draw with it.
package hist

import (
	"fmt"
	"io"
	"math/bits"
	"slices"
	"strconv"
	"strings"
)

// Log2Buckets is the number of hist() buckets: below 0, 0, 1, then
// [2^k, 2^(k+1)) for k = 1..62.
const Log2Buckets = 65

// Log2Bucket is bpftrace's hist() bucket of v.
func Log2Bucket(v int64) int {
	if v < 0 {
		return 0
	}
	return bits.Len64(uint64(v)) + 1
}

// Linear is lhist()'s layout: buckets of Step from Min to Max, Max-Min
// a multiple of Step.
type Linear struct {
	Min, Max, Step int64
}

// Buckets is the number of lhist() buckets: below Min, one per step,
// and Max and above.
func (l *Linear) Buckets() int { return int((l.Max-l.Min)/l.Step) + 2 }

// Bucket is bpftrace's lhist() bucket of v: 0 below Min, then one per
// step, and the last for Max and above.
func (l *Linear) Bucket(v int64) int {
	switch {
	case v < l.Min:
		return 0
	case v >= l.Max:
		return int((l.Max-l.Min)/l.Step) + 1
	}
	return int((v-l.Min)/l.Step) + 1 // v-min <= max-min: no overflow
}

// Row is one printed bucket: its label as bpftrace writes it and its
// bounds, inclusive, nil where it is open.
type Row struct {
	Label    string
	Min, Max *int64
	Count    uint64
}

// log2Label is bpftrace's label of 2^power: 1, 2, ... 512, 1K, ... 8E.
func log2Label(power int) string {
	const suffixes = "KMGTPE"
	if power < 10 {
		return strconv.Itoa(1 << power)
	}
	return strconv.Itoa(1<<(power%10)) + suffixes[power/10-1:power/10]
}

// linearLabel is bpftrace's lhist label of n: with K or M when the step
// is a multiple of 1024.
func linearLabel(n, step int64) string {
	const kilo, mega = 1024, 1024 * 1024
	switch {
	case step%kilo != 0 || n == 0:
		return strconv.FormatInt(n, 10)
	case n%mega == 0:
		return strconv.FormatInt(n/mega, 10) + "M"
	case n%kilo == 0:
		return strconv.FormatInt(n/kilo, 10) + "K"
	}
	return strconv.FormatInt(n, 10)
}

// Rows are the buckets bpftrace prints of counts, laid out as
// bpftrace's hist() (linear nil) or lhist(): from the first that
// counted a value to the last, the empty ones between included.
func Rows(counts []uint64, linear *Linear) []Row {
	first := slices.IndexFunc(counts, func(c uint64) bool { return c > 0 })
	if first < 0 {
		return nil
	}
	last := len(counts) - 1
	for counts[last] == 0 {
		last--
	}
	ptr := func(x int64) *int64 { return &x }
	var out []Row
	for i := first; i <= last; i++ {
		b := Row{Count: counts[i]}
		if l := linear; l != nil {
			lo := l.Min + int64(i-1)*l.Step
			switch {
			case i == 0:
				b.Label, b.Max = "(..., "+linearLabel(l.Min, l.Step)+")", ptr(l.Min-1)
			case i == len(counts)-1:
				b.Label, b.Min = "["+linearLabel(l.Max, l.Step)+", ...)", ptr(l.Max)
			default:
				b.Label, b.Min, b.Max = "["+linearLabel(lo, l.Step)+", "+linearLabel(lo+l.Step, l.Step)+")", ptr(lo), ptr(lo+l.Step-1)
			}
		} else {
			switch {
			case i == 0:
				b.Label, b.Max = "(..., 0)", ptr(-1)
			case i <= 2:
				b.Label, b.Min, b.Max = fmt.Sprintf("[%d]", i-1), ptr(int64(i-1)), ptr(int64(i-1))
			default:
				// [2^(i-2), 2^(i-1)); the top bound of the last, 2^63,
				// is 8E in the label and MaxInt64 as a number.
				lo := int64(1) << (i - 2)
				b.Label, b.Min, b.Max = "["+log2Label(i-2)+", "+log2Label(i-1)+")", ptr(lo), ptr(lo+(lo-1))
			}
		}
		out = append(out, b)
	}
	return out
}

// barWidth is bpftrace's: the largest bucket's bar is 52 @ long.
const barWidth = 52

// Draw draws rows as bpftrace draws a histogram, each row after
// indent: the bucket's label, its count and a bar.
func Draw(w io.Writer, indent string, rows []Row) {
	// bpftrace pads labels to 16 columns; longer ones (an lhist of
	// nanoseconds) widen the column here instead of pushing their row's
	// count and bar out of line.
	var most uint64
	width := 16
	for _, b := range rows {
		most = max(most, b.Count)
		width = max(width, len(b.Label))
	}
	for _, b := range rows {
		bar := strings.Repeat("@", int(b.Count*barWidth/most))
		fmt.Fprintf(w, "%s%-*s%8d |%-*s|\n", indent, width, b.Label, b.Count, barWidth, bar)
	}
}

// LinearJSON is an lhist()'s layout in JSON.
type LinearJSON struct {
	Min  int64 `json:"min"`
	Max  int64 `json:"max"`
	Step int64 `json:"step"`
}

// JSON is l's layout in JSON.
func (l *Linear) JSON() *LinearJSON { return &LinearJSON{Min: l.Min, Max: l.Max, Step: l.Step} }

// BucketJSON is a bucket in JSON, bounds inclusive, as bpftrace's JSON
// output has them.
type BucketJSON struct {
	Min   *int64 `json:"min,omitempty"`
	Max   *int64 `json:"max,omitempty"`
	Count uint64 `json:"count"`
}

// BucketsJSON are rows as JSON buckets.
func BucketsJSON(rows []Row) []BucketJSON {
	out := []BucketJSON{}
	for _, b := range rows {
		out = append(out, BucketJSON{Min: b.Min, Max: b.Max, Count: b.Count})
	}
	return out
}
