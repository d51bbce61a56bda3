package traceview

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/klasy/klasy/cmd/klasy/internal/perfetto"
	"github.com/klasy/klasy/internal/human"
	"github.com/klasy/klasy/timeline"
	"github.com/klasy/klasy/weaver/records"
)

// groupKey is an aspect and a value: an integer, or a string (str
// holds its text, with a mark when truncated or unreadable).
type groupKey struct {
	aspect string
	value  int64
	isStr  bool
	str    string
}

// traceGroup is the records of one aspect that stored one value, none
// more than the gap after the one before.
type traceGroup struct {
	groupKey
	val  records.Value // the value, as stored
	rs   []records.TraceRecord
	idx  []int  // each record's place among those the view was given
	last uint64 // the latest record's time
}

// GroupView is --group-by: one block per distinct value of an aspect,
// in the order the values first appear.
type GroupView struct {
	pick   valuePicker
	gap    uint64 // ns; 0: never split
	groups []*traceGroup
	open   map[groupKey]*traceGroup // the latest group of each key
	n      int                      // records given so far
}

// NewGroupView groups records by their index'th value (1-based), an
// integer or a string; a
// value seen again more than gap after its group's latest record starts
// a new group (0: never). Records with too few values are left out,
// with a warning to errw.
func NewGroupView(index int, gap time.Duration, errw io.Writer) *GroupView {
	return &GroupView{pick: newValuePicker("--group-by", index, errw), gap: uint64(gap), open: map[groupKey]*traceGroup{}}
}

// Add adds a record.
func (v *GroupView) Add(r records.TraceRecord) {
	seq := v.n
	v.n++
	val, ok := v.pick.key(r)
	if !ok {
		return
	}
	k := groupKey{aspect: r.Aspect, value: val.Int}
	if val.IsString() {
		k = groupKey{aspect: r.Aspect, isStr: true, str: val.String()}
	}
	g := v.open[k]
	// Records come in time order within one read of the buffer, and
	// nearly so across reads: an older record than the group's latest
	// joins it.
	if g == nil || v.gap > 0 && r.TimeNS > g.last && r.TimeNS-g.last > v.gap {
		g = &traceGroup{groupKey: k, val: val}
		v.groups = append(v.groups, g)
		v.open[k] = g
	}
	g.rs = append(g.rs, r)
	g.idx = append(g.idx, seq)
	g.last = max(g.last, r.TimeNS)
}

// Groups are the groups as a Perfetto export links them: each record
// by its place among those the view was given.
func (v *GroupView) Groups() []perfetto.Group {
	var out []perfetto.Group
	for _, g := range v.groups {
		out = append(out, perfetto.Group{Name: fmt.Sprintf("%s value %d = %s", g.aspect, v.pick.index, human.Value(g.value)), Records: g.idx})
	}
	return out
}

type groupJSON struct {
	Aspect     string            `json:"aspect"`
	ValueIndex int               `json:"value_index"`
	Value      records.Value     `json:"value"` // a number or a string
	Truncated  bool              `json:"truncated,omitempty"`
	TimeNS     uint64            `json:"time_ns"`
	DurationNS uint64            `json:"duration_ns"`
	Records    []groupRecordJSON `json:"records"`
}

type groupRecordJSON struct {
	ElapsedNS uint64 `json:"elapsed_ns"`
	records.TraceRecord
}

// Print prints each group: a line saying its value, records and span,
// then a row per record in time order.
func (v *GroupView) Print(w io.Writer, asJSON bool) error {
	enc := json.NewEncoder(w)
	for i, g := range v.groups {
		rs := slices.Clone(g.rs)
		slices.SortStableFunc(rs, func(a, b records.TraceRecord) int { return cmp.Compare(a.TimeNS, b.TimeNS) })
		start, end := rs[0].TimeNS, rs[len(rs)-1].TimeNS
		if asJSON {
			gj := groupJSON{Aspect: g.aspect, ValueIndex: v.pick.index, Value: g.val, Truncated: g.val.Truncated, TimeNS: start, DurationNS: end - start}
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
		fmt.Fprintf(w, "%s value %d = %s: %s over %s µs from [%5d.%06d]\n", g.aspect, v.pick.index, g.val,
			human.Plural(len(rs), "record"), human.Micros(end-start), start/1e9, start%1e9/1e3)
		tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "  ELAPSED µs\tCPU\tPID\tCOMM\tADVICE\tFUNCTION\tFILE:LINE\tVALUES")
		for _, r := range rs {
			var vals []string
			for j, x := range r.Values {
				if j != v.pick.index-1 {
					vals = append(vals, x.String())
				}
			}
			fmt.Fprintf(tw, "  %10s\t%d\t%d\t%s\t%d\t%s\t%s:%d\t%s\n", human.Micros(r.TimeNS-start), r.CPU, r.PID, r.Comm, r.Advice,
				timeline.Function(r), r.File, r.Line, strings.Join(vals, " "))
		}
		tw.Flush()
	}
	return nil
}
