// Package statsview prints what klasy stats reads of the aggregations
// woven advice keeps in the kernel: per aspect, keyed maps as tables,
// histograms as bpftrace draws them, timers as a table and histograms,
// warnings of macro uses that count nothing; as text or one JSON object
// per map.
package statsview

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/klasy/klasy/cmd/klasy/internal/hist"
	"github.com/klasy/klasy/internal/human"
	"github.com/klasy/klasy/weaver/kstack"
	"github.com/klasy/klasy/weaver/records"
)

// Stacks gives the frames of a kernel stack id (the keys of
// COUNT_STACK's maps); ok false when the kernel did not keep them.
type Stacks func(id uint64) (fs []kstack.Frame, ok bool)

// Print prints stats (nil: no runtime) of target, or of the one aspect
// named, to out, and warnings of uses that count nothing to errw; the
// keys of COUNT_STACK's maps as the frames stacks gives.
func Print(out, errw io.Writer, target string, stats *records.Stats, only string, asJSON bool, stacks Stacks) error {
	if stats == nil {
		if only != "" {
			return fmt.Errorf("aspect %s is not woven into %s: nothing of klasy is", only, target)
		}
		if !asJSON {
			fmt.Fprintf(out, "%s: nothing of klasy is woven (no klasy runtime)\n", target)
		}
		return nil
	}
	aspects := stats.Aspects
	if only != "" {
		var names []string
		for _, a := range aspects {
			names = append(names, a.Name)
		}
		i := slices.IndexFunc(aspects, func(a records.AspectStats) bool { return a.Name == only })
		if i < 0 {
			return fmt.Errorf("aspect %s is not woven into %s (woven: %s)", only, target, orNone(names))
		}
		aspects = aspects[i : i+1]
	}
	if len(aspects) == 0 && !asJSON {
		fmt.Fprintf(out, "%s: no aspect is woven\n", target)
	}
	enc := json.NewEncoder(out)
	for i, a := range aspects {
		warnFails(errw, a)
		if asJSON {
			for _, m := range a.Maps {
				if err := enc.Encode(mapView(a.Name, m, stacks)); err != nil {
					return err
				}
			}
			for _, m := range a.SharedMaps {
				if err := enc.Encode(sharedView(a.Name, m)); err != nil {
					return err
				}
			}
			continue
		}
		if i > 0 {
			fmt.Fprintln(out)
		}
		printAspectStats(out, a, stacks)
	}
	return nil
}

func orNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// macroNames are the macros of each kind, as the user wrote them.
var macroNames = map[string]string{
	records.KindCount: "COUNT", records.KindSum: "SUM", records.KindMin: "MINIMUM", records.KindMax: "MAXIMUM",
	records.KindHist: "HIST", records.KindLHist: "LHIST", records.KindTimer: "TIMER",
}

// where says where a map or a use is: "advice 2, agg.klasy:14".
func where(u records.Use) string {
	loc := fmt.Sprintf("%s:%d", u.File, u.Line)
	if u.Advice > 0 {
		return fmt.Sprintf("advice %d, %s", u.Advice, loc)
	}
	return loc
}

// warnFails says which macro uses of a got no map, and why.
func warnFails(w io.Writer, a records.AspectStats) {
	byIndex := func(i int) string {
		if i >= 0 && i < len(a.Maps) {
			m := a.Maps[i]
			return fmt.Sprintf("%s map @%s (%s)", macroNames[m.Kind], m.Label(), where(m.Use))
		}
		return "another map"
	}
	for _, f := range a.Fails {
		use := macroNames[f.Kind]
		if f.Name != "" && f.Kind != records.KindTimer {
			use += "_AS(" + f.Name + ", ...)"
		} else if f.Name != "" {
			use += "(" + f.Name + ")"
		}
		why := fmt.Sprintf("the aspect has room for %d maps and all are taken (a macro klasy did not see in the advice text, or more than %d maps)", a.Room, records.AggMaxMaps)
		if f.Reason == records.FailConflict {
			why = f.Name + " is already the " + byIndex(f.With)
			if f.Kind == records.KindLHist {
				why += " (an LHIST of one name has one set of buckets)"
			}
		}
		fmt.Fprintf(w, "klasy: warning: aspect %s: %s at %s counts nothing: %s\n", a.Name, use, where(f.Use), why)
	}
	if n := a.Failed - len(a.Fails); n > 0 {
		fmt.Fprintf(w, "klasy: warning: aspect %s: %d more macro uses count nothing\n", a.Name, n)
	}
	if a.Unclaimed > 0 {
		fmt.Fprintf(w, "klasy: warning: aspect %s: %s of those uses not counted\n", a.Name, human.Plural(int(a.Unclaimed), "hit"))
	}
}

