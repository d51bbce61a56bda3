package main

// klasy trace's two views of the records, instead of one line per
// record: grouped by a stored value (the path one sk_buff took, as the
// dissertation's Table 6.3), and a histogram of a stored value per
// aspect#advice, drawn as bpftrace's hist() and lhist() draw theirs
// (Table 6.4). Both collect the records and print when the trace ends,
// as bpftrace prints its maps at exit.

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/klasy/klasy/timeline"
	"github.com/klasy/klasy/weaver/records"
)

// traceViewFlags are klasy trace's view options.
type traceViewFlags struct {
	groupBy  indexFlag
	groupGap gapFlag
	hist     indexFlag
	lhist    lhistFlag
}

// set says whether a view was asked for.
func (v *traceViewFlags) set() bool {
	return v.groupBy.set || v.groupGap.set || v.hist.set || v.lhist.text != ""
}

func (v *traceViewFlags) declare(fs *flagSet) {
	fs.Var(&v.groupBy, "group-by", "")
	fs.Var(&v.groupGap, "group-gap", "")
	fs.Var(&v.hist, "hist", "")
	fs.Var(&v.lhist, "lhist", "")
}

// indexFlag is the 1-based index of a stored value, checked by view.
type indexFlag struct {
	n   int
	set bool
}

func (f *indexFlag) String() string { return strconv.Itoa(f.n) }

func (f *indexFlag) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil {
		return errors.New("want the 1-based index of a stored value")
	}
	f.n, f.set = n, true
	return nil
}

// defaultGroupGap: a value seen again more than this after its group's
// latest record starts a new group (an sk_buff freed and reallocated).
const defaultGroupGap = time.Second

// gapFlag is --group-gap: a duration that knows whether it was given.
type gapFlag struct {
	d   time.Duration
	set bool
}

func (g *gapFlag) String() string { return g.d.String() }

func (g *gapFlag) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return errors.New("want a duration such as 1s or 500ms")
	}
	if d < 0 {
		return errors.New("want a duration of 0 (never split a group) or more")
	}
	g.d, g.set = d, true
	return nil
}

// lhistFlag is --lhist N,MIN,MAX,STEP, bpftrace's lhist(value, min,
// max, step) for the N'th value.
type lhistFlag struct {
	text                 string
	index                int
	min, max, step, span int64
}

// maxLinearBuckets is bpftrace's bound on lhist's buckets.
const maxLinearBuckets = 1000

func (l *lhistFlag) String() string { return l.text }

func (l *lhistFlag) Set(s string) error {
	parts := strings.Split(s, ",")
	if len(parts) != 4 {
		return errors.New("want N,MIN,MAX,STEP")
	}
	var n [4]int64
	for i, p := range parts {
		v, err := strconv.ParseInt(strings.TrimSpace(p), 0, 64)
		if err != nil {
			return fmt.Errorf("%q is not an integer (want N,MIN,MAX,STEP)", p)
		}
		n[i] = v
	}
	if err := checkValueIndex(n[0]); err != nil {
		return err
	}
	lo, hi, step := n[1], n[2], n[3]
	if step <= 0 {
		return errors.New("STEP must be positive")
	}
	span := hi - lo
	if hi <= lo || span < 0 { // span < 0: the subtraction overflowed
		return fmt.Errorf("MAX (%d) must be above MIN (%d)", hi, lo)
	}
	if span%step != 0 {
		return fmt.Errorf("MAX-MIN (%d) must be a multiple of STEP (%d)", span, step)
	}
	if span/step > maxLinearBuckets {
		return fmt.Errorf("(MAX-MIN)/STEP is %d buckets, at most %d", span/step, maxLinearBuckets)
	}
	*l = lhistFlag{text: s, index: int(n[0]), min: lo, max: hi, step: step, span: span}
	return nil
}

func checkValueIndex(n int64) error {
	if n < 1 || n > records.MaxValues {
		return fmt.Errorf("value index %d: want 1..%d, the values an advice stores, in order", n, records.MaxValues)
	}
	return nil
}

