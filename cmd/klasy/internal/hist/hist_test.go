package hist

import (
	"math"
	"strconv"
	"strings"
	"testing"
)

// linearOf is the layout of klasy trace --lhist N,MIN,MAX,STEP.
func linearOf(t *testing.T, spec string) Linear {
	t.Helper()
	var n [4]int64
	for i, p := range strings.Split(spec, ",") {
		v, err := strconv.ParseInt(p, 0, 64)
		if err != nil {
			t.Fatalf("--lhist %s: %v", spec, err)
		}
		n[i] = v
	}
	return Linear{Min: n[1], Max: n[2], Step: n[3]}
}

// Bucket edges: each value in the bucket whose bounds bpftrace gives it.
func TestHistBuckets(t *testing.T) {
	log2 := []struct {
		v     int64
		label string
	}{
		{math.MinInt64, "(..., 0)"}, {-1, "(..., 0)"}, {0, "[0]"}, {1, "[1]"}, {2, "[2, 4)"}, {3, "[2, 4)"},
		{4, "[4, 8)"}, {1023, "[512, 1K)"}, {1024, "[1K, 2K)"}, {1 << 20, "[1M, 2M)"}, {1<<30 - 1, "[512M, 1G)"},
		{1 << 40, "[1T, 2T)"}, {1 << 50, "[1P, 2P)"}, {1 << 60, "[1E, 2E)"}, {math.MaxInt64, "[4E, 8E)"},
	}
	for _, tt := range log2 {
		counts := make([]uint64, Log2Buckets)
		counts[Log2Bucket(tt.v)]++
		rows := Rows(counts, nil)
		if len(rows) != 1 || rows[0].Label != tt.label || rows[0].Count != 1 {
			t.Errorf("hist of %d: %+v, want one row %s", tt.v, rows, tt.label)
			continue
		}
		if b := rows[0]; b.Min != nil && tt.v < *b.Min || b.Max != nil && tt.v > *b.Max {
			t.Errorf("hist of %d: bucket %s has bounds %v..%v, which leave it out", tt.v, b.Label, b.Min, b.Max)
		}
	}
	linear := []struct {
		spec  string
		v     int64
		label string
	}{
		{"1,0,100,10", -1, "(..., 0)"}, {"1,0,100,10", 0, "[0, 10)"}, {"1,0,100,10", 9, "[0, 10)"}, {"1,0,100,10", 10, "[10, 20)"},
		{"1,0,100,10", 99, "[90, 100)"}, {"1,0,100,10", 100, "[100, ...)"}, {"1,0,100,10", math.MaxInt64, "[100, ...)"},
		{"1,-20,20,10", math.MinInt64, "(..., -20)"}, {"1,-20,20,10", -11, "[-20, -10)"}, {"1,-20,20,10", -10, "[-10, 0)"},
		{"1,0,4096,1024", 1500, "[1K, 2K)"}, {"1,0,4194304,1048576", 3 << 20, "[3M, 4M)"}, {"1,0,3000,1000", 2999, "[2000, 3000)"},
		{"1,-9223372036854775807,0,9223372036854775807", math.MinInt64, "(..., -9223372036854775807)"},
		{"1,-9223372036854775807,0,9223372036854775807", -1, "[-9223372036854775807, 0)"},
		{"1,-9223372036854775807,0,9223372036854775807", math.MaxInt64, "[0, ...)"},
	}
	for _, tt := range linear {
		l := linearOf(t, tt.spec)
		counts := make([]uint64, l.Buckets())
		counts[l.Bucket(tt.v)]++
		rows := Rows(counts, &l)
		if len(rows) != 1 || rows[0].Label != tt.label {
			t.Errorf("lhist %s of %d: %+v, want one row %s", tt.spec, tt.v, rows, tt.label)
			continue
		}
		if b := rows[0]; b.Min != nil && tt.v < *b.Min || b.Max != nil && tt.v > *b.Max {
			t.Errorf("lhist %s of %d: bucket %s has bounds %d..%d, which leave it out", tt.spec, tt.v, b.Label, b.Min, b.Max)
		}
	}
}
