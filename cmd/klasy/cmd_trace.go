package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/klasy/klasy/cmd/klasy/internal/flowview"
	"github.com/klasy/klasy/cmd/klasy/internal/perfetto"
	"github.com/klasy/klasy/cmd/klasy/internal/traceview"
	"github.com/klasy/klasy/timeline"
	"github.com/klasy/klasy/weaver"
	"github.com/klasy/klasy/weaver/records"
)

func init() {
	register(&command{
		Name:    "trace",
		Summary: "print what woven advice recorded, symbolized",
		Help: `usage: klasy trace [--lab NAME] [--follow] [--aspect NAME] [--json]
         [--group-by N [--group-gap D] | --hist N | --lhist N,MIN,MAX,STEP]
         [--perfetto FILE]
       klasy trace --domains FILE [--flow] [--aspect NAME] [--json] [--perfetto FILE]

Consumes the records woven advice stored (STORE_DATA...) and prints each
with the time since boot, CPU, pid, command, aspect and advice, the
function (for an inlined copy, also the function it is inlined into),
the join point's file:line and image address, the values, and flow=ID
when the advice ran for an object of a flow (xflow). Records saved by 'klasy unweave' come first. --follow keeps reading until
Ctrl-C. --aspect prints only one aspect's records (the others are still
consumed). A non-zero count of records lost because the buffer was full
is always printed.

--json prints one object per record:
  aspect advice time_ns cpu pid comm pc function inlined_in file line values
  flow (when not 0)
with pc the image address and values an array of integers (signed
64-bit), and at the end {"lost": N, "lost_per_cpu": [...]} if any were
lost.

Views: instead of one line per record, the records grouped by a value
or a histogram of a value. N is the 1-based index of the value, in the
order the advice stored them. A view prints once the trace ends (with
--follow, at Ctrl-C), as bpftrace prints its maps at exit. Records with
fewer than N values are left out, with one warning per aspect#advice.

  --group-by N    one block per distinct value N of an aspect, in the
                  order the values first appear: the path that value
                  took, as the dissertation's Table 6.3 shows a packet's.
                  Each record is a row, in time order: the µs since the
                  block's first record, CPU, pid, command, advice,
                  function, file:line, and the other values.
  --group-gap D   a value seen again more than D after its block's latest
                  record starts a new block (an sk_buff freed and
                  allocated again); default 1s, 0 never starts one.
  --hist N        a histogram of value N per aspect#advice, under a line
                  @ASPECT#ADVICE:, drawn as bpftrace's hist() draws it:
                  power-of-two buckets from the first that counts a value
                  to the last, a row each: [4K, 8K)  123 |@@@@@@@   |
                  below 0 is (..., 0); 0 and 1 are [0] and [1].
  --lhist N,MIN,MAX,STEP
                  linear buckets of STEP from MIN to MAX, as bpftrace's
                  lhist(); (..., MIN) and [MAX, ...) count the rest.
                  MAX-MIN must be a multiple of STEP, in 1000 buckets at
                  most.

With --json, a view prints one object per block:
  aspect value_index value time_ns duration_ns records
(records as above, each with elapsed_ns), or one per histogram:
  aspect advice value_index type count buckets lhist
(type hist or lhist; lhist {min max step} for lhist; each bucket
{min max count}, bounds inclusive, min absent below the first bucket and
max above the last, as bpftrace's JSON).

--perfetto FILE also writes the records, as printed, to FILE in the
Chrome trace-event JSON format that ui.perfetto.dev and chrome://tracing
open: a track per CPU, a slice per record named by its function (its
file:line, pc, task and values in the slice's arguments), and with
--group-by, flow arrows linking each group's records across CPUs.

--domains FILE reads every domain (kernel) of a domains file and merges
their records into one timeline in the host's time. Each guest's
CLOCK_MONOTONIC (the records' clock) is read over its agent 16 times,
each between two readings of the host's; the exchange with the
shortest round trip gives the offset (the guest's reading less the
midpoint of the host's two) and its bound, half that round trip: a
record's host time is right to within its domain's bound. A header
line per domain says its records, offset and bound; each record's line
starts with its host time and domain. --flow prints instead each flow
(records with the same flow ID, unique across the domains of one weave)
as Table 6.8 does: the µs since the flow's first record, domain, file,
line, function. --json prints first {"domains": [{name offset_ns
bound_ns rtt_ns samples records}]}, then one object per record (the
fields above with domain and host_ns; time_ns stays the domain's own),
or with --flow one per flow: flow host_ns duration_ns domains events
(each a record with elapsed_ns). --perfetto writes a process per
domain, a track per CPU, and an arrow from each record of a flow to
the next, across tracks and domains. --follow and the views are not
supported with --domains.

Examples:
  klasy trace --lab demo --follow
  klasy trace --lab demo --aspect net_trace --group-by 1   # per sk_buff
  klasy trace --lab demo --group-by 1 --perfetto net.json  # for ui.perfetto.dev
  klasy trace --lab demo --group-by 2 --group-gap 10ms
  klasy trace --lab demo --follow --hist 1                 # Ctrl-C draws it
  klasy trace --lab demo --lhist 1,0,14000000,2000000  # 2 ms buckets
  klasy trace --domains xen.yaml --flow                    # each flow's path
  klasy trace --domains xen.yaml --perfetto flows.json

` + targetHelp,
		Run: runTrace,
	})
}