func printAspectStats(w io.Writer, a records.AspectStats, stacks Stacks) {
	if len(a.Maps) == 0 && len(a.SharedMaps) == 0 {
		fmt.Fprintf(w, "aspect %s: no map yet (none of its aggregation macros has run)\n", a.Name)
		return
	}
	if len(a.SharedMaps) == 0 {
		fmt.Fprintf(w, "aspect %s: %s\n", a.Name, human.Plural(len(a.Maps), "map"))
	} else {
		fmt.Fprintf(w, "aspect %s: %s, %s\n", a.Name, human.Plural(len(a.Maps), "map"), human.Plural(len(a.SharedMaps), "shared map"))
	}
	defer func() {
		for _, m := range a.SharedMaps {
			fmt.Fprintln(w)
			printShared(w, m)
		}
	}()
	for _, m := range a.Maps {
		fmt.Fprintln(w)
		switch {
		case m.Key == records.KeyKStack:
			printStacks(w, m, stacks)
		case m.By:
			printBy(w, m)
		case m.Keyed():
			printKeyed(w, m)
		case m.Timer != nil:
			printTimer(w, m)
		default:
			printHistMap(w, m)
		}
	}
}

// sortedKeys are m's keys by value, largest first, then by key.
func sortedKeys(m records.Map) []records.KeyValue {
	ks := slices.Clone(m.Keys)
	slices.SortStableFunc(ks, func(a, b records.KeyValue) int {
		return cmp.Or(cmp.Compare(b.Value, a.Value), cmp.Compare(a.Key, b.Key))
	})
	return ks
}

func printKeyed(w io.Writer, m records.Map) {
	fmt.Fprintf(w, "@%s: %s per key (%s), %s\n", m.Label(), macroNames[m.Kind], where(m.Use), human.Plural(len(m.Keys), "key"))
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "KEY\t%s\t\n", macroNames[m.Kind])
	for _, k := range sortedKeys(m) {
		fmt.Fprintf(tw, "%s\t%d\t\n", human.Value(int64(k.Key)), k.Value)
	}
	tw.Flush()
	if m.Dropped > 0 {
		fmt.Fprintf(w, "  %s dropped: no room for their key (at most %d keys per map on each CPU)\n", human.Plural(int(m.Dropped), "update"), records.AggKeys)
	}
}

// byKeys are a _BY map's keys as bpftrace prints a map's: by value,
// least first, then by key; a histogram's by count.
func byKeys(m records.Map) []records.TupleKey {
	ks := slices.Clone(m.TKeys)
	slices.SortStableFunc(ks, func(a, b records.TupleKey) int {
		if len(a.Buckets) > 0 || a.Timer != nil {
			return cmp.Compare(a.N, b.N)
		}
		return cmp.Compare(a.Value, b.Value)
	})
	return ks
}

// printBy prints a _BY map as bpftrace prints a map with a key:
// "@name[dd, 1234]: 5", a histogram under "@name[dd]:".
func printBy(w io.Writer, m records.Map) {
	what := macroNames[m.Kind] + "_BY"
	if m.Kind == records.KindLHist {
		what += fmt.Sprintf(" from %d to %d by %d", m.Lo, m.Hi, m.Step)
	}
	if m.Kind == records.KindTimer {
		what = "TIMER_START_BY"
	}
	fmt.Fprintf(w, "@%s: %s (%s), %s\n", m.Label(), what, where(m.Use), human.Plural(len(m.TKeys), "key"))
	for _, k := range byKeys(m) {
		if k.Timer != nil {
			fmt.Fprintf(w, "@%s[%s]: %s\n", m.Label(), keyText(k.Key), human.Plural(int(k.N), "start-stop pair"))
			printTimes(w, k.Timer)
			continue
		}
		if len(k.Buckets) == 0 {
			fmt.Fprintf(w, "@%s[%s]: %d\n", m.Label(), keyText(k.Key), k.Value)
			continue
		}
		fmt.Fprintf(w, "@%s[%s]: %s\n", m.Label(), keyText(k.Key), human.Plural(int(k.N), "value"))
		hist.Draw(w, "", hist.Rows(k.Buckets, linear(m)))
	}
	if m.Dropped > 0 {
		fmt.Fprintf(w, "  %s dropped: no room for their key (at most %d keys per map on each CPU, %d bytes a key)\n",
			human.Plural(int(m.Dropped), "update"), records.ByKeysOf(m.Kind), 8*records.KeyWords)
	}
	if m.Timer != nil {
		printTimerNotes(w, m.Timer)
	}
}