// view checks the options and returns the view they ask for: nil for
// one line per record.
func (v *traceViewFlags) view(errw io.Writer) (traceView, error) {
	var given []string
	if v.groupBy.set {
		given = append(given, "--group-by")
	}
	if v.hist.set {
		given = append(given, "--hist")
	}
	if v.lhist.text != "" {
		given = append(given, "--lhist")
	}
	if len(given) > 1 {
		return nil, usageError{Msg: strings.Join(given, " and ") + " are different views: give one"}
	}
	if v.groupGap.set && !v.groupBy.set {
		return nil, usageError{Msg: "--group-gap needs --group-by"}
	}
	check := func(opt string, n int) error {
		if err := checkValueIndex(int64(n)); err != nil {
			return usageError{Msg: fmt.Sprintf("%s: %v", opt, err)}
		}
		return nil
	}
	switch {
	case v.groupBy.set:
		if err := check("--group-by", v.groupBy.n); err != nil {
			return nil, err
		}
		gap := defaultGroupGap
		if v.groupGap.set {
			gap = v.groupGap.d
		}
		return &groupView{pick: newValuePicker("--group-by", v.groupBy.n, errw), gap: uint64(gap), open: map[groupKey]*traceGroup{}}, nil
	case v.hist.set:
		if err := check("--hist", v.hist.n); err != nil {
			return nil, err
		}
		return &histView{pick: newValuePicker("--hist", v.hist.n, errw), byKey: map[aspectAdvice]*histogram{}}, nil
	case v.lhist.text != "":
		l := v.lhist
		return &histView{pick: newValuePicker("--lhist", l.index, errw), linear: &l, byKey: map[aspectAdvice]*histogram{}}, nil
	}
	return nil, nil
}

// traceView collects records and prints them when the trace ends.
type traceView interface {
	add(r records.TraceRecord)
	print(w io.Writer, asJSON bool) error
}

type aspectAdvice struct {
	aspect string
	advice int
}

func (a aspectAdvice) String() string { return fmt.Sprintf("%s#%d", a.aspect, a.advice) }

// valuePicker takes the index'th value of a record, and says once per
// aspect#advice that a record had too few.
type valuePicker struct {
	opt    string // "--hist 3", for the warning
	index  int    // 1-based
	errw   io.Writer
	warned map[aspectAdvice]bool
}

func newValuePicker(opt string, index int, errw io.Writer) valuePicker {
	return valuePicker{opt: fmt.Sprintf("%s %d", opt, index), index: index, errw: errw, warned: map[aspectAdvice]bool{}}
}

func (p *valuePicker) value(r records.TraceRecord) (int64, bool) {
	if p.index <= len(r.Values) {
		return r.Values[p.index-1], true
	}
	k := aspectAdvice{r.Aspect, r.Advice}
	if !p.warned[k] {
		p.warned[k] = true
		fmt.Fprintf(p.errw, "klasy: warning: %s: a record of %s has %s; its records with fewer than %d are left out\n",
			p.opt, k, plural(len(r.Values), "value"), p.index)
	}
	return 0, false
}

// Grouping.

type groupKey struct {
	aspect string
	value  int64
}

// traceGroup is the records of one aspect that stored one value, none
// more than the gap after the one before.
type traceGroup struct {
	groupKey
	rs   []records.TraceRecord
	idx  []int  // each record's place among those the view was given
	last uint64 // the latest record's time
}

type groupView struct {
	pick   valuePicker
	gap    uint64 // ns; 0: never split
	groups []*traceGroup
	open   map[groupKey]*traceGroup // the latest group of each key
	n      int                      // records given so far
}

func (v *groupView) add(r records.TraceRecord) {
	seq := v.n
	v.n++
	val, ok := v.pick.value(r)
	if !ok {
		return
	}
	k := groupKey{r.Aspect, val}
	g := v.open[k]
	// Records come in time order within one read of the buffer, and
	// nearly so across reads: an older record than the group's latest
	// joins it.
	if g == nil || v.gap > 0 && r.TimeNS > g.last && r.TimeNS-g.last > v.gap {
		g = &traceGroup{groupKey: k}
		v.groups = append(v.groups, g)
		v.open[k] = g
	}
	g.rs = append(g.rs, r)
	g.idx = append(g.idx, seq)
	g.last = max(g.last, r.TimeNS)
}

type groupJSON struct {
	Aspect     string            `json:"aspect"`
	ValueIndex int               `json:"value_index"`
	Value      int64             `json:"value"`
	TimeNS     uint64            `json:"time_ns"`
	DurationNS uint64            `json:"duration_ns"`
	Records    []groupRecordJSON `json:"records"`
}

type groupRecordJSON struct {
	ElapsedNS uint64 `json:"elapsed_ns"`
	records.TraceRecord
}

