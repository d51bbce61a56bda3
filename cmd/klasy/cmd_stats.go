package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/klasy/klasy/weaver"
	"github.com/klasy/klasy/weaver/records"
)

func init() {
	register(&command{
		Name:    "stats",
		Summary: "show what woven advice counted, summed, timed and drew in the kernel",
		Help: `usage: klasy stats [--lab NAME] [--aspect NAME] [--json]

Prints the aggregations woven advice keeps in the kernel, while the
aspect stays woven: instead of a record per hit (STORE_DATA, klasy
trace), advice updates per-CPU maps in place, without a lock, and the
kernel merges the CPUs when klasy stats reads them. A hot join point
then costs a counter's update, not a record.

In advice (keys and values are 64-bit integers or pointers):
  COUNT(key)              hits per key
  SUM(key, v)             the sum of v per key
  MINIMUM(key, v)         the least v per key
  MAXIMUM(key, v)         the greatest v per key
  HIST(v)                 v in power-of-two buckets (bpftrace's hist())
  LHIST(v, lo, hi, step)  v in linear buckets (bpftrace's lhist()); lo,
                          hi, step constants, at most 1000 buckets
  TIMER_START(name)       start timer name for the current task...
  TIMER_STOP(name)        ...and stop it: wall time and on-CPU time
                          (time the task was switched out excluded, as
                          KernInst's timers), per name: count, total,
                          average, least, greatest and a histogram

A map is named after its macro and line ("@count:12" for a COUNT on the
aspect's line 12) unless named with COUNT_AS(name, key), SUM_AS(name,
key, v), MINIMUM_AS, MAXIMUM_AS, HIST_AS(name, v) or LHIST_AS(name, v,
lo, hi, step). A name is the aspect's: each use of it, in any advice, is
one map. Timers are named, so a START in before advice and a STOP in
after advice time the same call. (MIN and MAX are the kernel's own
macros, hence MINIMUM and MAXIMUM.)

Bounds, never silent: at most 1024 keys per map on each CPU (further
keys' updates are counted as dropped), 1024 tasks inside one timer at
once, 64 maps per aspect. A STOP without a START in the same task is
counted; a START of a task already inside the timer (recursion) is
counted as nested, and only the outermost pair is timed. A use that
cannot have its map (a name used for two kinds) is reported, with its
hits.

Keyed maps print as tables sorted by value, largest first; histograms
as bpftrace draws them; timers as a table of count, total, average,
least and greatest wall and on-CPU time, and their histograms in ns.
--aspect shows one aspect. --json prints one object per map:
  aspect map kind advice file line
and for count, sum, min, max: keys (each {key count value}) dropped;
for hist, lhist: count buckets (each {min max count}, as klasy trace
--hist --json) and lhist {min max step}; for timer: count no_start
dropped nested inside wall cpu (each {total_ns avg_ns min_ns max_ns
buckets}).

Example: the latency of each read(2) per process and a histogram of
the sizes asked for (examples/read_latency.klasy has more):

  <aspect>
    <advice>
      <pointcut>execution(ksys_read) AND argument(count, countp)</pointcut>
      <before>
        COUNT_AS(reads, current->pid);
        HIST_AS(read_size, *(size_t *)countp);
        TIMER_START(read);
      </before>
    </advice>
    <advice>
      <pointcut>execution(ksys_read)</pointcut>
      <after>TIMER_STOP(read);</after>
    </advice>
  </aspect>

  klasy weave --lab demo reads.klasy
  klasy lab exec demo -- dd if=/dev/zero of=/dev/null bs=4k count=1000
  klasy stats --lab demo
  klasy unweave --lab demo reads

` + targetHelp,
		Run: runStats,
	})
}

func runStats(s *stdio, args []string) error {
	var f weaveFlags
	fs := newFlagSet("stats")
	fs.StringVar(&f.Lab, "lab", "", "")
	fs.StringVar(&f.Vmlinux, "vmlinux", "", "")
	fs.StringVar(&f.Headers, "headers", "", "")
	fs.BoolVar(&f.json, "json", false, "")
	fs.StringVar(&f.aspect, "aspect", "", "")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if pos := fs.Args(); len(pos) != 0 {
		return usageError{Msg: fmt.Sprintf("takes no arguments, got %q", pos)}
	}
	ctx, cancel := signalContext()
	defer cancel()
	sess, err := weaver.OpenSession(ctx, weaver.SessionOptions{TargetOptions: f.TargetOptions, Log: s.Err, SkipIndex: true})
	if err != nil {
		return err
	}
	defer sess.Close()
	// Status first: it refuses a runtime of another ABI, which has no
	// stats file to say so.
	st, err := sess.Status(ctx)
	if err != nil {
		return err
	}
	var stats *records.Stats
	if st != nil {
		if stats, err = sess.Stats(ctx); err != nil {
			return err
		}
	}
	return printStats(s, sess.T.Name(), stats, f.aspect, f.json)
}