// linear is the lhist layout of m, nil for a hist.
func linear(m records.Map) *hist.Linear {
	if m.Kind != records.KindLHist {
		return nil
	}
	return &hist.Linear{Min: m.Lo, Max: m.Hi, Step: m.Step}
}

func printHistMap(w io.Writer, m records.Map) {
	what := macroNames[m.Kind]
	if m.Kind == records.KindLHist {
		what += fmt.Sprintf(" from %d to %d by %d", m.Lo, m.Hi, m.Step)
	}
	fmt.Fprintf(w, "@%s: %s (%s), %s\n", m.Label(), what, where(m.Use), human.Plural(int(m.Count), "value"))
	hist.Draw(w, "", hist.Rows(m.Buckets, linear(m)))
}

func printTimer(w io.Writer, m records.Map) {
	t := m.Timer
	fmt.Fprintf(w, "@%s: TIMER (%s), %s\n", m.Label(), where(m.Use), human.Plural(int(t.Count), "start-stop pair"))
	printTimes(w, t)
	printTimerNotes(w, t)
}

// printTimes prints a timer's times: a table, then its histograms.
func printTimes(w io.Writer, t *records.Timer) {
	if t.Count > 0 {
		tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "\tCOUNT\tTOTAL\tAVERAGE\tLEAST\tGREATEST\t")
		for _, c := range []struct {
			name string
			t    records.Times
		}{{"wall", t.Wall}, {"on-CPU", t.CPU}} {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t\n", c.name, t.Count, human.NS(c.t.Sum), human.NS(c.t.Sum/t.Count), human.NS(c.t.Min), human.NS(c.t.Max))
		}
		tw.Flush()
		fmt.Fprintln(w, "  wall time, ns:")
		hist.Draw(w, "  ", hist.Rows(t.Wall.Buckets, nil))
		fmt.Fprintln(w, "  on-CPU time, ns:")
		hist.Draw(w, "  ", hist.Rows(t.CPU.Buckets, nil))
	}
}

// printTimerNotes says what a timer counted and did not time.
func printTimerNotes(w io.Writer, t *records.Timer) {
	var notes []string
	if t.NoStart > 0 {
		notes = append(notes, human.Plural(int(t.NoStart), "stop")+" without a start in the same task")
	}
	if t.Nested > 0 {
		notes = append(notes, human.Plural(int(t.Nested), "nested start")+" (only the outermost pair is timed)")
	}
	if t.Orphaned > 0 {
		notes = append(notes, human.Plural(int(t.Orphaned), "start")+" whose stop never came (a missed return, an error path): timed afresh from the next start")
	}
	if t.Dropped > 0 {
		notes = append(notes, fmt.Sprintf("%s dropped: more than %d tasks inside the timer at once", human.Plural(int(t.Dropped), "start"), records.AggTasks))
	}
	if t.Inside > 0 {
		notes = append(notes, human.Plural(t.Inside, "task")+" inside the timer now")
	}
	for _, n := range notes {
		fmt.Fprintf(w, "  %s\n", n)
	}
}

// MapJSON is one map of klasy stats --json.
type MapJSON struct {
	Aspect string `json:"aspect"`
	Map    string `json:"map"`
	Kind   string `json:"kind"`
	Advice int    `json:"advice,omitempty"`
	File   string `json:"file"`
	Line   int    `json:"line"`
	// Key is "kstack" for COUNT_STACK's maps: each key has its stack.
	Key string `json:"key_kind,omitempty"`
	// count, sum, min, max
	Keys []KeyJSON `json:"keys,omitempty"`
	// the _BY forms
	By      []TupleKeyJSON `json:"by,omitempty"`
	Dropped *uint64        `json:"dropped,omitempty"`
	// hist, lhist; count is also a timer's
	Count   *uint64           `json:"count,omitempty"`
	Linear  *hist.LinearJSON  `json:"lhist,omitempty"`
	Buckets []hist.BucketJSON `json:"buckets,omitempty"`
	// timer
	NoStart *uint64 `json:"no_start,omitempty"`
	Nested  *uint64 `json:"nested,omitempty"`
	// StartsDropped: a keyed timer's STARTs that found no task slot
	// (its dropped counts STOPs whose key found no room).
	StartsDropped *uint64 `json:"starts_dropped,omitempty"`
	// Orphaned are starts whose stop never came.
	Orphaned *uint64    `json:"orphaned,omitempty"`
	Inside   *int       `json:"inside,omitempty"`
	Wall     *timesJSON `json:"wall,omitempty"`
	CPU      *timesJSON `json:"cpu,omitempty"`
}