func (v *groupView) print(w io.Writer, asJSON bool) error {
	enc := json.NewEncoder(w)
	for i, g := range v.groups {
		rs := slices.Clone(g.rs)
		slices.SortStableFunc(rs, func(a, b records.TraceRecord) int { return cmp.Compare(a.TimeNS, b.TimeNS) })
		start, end := rs[0].TimeNS, rs[len(rs)-1].TimeNS
		if asJSON {
			gj := groupJSON{Aspect: g.aspect, ValueIndex: v.pick.index, Value: g.value, TimeNS: start, DurationNS: end - start}
			for _, r := range rs {
				gj.Records = append(gj.Records, groupRecordJSON{ElapsedNS: r.TimeNS - start, TraceRecord: r})
			}
			if err := enc.Encode(gj); err != nil {
				return err
			}
			continue
		}
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "%s value %d = %s: %s over %s µs from [%5d.%06d]\n", g.aspect, v.pick.index, formatValue(g.value),
			plural(len(rs), "record"), micros(end-start), start/1e9, start%1e9/1e3)
		tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "  ELAPSED µs\tCPU\tPID\tCOMM\tADVICE\tFUNCTION\tFILE:LINE\tVALUES")
		for _, r := range rs {
			var vals []string
			for j, x := range r.Values {
				if j != v.pick.index-1 {
					vals = append(vals, formatValue(x))
				}
			}
			fmt.Fprintf(tw, "  %10s\t%d\t%d\t%s\t%d\t%s\t%s:%d\t%s\n", micros(r.TimeNS-start), r.CPU, r.PID, r.Comm, r.Advice,
				timeline.Function(r), r.File, r.Line, strings.Join(vals, " "))
		}
		tw.Flush()
	}
	return nil
}

// micros prints nanoseconds as microseconds with two decimals, as
// Table 6.3 does.
func micros(ns uint64) string {
	return fmt.Sprintf("%d.%02d", ns/1000, ns%1000/10)
}

// Histograms.

// histogram counts one aspect#advice's values: bucket 0 holds the
// values below the first bucket's, as bpftrace lays out its maps.
type histogram struct {
	aspectAdvice
	counts []uint64
	total  uint64
}

type histView struct {
	pick   valuePicker
	linear *lhistFlag // nil: power-of-two buckets
	hists  []*histogram
	byKey  map[aspectAdvice]*histogram
}

// log2Buckets: below 0, 0, 1, then [2^k, 2^(k+1)) for k = 1..62.
const log2Buckets = 65

// log2Bucket is bpftrace's hist() bucket of v.
func log2Bucket(v int64) int {
	if v < 0 {
		return 0
	}
	return bits.Len64(uint64(v)) + 1
}

// linearBucket is bpftrace's lhist() bucket of v: 0 below min, then
// one per step, and the last for max and above.
func (l *lhistFlag) bucket(v int64) int {
	switch {
	case v < l.min:
		return 0
	case v >= l.max:
		return int(l.span/l.step) + 1
	}
	return int((v-l.min)/l.step) + 1 // v-min <= max-min: no overflow
}

func (v *histView) add(r records.TraceRecord) {
	val, ok := v.pick.value(r)
	if !ok {
		return
	}
	k := aspectAdvice{r.Aspect, r.Advice}
	h := v.byKey[k]
	if h == nil {
		n := log2Buckets
		if v.linear != nil {
			n = int(v.linear.span/v.linear.step) + 2
		}
		h = &histogram{aspectAdvice: k, counts: make([]uint64, n)}
		v.byKey[k] = h
		v.hists = append(v.hists, h)
	}
	if v.linear != nil {
		h.counts[v.linear.bucket(val)]++
	} else {
		h.counts[log2Bucket(val)]++
	}
	h.total++
}