// printStats prints stats (nil: no runtime) of target, or of the one
// aspect named.
func printStats(s *stdio, target string, stats *records.Stats, only string, asJSON bool) error {
	if stats == nil {
		if only != "" {
			return fmt.Errorf("aspect %s is not woven into %s: nothing of klasy is", only, target)
		}
		if !asJSON {
			fmt.Fprintf(s.Out, "%s: nothing of klasy is woven (no klasy runtime)\n", target)
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
		fmt.Fprintf(s.Out, "%s: no aspect is woven\n", target)
	}
	enc := json.NewEncoder(s.Out)
	for i, a := range aspects {
		warnFails(s.Err, a)
		if asJSON {
			for _, m := range a.Maps {
				if err := enc.Encode(mapView(a.Name, m)); err != nil {
					return err
				}
			}
			continue
		}
		if i > 0 {
			fmt.Fprintln(s.Out)
		}
		printAspectStats(s.Out, a)
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
		fmt.Fprintf(w, "klasy: warning: aspect %s: %s of those uses not counted\n", a.Name, plural(int(a.Unclaimed), "hit"))
	}
}

func printAspectStats(w io.Writer, a records.AspectStats) {
	if len(a.Maps) == 0 {
		fmt.Fprintf(w, "aspect %s: no map yet (none of its aggregation macros has run)\n", a.Name)
		return
	}
	fmt.Fprintf(w, "aspect %s: %s\n", a.Name, plural(len(a.Maps), "map"))
	for _, m := range a.Maps {
		fmt.Fprintln(w)
		switch {
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
	fmt.Fprintf(w, "@%s: %s per key (%s), %s\n", m.Label(), macroNames[m.Kind], where(m.Use), plural(len(m.Keys), "key"))
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "KEY\t%s\t\n", macroNames[m.Kind])
	for _, k := range sortedKeys(m) {
		fmt.Fprintf(tw, "%s\t%d\t\n", formatValue(int64(k.Key)), k.Value)
	}
	tw.Flush()
	if m.Dropped > 0 {
		fmt.Fprintf(w, "  %s dropped: no room for their key (at most %d keys per map on each CPU)\n", plural(int(m.Dropped), "update"), records.AggKeys)
	}
}

// linear is the lhist layout of m, nil for a hist.
func linear(m records.Map) *lhistFlag {
	if m.Kind != records.KindLHist {
		return nil
	}
	return &lhistFlag{min: m.Lo, max: m.Hi, step: m.Step, span: m.Hi - m.Lo}
}

func printHistMap(w io.Writer, m records.Map) {
	what := macroNames[m.Kind]
	if m.Kind == records.KindLHist {
		what += fmt.Sprintf(" from %d to %d by %d", m.Lo, m.Hi, m.Step)
	}
	fmt.Fprintf(w, "@%s: %s (%s), %s\n", m.Label(), what, where(m.Use), plural(int(m.Count), "value"))
	drawHist(w, "", histRows(m.Buckets, linear(m)))
}

// duration prints ns in the unit that suits it.
func duration(ns uint64) string {
	switch {
	case ns < 1000:
		return fmt.Sprintf("%d ns", ns)
	case ns < 1000000:
		return fmt.Sprintf("%.1f µs", float64(ns)/1e3)
	case ns < 1000000000:
		return fmt.Sprintf("%.3f ms", float64(ns)/1e6)
	}
	return fmt.Sprintf("%.3f s", float64(ns)/1e9)
}

func printTimer(w io.Writer, m records.Map) {
	t := m.Timer
	fmt.Fprintf(w, "@%s: TIMER (%s), %s\n", m.Label(), where(m.Use), plural(int(t.Count), "start-stop pair"))
	if t.Count > 0 {
		tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "\tCOUNT\tTOTAL\tAVERAGE\tLEAST\tGREATEST\t")
		for _, c := range []struct {
			name string
			t    records.Times
		}{{"wall", t.Wall}, {"on-CPU", t.CPU}} {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t\n", c.name, t.Count, duration(c.t.Sum), duration(c.t.Sum/t.Count), duration(c.t.Min), duration(c.t.Max))
		}
		tw.Flush()
		fmt.Fprintln(w, "  wall time, ns:")
		drawHist(w, "  ", histRows(t.Wall.Buckets, nil))
		fmt.Fprintln(w, "  on-CPU time, ns:")
		drawHist(w, "  ", histRows(t.CPU.Buckets, nil))
	}
	var notes []string
	if t.NoStart > 0 {
		notes = append(notes, plural(int(t.NoStart), "stop")+" without a start in the same task")
	}
	if t.Nested > 0 {
		notes = append(notes, plural(int(t.Nested), "nested start")+" (only the outermost pair is timed)")
	}
	if t.Dropped > 0 {
		notes = append(notes, fmt.Sprintf("%s dropped: more than %d tasks inside the timer at once", plural(int(t.Dropped), "start"), records.AggTasks))
	}
	if t.Inside > 0 {
		notes = append(notes, plural(t.Inside, "task")+" inside the timer now")
	}
	for _, n := range notes {
		fmt.Fprintf(w, "  %s\n", n)
	}
}

// mapJSON is one map of klasy stats --json.
type mapJSON struct {
	Aspect string `json:"aspect"`
	Map    string `json:"map"`
	Kind   string `json:"kind"`
	Advice int    `json:"advice,omitempty"`
	File   string `json:"file"`
	Line   int    `json:"line"`
	// count, sum, min, max
	Keys    []keyJSON `json:"keys,omitempty"`
	Dropped *uint64   `json:"dropped,omitempty"`
	// hist, lhist; count is also a timer's
	Count   *uint64      `json:"count,omitempty"`
	Linear  *linearJSON  `json:"lhist,omitempty"`
	Buckets []bucketJSON `json:"buckets,omitempty"`
	// timer
	NoStart *uint64    `json:"no_start,omitempty"`
	Nested  *uint64    `json:"nested,omitempty"`
	Inside  *int       `json:"inside,omitempty"`
	Wall    *timesJSON `json:"wall,omitempty"`
	CPU     *timesJSON `json:"cpu,omitempty"`
}

type keyJSON struct {
	Key   int64  `json:"key"`
	Count uint64 `json:"count"`
	Value int64  `json:"value"`
}

type timesJSON struct {
	TotalNS uint64       `json:"total_ns"`
	AvgNS   uint64       `json:"avg_ns"`
	MinNS   uint64       `json:"min_ns"`
	MaxNS   uint64       `json:"max_ns"`
	Buckets []bucketJSON `json:"buckets"`
}

func mapView(aspect string, m records.Map) mapJSON {
	v := mapJSON{Aspect: aspect, Map: m.Label(), Kind: m.Kind, Advice: m.Advice, File: m.File, Line: m.Line}
	switch {
	case m.Keyed():
		v.Keys = []keyJSON{}
		for _, k := range sortedKeys(m) {
			v.Keys = append(v.Keys, keyJSON{Key: int64(k.Key), Count: k.N, Value: k.Value})
		}
		v.Dropped = &m.Dropped
	case m.Timer != nil:
		t := m.Timer
		times := func(x records.Times) *timesJSON {
			tj := &timesJSON{TotalNS: x.Sum, MinNS: x.Min, MaxNS: x.Max, Buckets: bucketsJSON(histRows(x.Buckets, nil))}
			if t.Count > 0 {
				tj.AvgNS = x.Sum / t.Count
			}
			return tj
		}
		v.Count, v.NoStart, v.Dropped, v.Nested, v.Inside = &t.Count, &t.NoStart, &t.Dropped, &t.Nested, &t.Inside
		v.Wall, v.CPU = times(t.Wall), times(t.CPU)
	default:
		v.Count = &m.Count
		if l := linear(m); l != nil {
			v.Linear = &linearJSON{Min: l.min, Max: l.max, Step: l.step}
		}
		v.Buckets = bucketsJSON(histRows(m.Buckets, linear(m)))
	}
	return v
}
