package main

import (
	"fmt"

	"github.com/klasy/klasy/cmd/klasy/internal/statsview"
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
	var t targetFlags
	var asJSON bool
	var only string
	fs := newFlagSet("stats")
	t.declare(fs, false, false)
	fs.BoolVar(&asJSON, "json", false, "")
	fs.StringVar(&only, "aspect", "", "")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if pos := fs.Args(); len(pos) != 0 {
		return usageError{Msg: fmt.Sprintf("takes no arguments, got %q", pos)}
	}
	ts, err := openTargets(s, &t, false, nil)
	if err != nil {
		return err
	}
	defer ts.Close()
	ctx, sess := ts.ctx, ts.one
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
	return statsview.Print(s.Out, s.Err, sess.T.Name(), stats, only, asJSON)
}