// bucketRow is one printed bucket: its label as bpftrace writes it and
// its bounds, inclusive, nil where it is open.
type bucketRow struct {
	label    string
	min, max *int64
	count    uint64
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

// rows are the buckets bpftrace prints of h.
func (v *histView) rows(h *histogram) []bucketRow { return histRows(h.counts, v.linear) }

// histRows are the buckets bpftrace prints of counts, laid out as
// bpftrace's hist() (linear nil) or lhist(): from the first that
// counted a value to the last, the empty ones between included.
func histRows(counts []uint64, linear *lhistFlag) []bucketRow {
	first := slices.IndexFunc(counts, func(c uint64) bool { return c > 0 })
	if first < 0 {
		return nil
	}
	last := len(counts) - 1
	for counts[last] == 0 {
		last--
	}
	ptr := func(x int64) *int64 { return &x }
	var out []bucketRow
	for i := first; i <= last; i++ {
		b := bucketRow{count: counts[i]}
		if l := linear; l != nil {
			lo := l.min + int64(i-1)*l.step
			switch {
			case i == 0:
				b.label, b.max = "(..., "+linearLabel(l.min, l.step)+")", ptr(l.min-1)
			case i == len(counts)-1:
				b.label, b.min = "["+linearLabel(l.max, l.step)+", ...)", ptr(l.max)
			default:
				b.label, b.min, b.max = "["+linearLabel(lo, l.step)+", "+linearLabel(lo+l.step, l.step)+")", ptr(lo), ptr(lo+l.step-1)
			}
		} else {
			switch {
			case i == 0:
				b.label, b.max = "(..., 0)", ptr(-1)
			case i <= 2:
				b.label, b.min, b.max = fmt.Sprintf("[%d]", i-1), ptr(int64(i-1)), ptr(int64(i-1))
			default:
				// [2^(i-2), 2^(i-1)); the top bound of the last, 2^63,
				// is 8E in the label and MaxInt64 as a number.
				lo := int64(1) << (i - 2)
				b.label, b.min, b.max = "["+log2Label(i-2)+", "+log2Label(i-1)+")", ptr(lo), ptr(lo+(lo-1))
			}
		}
		out = append(out, b)
	}
	return out
}

// histBarWidth is bpftrace's: the largest bucket's bar is 52 @ long.
const histBarWidth = 52

type histJSON struct {
	Aspect     string       `json:"aspect"`
	Advice     int          `json:"advice"`
	ValueIndex int          `json:"value_index"`
	Type       string       `json:"type"` // hist or lhist
	Linear     *linearJSON  `json:"lhist,omitempty"`
	Count      uint64       `json:"count"`
	Buckets    []bucketJSON `json:"buckets"`
}

type linearJSON struct {
	Min  int64 `json:"min"`
	Max  int64 `json:"max"`
	Step int64 `json:"step"`
}

type bucketJSON struct {
	Min   *int64 `json:"min,omitempty"`
	Max   *int64 `json:"max,omitempty"`
	Count uint64 `json:"count"`
}

func (v *histView) print(w io.Writer, asJSON bool) error {
	hs := slices.Clone(v.hists)
	slices.SortFunc(hs, func(a, b *histogram) int {
		return cmp.Or(strings.Compare(a.aspect, b.aspect), cmp.Compare(a.advice, b.advice))
	})
	enc := json.NewEncoder(w)
	for _, h := range hs {
		rows := v.rows(h)
		if asJSON {
			hj := histJSON{Aspect: h.aspect, Advice: h.advice, ValueIndex: v.pick.index, Type: "hist", Count: h.total}
			if l := v.linear; l != nil {
				hj.Type, hj.Linear = "lhist", &linearJSON{Min: l.min, Max: l.max, Step: l.step}
			}
			hj.Buckets = bucketsJSON(rows)
			if err := enc.Encode(hj); err != nil {
				return err
			}
			continue
		}
		fmt.Fprintf(w, "@%s:\n", h.aspectAdvice)
		drawHist(w, "", rows)
		fmt.Fprintln(w)
	}
	return nil
}

// bucketsJSON are rows as JSON buckets, as bpftrace's JSON output has
// them.
func bucketsJSON(rows []bucketRow) []bucketJSON {
	out := []bucketJSON{}
	for _, b := range rows {
		out = append(out, bucketJSON{Min: b.min, Max: b.max, Count: b.count})
	}
	return out
}

// drawHist draws rows as bpftrace draws a histogram, each row after
// indent: the bucket's label, its count and a bar.
func drawHist(w io.Writer, indent string, rows []bucketRow) {
	// bpftrace pads labels to 16 columns; longer ones (an lhist of
	// nanoseconds) widen the column here instead of pushing their row's
	// count and bar out of line.
	var most uint64
	width := 16
	for _, b := range rows {
		most = max(most, b.count)
		width = max(width, len(b.label))
	}
	for _, b := range rows {
		bar := strings.Repeat("@", int(b.count*histBarWidth/most))
		fmt.Fprintf(w, "%s%-*s%8d |%-*s|\n", indent, width, b.label, b.count, histBarWidth, bar)
	}
}
