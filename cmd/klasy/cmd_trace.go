package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/klasy/klasy/cmd/klasy/internal/flowview"
	"github.com/klasy/klasy/cmd/klasy/internal/perfetto"
	"github.com/klasy/klasy/cmd/klasy/internal/traceview"
	"github.com/klasy/klasy/internal/interrupt"
	"github.com/klasy/klasy/timeline"
	"github.com/klasy/klasy/weaver"
	"github.com/klasy/klasy/weaver/records"
	"github.com/klasy/klasy/weaver/target"
)

func init() {
	register(&command{
		Name:    "trace",
		Summary: "print what woven advice recorded, symbolized",
		Help:    helpText("trace") + targetHelp,
		Run:     runTrace,
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
	// A reader of the output gone (trace --follow | head -1): writes fail
	// with EPIPE, and the records read are put back, instead of the
	// process dying of SIGPIPE with them.
	defer interrupt.CatchSIGPIPE()()
	// The --perfetto file is checked before any record is consumed to be
	// written there.
	checkOutput := func() error {
		if f.perfetto == "" {
			return nil
		}
		return perfetto.Check(f.perfetto)
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
		if err := checkOutput(); err != nil {
			return err
		}
		ctx, cancel := interrupt.Context()
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
	if err := checkOutput(); err != nil {
		return err
	}
	ctx, cancel := interrupt.Context()
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
	TakeSaved() (rs []records.TraceRecord, done func() error, err error)
	Drain(ctx context.Context) ([]records.TraceRecord, *records.Status, error)
	// SaveRecords puts back records read and not written.
	SaveRecords(rs []records.TraceRecord) error
	Close() error
}

type sessionSource struct{ *weaver.Session }

func (s sessionSource) Name() string { return s.T.Name() }

// openTraceSource opens klasy trace's target; a test gives its own
// records instead.
var openTraceSource = func(ctx context.Context, s *stdio, opt target.TargetOptions) (traceSource, error) {
	sess, _, err := openSessions(ctx, s, &targetFlags{TargetOptions: opt}, false, nil)
	if err != nil {
		return nil, err
	}
	sess.WarnTroubles(ctx)
	return sessionSource{sess}, nil
}

// tracePoll is how often trace --follow reads the buffer (a test
// shortens it).
var tracePoll = 200 * time.Millisecond

// traceOne prints one kernel's records, as they come with --follow.
// Records are consumed only once written out, or put back: each read's
// are written to standard output at its end, or, with a view or
// --perfetto, all of them once the trace ends; until then they are
// unwritten, and when the output fails they are saved for the next
// klasy trace (notWritten). Saved records taken are removed once
// written; until then they stay taken, for the next trace once this
// one's process is gone.
func traceOne(ctx context.Context, s *stdio, f *traceFlags, view traceview.View, src traceSource) error {
	p := &traceview.Printer{Out: s.Out, JSON: f.json, Aspect: f.aspect, View: view}
	if f.perfetto != "" {
		p.Export = &perfetto.Export{Path: f.perfetto, Target: src.Name(), Note: s.Err}
	}
	atEnd := p.View != nil || p.Export != nil
	saved, done, err := src.TakeSaved()
	if err != nil {
		return err
	}
	var unwritten []records.TraceRecord // read from the kernel, not written yet
	written := func() error {
		unwritten = nil
		if d := done; d != nil {
			done = nil
			return d()
		}
		return nil
	}
	if err := p.Print(saved); err != nil {
		return err
	}
	if !atEnd {
		if err := s.flush(); err != nil {
			return err
		}
		if err := written(); err != nil {
			return err
		}
	}
	finish := func() error {
		if err := p.Finish(); err != nil {
			return notWritten(src, unwritten, err)
		}
		if err := s.flush(); err != nil {
			return notWritten(src, unwritten, err)
		}
		return written()
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
			if perr := finish(); perr != nil {
				return perr
			}
			return err
		}
		for _, r := range rs {
			if f.aspect == "" || r.Aspect == f.aspect {
				unwritten = append(unwritten, r)
			}
		}
		if err := p.Print(rs); err != nil {
			return notWritten(src, unwritten, err)
		}
		// Records as they come, not when 64 KiB of them are buffered.
		if err := s.flush(); err != nil {
			return notWritten(src, unwritten, err)
		}
		if !atEnd {
			unwritten = nil
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
		select {
		case <-ctx.Done():
		case <-time.After(tracePoll):
			continue
		}
		break
	}
	if err := finish(); err != nil {
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

// notWritten is klasy trace's error when its output failed (err) with
// records read from the kernel and not written: it saves them for the
// next klasy trace, or says they are lost when it cannot.
func notWritten(src traceSource, rs []records.TraceRecord, err error) error {
	if len(rs) == 0 {
		return err
	}
	n := readNotWritten(len(rs), "kernel")
	if serr := src.SaveRecords(rs); serr != nil {
		return fmt.Errorf("%s: %w; saving them failed too (%v): they are lost", n, err, serr)
	}
	return fmt.Errorf("%s: %w; they are saved for the next klasy trace", n, err)
}

// readNotWritten says n records read from the kernel (or kernels) were
// not written.
func readNotWritten(n int, kernel string) string {
	if n == 1 {
		return "1 record read from the " + kernel + " was not written"
	}
	return fmt.Sprintf("%d records read from the %s were not written", n, kernel)
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
			if c, ok := ss.T.(target.Clocked); ok {
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
// trace --domains does once the domains are open. Records read from the
// kernels are put back when they could not be written (notWritten), and
// the saved ones taken are removed only once all are written.
func traceDomains(ctx context.Context, s *stdio, f *traceFlags, ds []traceDomain) (err error) {
	tds := make([]timeline.Domain, len(ds))
	names := make([]string, len(ds))
	var lostMsgs []string
	type read struct {
		src  traceSource
		rs   []records.TraceRecord // from the kernel, --aspect's
		done func() error
	}
	var reads []read
	defer func() {
		if err == nil {
			return
		}
		var msgs []string
		n := 0
		for _, r := range reads {
			if len(r.rs) == 0 {
				continue
			}
			n += len(r.rs)
			if serr := r.src.SaveRecords(r.rs); serr != nil {
				msgs = append(msgs, fmt.Sprintf("%s: %v", r.src.Name(), serr))
			}
		}
		switch {
		case n == 0:
		case len(msgs) > 0:
			err = fmt.Errorf("%s: %w; saving them failed (%s): they are lost",
				readNotWritten(n, "kernels"), err, strings.Join(msgs, "; "))
		default:
			err = fmt.Errorf("%s: %w; they are saved for the next klasy trace",
				readNotWritten(n, "kernels"), err)
		}
	}()
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
		if st == nil && len(saved) == 0 {
			fmt.Fprintf(s.Err, "klasy: nothing is woven into domain %s and no records are saved\n", d.name)
		}
		if st != nil && st.TotalLost() > 0 {
			lostMsgs = append(lostMsgs, fmt.Sprintf("%s %d", d.name, st.TotalLost()))
		}
		if f.aspect != "" {
			saved, rs = ofAspect(saved, f.aspect), ofAspect(rs, f.aspect)
		}
		reads = append(reads, read{d.src, rs, done})
		all := append(slices.Clip(saved), rs...)
		tds[i] = timeline.Domain{Name: d.name, Clock: c, Records: all}
	}
	es := timeline.Merge(tds)
	if err := flowview.Header(s.Out, f.json, tds); err != nil {
		return err
	}
	if f.flow {
		err = flowview.Flows(s.Out, f.json, timeline.Flows(es))
	} else {
		err = flowview.Timeline(s.Out, f.json, es)
	}
	if err != nil {
		return err
	}
	if err := s.flush(); err != nil {
		return err
	}
	if f.perfetto != "" {
		if err := perfetto.WriteFile(f.perfetto, names, es, timeline.FlowLinks(es), s.Err); err != nil {
			return err
		}
	}
	for _, r := range reads {
		if err := r.done(); err != nil {
			return fmt.Errorf("%s: %w", r.src.Name(), err)
		}
	}
	reads = nil
	if len(lostMsgs) > 0 {
		fmt.Fprintf(s.Err, "klasy: records lost because a trace buffer was full: %s\n", strings.Join(lostMsgs, ", "))
	}
	return nil
}

// ofAspect is the records of rs of one aspect.
func ofAspect(rs []records.TraceRecord, aspect string) []records.TraceRecord {
	var kept []records.TraceRecord
	for _, r := range rs {
		if r.Aspect == aspect {
			kept = append(kept, r)
		}
	}
	return kept
}