// traceFlags are klasy trace's options.
type traceFlags struct {
	targetFlags
	json, follow, flow bool
	aspect, perfetto   string
	views              traceview.Options
}

func runTrace(s *stdio, args []string) error {
	var f traceFlags
	fs := newFlagSet("trace")
	f.declare(fs, false, true)
	fs.BoolVar(&f.json, "json", false, "")
	fs.BoolVar(&f.follow, "follow", false, "")
	fs.StringVar(&f.aspect, "aspect", "", "")
	f.views.Declare(fs.FlagSet)
	fs.StringVar(&f.perfetto, "perfetto", "", "")
	fs.BoolVar(&f.flow, "flow", false, "")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if pos := fs.Args(); len(pos) != 0 {
		return usageError{Msg: fmt.Sprintf("takes no arguments, got %q", pos)}
	}
	if f.domains != "" {
		switch {
		case f.Lab != "" || f.Vmlinux != "" || f.Headers != "":
			return usageError{Msg: "--domains names the kernels: not with --lab, --vmlinux or --headers"}
		case f.follow:
			return usageError{Msg: "--follow is not supported with --domains: the timeline is merged once every domain is read"}
		case f.views.Set():
			return usageError{Msg: "--group-by, --hist and --lhist are not supported with --domains; --flow gives each flow's path"}
		}
		ctx, cancel := signalContext()
		defer cancel()
		ds, err := openTraceDomains(ctx, s, f.domains)
		if err != nil {
			return err
		}
		defer func() {
			for _, d := range ds {
				d.src.Close()
			}
		}()
		return traceDomains(ctx, s, &f, ds)
	}
	if f.flow {
		return usageError{Msg: "--flow follows flows across kernels: give --domains FILE"}
	}
	view, err := f.views.View(s.Err)
	if err != nil {
		return usageError{Msg: err.Error()}
	}
	ctx, cancel := signalContext()
	defer cancel()
	src, err := openTraceSource(ctx, s, f.TargetOptions)
	if err != nil {
		return err
	}
	defer src.Close()
	return traceOne(ctx, s, &f, view, src)
}

// traceSource is where klasy trace reads one kernel's records: a
// session on it.
type traceSource interface {
	Name() string
	TakeSaved() (rs []weaver.TraceRecord, done func() error, err error)
	Drain(ctx context.Context) ([]weaver.TraceRecord, *records.Status, error)
	Close() error
}

type sessionSource struct{ *weaver.Session }

func (s sessionSource) Name() string { return s.T.Name() }

// openTraceSource opens klasy trace's target; a test gives its own
// records instead.
var openTraceSource = func(ctx context.Context, s *stdio, opt weaver.TargetOptions) (traceSource, error) {
	sess, _, err := openSessions(ctx, s, &targetFlags{TargetOptions: opt}, false, nil)
	if err != nil {
		return nil, err
	}
	return sessionSource{sess}, nil
}

// tracePoll is how often trace --follow reads the buffer (a test
// shortens it).
var tracePoll = 200 * time.Millisecond

// traceOne prints one kernel's records, as they come with --follow.
func traceOne(ctx context.Context, s *stdio, f *traceFlags, view traceview.View, src traceSource) error {
	p := &traceview.Printer{Out: s.Out, JSON: f.json, Aspect: f.aspect, View: view}
	if f.perfetto != "" {
		p.Export = &perfetto.Export{Path: f.perfetto, Target: src.Name()}
	}
	saved, done, err := src.TakeSaved()
	if err != nil {
		return err
	}
	if err := p.Print(saved); err != nil {
		return err
	}
	if err := done(); err != nil {
		return err
	}
	var lost uint64
	var perCPU []uint64
	for {
		rs, st, err := src.Drain(ctx)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			// What was read before is printed all the same.
			if perr := p.Finish(); perr != nil {
				return perr
			}
			return err
		}
		if err := p.Print(rs); err != nil {
			return err
		}
		if st != nil {
			lost, perCPU = st.TotalLost(), st.Lost
		}
		if !f.follow {
			if st == nil && len(saved) == 0 {
				fmt.Fprintf(s.Err, "klasy: nothing is woven into %s and no records are saved\n", src.Name())
			}
			break
		}
		// Records as they come, not when 64 KiB of them are buffered.
		if err := s.flush(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
		case <-time.After(tracePoll):
			continue
		}
		break
	}
	if err := p.Finish(); err != nil {
		return err
	}
	if lost > 0 {
		var parts []string
		for i, l := range perCPU {
			parts = append(parts, fmt.Sprintf("cpu%d %d", i, l))
		}
		fmt.Fprintf(s.Err, "klasy: %d records lost because the trace buffer was full (%s)\n", lost, strings.Join(parts, ", "))
		if f.json {
			return json.NewEncoder(s.Out).Encode(map[string]any{"lost": lost, "lost_per_cpu": perCPU})
		}
	}
	return nil
}