// KeyJSON is one key of a keyed map in MapJSON.
type KeyJSON struct {
	Key   int64  `json:"key"`
	Count uint64 `json:"count"`
	Value int64  `json:"value"`
	// Stack is a kstack key's frames, innermost first (empty when the
	// kernel did not keep them).
	Stack []kstack.Frame `json:"stack,omitempty"`
}

// TupleKeyJSON is one key of a _BY map in MapJSON: its values (numbers,
// strings), the count of updates, the value (count, sum, min, max) or
// the buckets (hist, lhist). Truncated numbers the key's strings (from
// 1) that were cut.
type TupleKeyJSON struct {
	Key       []records.Value   `json:"key"`
	Truncated []int             `json:"truncated,omitempty"`
	Count     uint64            `json:"count"`
	Value     *int64            `json:"value,omitempty"`
	Buckets   []hist.BucketJSON `json:"buckets,omitempty"`
	// a keyed timer's times under the key
	Wall *timesJSON `json:"wall,omitempty"`
	CPU  *timesJSON `json:"cpu,omitempty"`
}

type timesJSON struct {
	TotalNS uint64            `json:"total_ns"`
	AvgNS   uint64            `json:"avg_ns"`
	MinNS   uint64            `json:"min_ns"`
	MaxNS   uint64            `json:"max_ns"`
	Buckets []hist.BucketJSON `json:"buckets"`
}

// timesOf is one clock's times of timer t.
func timesOf(t *records.Timer, x records.Times) *timesJSON {
	tj := &timesJSON{TotalNS: x.Sum, MinNS: x.Min, MaxNS: x.Max, Buckets: hist.BucketsJSON(hist.Rows(x.Buckets, nil))}
	if t.Count > 0 {
		tj.AvgNS = x.Sum / t.Count
	}
	return tj
}

func mapView(aspect string, m records.Map, stacks Stacks) MapJSON {
	v := MapJSON{Aspect: aspect, Map: m.Label(), Kind: m.Kind, Advice: m.Advice, File: m.File, Line: m.Line, Key: m.Key}
	switch {
	case m.By:
		v.By = []TupleKeyJSON{}
		for _, k := range byKeys(m) {
			kj := TupleKeyJSON{Key: k.Key, Count: k.N}
			for i, x := range k.Key {
				if x.Truncated {
					kj.Truncated = append(kj.Truncated, i+1)
				}
			}
			switch {
			case k.Timer != nil:
				kj.Wall, kj.CPU = timesOf(k.Timer, k.Timer.Wall), timesOf(k.Timer, k.Timer.CPU)
			case len(k.Buckets) > 0:
				kj.Buckets = hist.BucketsJSON(hist.Rows(k.Buckets, linear(m)))
			default:
				kj.Value = &k.Value
			}
			v.By = append(v.By, kj)
		}
		v.Dropped = &m.Dropped
		if t := m.Timer; t != nil {
			v.NoStart, v.StartsDropped, v.Nested, v.Orphaned, v.Inside = &t.NoStart, &t.Dropped, &t.Nested, &t.Orphaned, &t.Inside
		}
		if l := linear(m); l != nil {
			v.Linear = l.JSON()
		}
	case m.Keyed():
		v.Keys = []KeyJSON{}
		for _, k := range sortedKeys(m) {
			kj := KeyJSON{Key: int64(k.Key), Count: k.N, Value: k.Value}
			if m.Key == records.KeyKStack {
				kj.Stack, _ = framesOf(stacks, k.Key)
			}
			v.Keys = append(v.Keys, kj)
		}
		v.Dropped = &m.Dropped
	case m.Timer != nil:
		t := m.Timer
		times := func(x records.Times) *timesJSON { return timesOf(t, x) }
		v.Count, v.NoStart, v.Dropped, v.Nested, v.Inside = &t.Count, &t.NoStart, &t.Dropped, &t.Nested, &t.Inside
		v.Orphaned = &t.Orphaned
		v.Wall, v.CPU = times(t.Wall), times(t.CPU)
	default:
		v.Count = &m.Count
		if l := linear(m); l != nil {
			v.Linear = l.JSON()
		}
		v.Buckets = hist.BucketsJSON(hist.Rows(m.Buckets, linear(m)))
	}
	return v
}
