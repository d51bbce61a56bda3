package traceview

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/klasy/klasy/cmd/klasy/internal/hist"
	"github.com/klasy/klasy/weaver/records"
)

// histogram counts one aspect#advice's values: bucket 0 holds the
// values below the first bucket's, as bpftrace lays out its maps.
type histogram struct {
	aspectAdvice
	counts []uint64
	total  uint64 // integers counted in counts
	// strs counts the strings the value was, by its text (bpftrace's
	// @[str] = count(): a string has no bucket), keys the first of each.
	strs map[string]uint64
	keys map[string]records.Value
}

// HistView is --hist and --lhist: a histogram of a stored value per
// aspect#advice; a string value is counted per string instead.
type HistView struct {
	pick   valuePicker
	linear *hist.Linear // nil: power-of-two buckets
	hists  []*histogram
	byKey  map[aspectAdvice]*histogram
}

// NewHistView counts records' index'th value (1-based) in power-of-two
// buckets, or linear ones. opt names the option in the warning about
// records with too few values, to errw.
func NewHistView(opt string, index int, linear *hist.Linear, errw io.Writer) *HistView {
	return &HistView{pick: newValuePicker(opt, index, errw), linear: linear, byKey: map[aspectAdvice]*histogram{}}
}

// Add adds a record.
func (v *HistView) Add(r records.TraceRecord) {
	x, ok := v.pick.key(r)
	if !ok {
		return
	}
	val := x.Int
	k := aspectAdvice{r.Aspect, r.Advice}
	h := v.byKey[k]
	if h == nil {
		n := hist.Log2Buckets
		if v.linear != nil {
			n = v.linear.Buckets()
		}
		h = &histogram{aspectAdvice: k, counts: make([]uint64, n), strs: map[string]uint64{}, keys: map[string]records.Value{}}
		v.byKey[k] = h
		v.hists = append(v.hists, h)
	}
	if x.IsString() {
		s := x.String()
		if h.strs[s] == 0 {
			h.keys[s] = x
		}
		h.strs[s]++
		return
	}
	if v.linear != nil {
		h.counts[v.linear.Bucket(val)]++
	} else {
		h.counts[hist.Log2Bucket(val)]++
	}
	h.total++
}

type histJSON struct {
	Aspect     string            `json:"aspect"`
	Advice     int               `json:"advice"`
	ValueIndex int               `json:"value_index"`
	Type       string            `json:"type"` // hist, lhist, or count (strings)
	Linear     *hist.LinearJSON  `json:"lhist,omitempty"`
	Count      uint64            `json:"count"`
	Buckets    []hist.BucketJSON `json:"buckets,omitempty"`
	Strings    []strCountJSON    `json:"strings,omitempty"`
}

// strCountJSON is how many records held one string.
type strCountJSON struct {
	Key       records.Value `json:"key"`
	Truncated bool          `json:"truncated,omitempty"`
	Count     uint64        `json:"count"`
}

// strCounts are h's strings as bpftrace prints a count map: least
// first, then by text.
func (h *histogram) strCounts() []strCountJSON {
	var out []strCountJSON
	for s, n := range h.strs {
		out = append(out, strCountJSON{Key: h.keys[s], Truncated: h.keys[s].Truncated, Count: n})
	}
	slices.SortFunc(out, func(a, b strCountJSON) int {
		return cmp.Or(cmp.Compare(a.Count, b.Count), strings.Compare(a.Key.String(), b.Key.String()))
	})
	return out
}

// Print draws each histogram under a line @ASPECT#ADVICE:.
func (v *HistView) Print(w io.Writer, asJSON bool) error {
	hs := slices.Clone(v.hists)
	slices.SortFunc(hs, func(a, b *histogram) int {
		return cmp.Or(strings.Compare(a.aspect, b.aspect), cmp.Compare(a.advice, b.advice))
	})
	enc := json.NewEncoder(w)
	for _, h := range hs {
		rows := hist.Rows(h.counts, v.linear)
		strs := h.strCounts()
		if asJSON && len(strs) > 0 {
			var total uint64
			for _, c := range strs {
				total += c.Count
			}
			if err := enc.Encode(histJSON{Aspect: h.aspect, Advice: h.advice, ValueIndex: v.pick.index, Type: "count", Count: total, Strings: strs}); err != nil {
				return err
			}
		}
		if !asJSON && len(strs) > 0 {
			for _, c := range strs {
				fmt.Fprintf(w, "@%s[%s]: %d\n", h.aspectAdvice, records.KeyString([]records.Value{c.Key}), c.Count)
			}
			fmt.Fprintln(w)
		}
		if h.total == 0 {
			continue
		}
		if asJSON {
			hj := histJSON{Aspect: h.aspect, Advice: h.advice, ValueIndex: v.pick.index, Type: "hist", Count: h.total}
			if l := v.linear; l != nil {
				hj.Type, hj.Linear = "lhist", l.JSON()
			}
			hj.Buckets = hist.BucketsJSON(rows)
			if err := enc.Encode(hj); err != nil {
				return err
			}
			continue
		}
		fmt.Fprintf(w, "@%s:\n", h.aspectAdvice)
		hist.Draw(w, "", rows)
		fmt.Fprintln(w)
	}
	return nil
}