// traceDomain is one kernel trace --domains reads: its name in the
// domains file, its records and its clock.
type traceDomain struct {
	name  string
	src   traceSource
	clock func(context.Context) (int64, error) // the guest's CLOCK_MONOTONIC
}

// sessionClock reads a session's target's clock.
func sessionClock(src traceSource) func(context.Context) (int64, error) {
	return func(ctx context.Context) (int64, error) {
		if ss, ok := src.(sessionSource); ok {
			if c, ok := ss.T.(weaver.Clocked); ok {
				return c.Clock(ctx)
			}
		}
		return 0, fmt.Errorf("%s cannot report its clock", src.Name())
	}
}

// openTraceDomains opens a session on each domain of a domains file; a
// test gives its own.
var openTraceDomains = func(ctx context.Context, s *stdio, file string) ([]traceDomain, error) {
	_, ss, err := openSessions(ctx, s, &targetFlags{domains: file}, false, nil)
	if err != nil {
		return nil, err
	}
	ds := make([]traceDomain, len(ss))
	for i, d := range ss {
		src := sessionSource{d.Session}
		ds[i] = traceDomain{name: d.Name(), src: src, clock: sessionClock(src)}
	}
	return ds, nil
}

// clockSamples is how many clock exchanges each domain gets; hostClock
// is the host's clock (a test gives its own).
var (
	clockSamples = timeline.DefaultSamples
	hostClock    = timeline.HostNow
)

// traceDomains reads every domain's records, merges them in host time
// and prints the timeline, or its flows, and writes the export: what
// trace --domains does once the domains are open.
func traceDomains(ctx context.Context, s *stdio, f *traceFlags, ds []traceDomain) error {
	tds := make([]timeline.Domain, len(ds))
	names := make([]string, len(ds))
	var lostMsgs []string
	for i, d := range ds {
		names[i] = d.name
		c, err := timeline.Measure(ctx, clockSamples, hostClock, d.clock)
		if err != nil {
			return fmt.Errorf("domain %s: %w", d.name, err)
		}
		saved, done, err := d.src.TakeSaved()
		if err != nil {
			return fmt.Errorf("domain %s: %w", d.name, err)
		}
		rs, st, err := d.src.Drain(ctx)
		if err != nil {
			return fmt.Errorf("domain %s: %w", d.name, err)
		}
		if err := done(); err != nil {
			return fmt.Errorf("domain %s: %w", d.name, err)
		}
		if st == nil && len(saved) == 0 {
			fmt.Fprintf(s.Err, "klasy: nothing is woven into domain %s and no records are saved\n", d.name)
		}
		if st != nil && st.TotalLost() > 0 {
			lostMsgs = append(lostMsgs, fmt.Sprintf("%s %d", d.name, st.TotalLost()))
		}
		all := append(saved, rs...)
		if f.aspect != "" {
			kept := all[:0]
			for _, r := range all {
				if r.Aspect == f.aspect {
					kept = append(kept, r)
				}
			}
			all = kept
		}
		tds[i] = timeline.Domain{Name: d.name, Clock: c, Records: all}
	}
	es := timeline.Merge(tds)
	if err := flowview.Header(s.Out, f.json, tds); err != nil {
		return err
	}
	var err error
	if f.flow {
		err = flowview.Flows(s.Out, f.json, timeline.Flows(es))
	} else {
		err = flowview.Timeline(s.Out, f.json, es)
	}
	if err != nil {
		return err
	}
	if f.perfetto != "" {
		if err := perfetto.WriteFile(f.perfetto, names, es, timeline.FlowLinks(es)); err != nil {
			return err
		}
	}
	if len(lostMsgs) > 0 {
		fmt.Fprintf(s.Err, "klasy: records lost because a trace buffer was full: %s\n", strings.Join(lostMsgs, ", "))
	}
	return nil
}
