// Package tracerun is klasy trace once its kernels are open: it reads
// their records, prints them (or a view of them), writes the exports,
// and puts back what it read and could not write, for the next trace.
// Records are consumed from a kernel only once they are written out.
package tracerun

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/klasy/klasy/cmd/klasy/internal/flowview"
	"github.com/klasy/klasy/cmd/klasy/internal/perfetto"
	"github.com/klasy/klasy/cmd/klasy/internal/traceview"
	"github.com/klasy/klasy/timeline"
	"github.com/klasy/klasy/weaver/records"
)

// Output is where a trace prints: its records, its diagnostics, and a
// way to know the records were written (Flush returns the first write
// error).
type Output struct {
	Out, Err io.Writer
	Flush    func() error
}

// Options are klasy trace's choices.
type Options struct {
	JSON, Follow, Flow bool
	Aspect, Perfetto   string
	View               traceview.View // --group-by, --hist...: one kernel only
	Poll               time.Duration  // how often --follow reads the buffer
	ClockSamples       int            // clock exchanges per domain
	HostClock          func() int64   // the host's CLOCK_MONOTONIC
	// OTLP is the tracing backend records are sent to (--otlp), and
	// Clock, for one kernel, its CLOCK_MONOTONIC, to date its spans.
	OTLP      string
	OTLPRetry time.Duration // how long a batch is retried; 0: otlpexport's default
	Clock     func(context.Context) (int64, error)
}

// Source is where klasy trace reads one kernel's records: a session
// on it.
type Source interface {
	Name() string
	TakeSaved() (rs []records.TraceRecord, done func() error, err error)
	Drain(ctx context.Context) ([]records.TraceRecord, *records.Status, error)
	// SaveRecords puts back records read and not written.
	SaveRecords(rs []records.TraceRecord) error
	Close() error
}

// Domain is one kernel trace --domains reads: its name in the
// domains file, its records and its clock.
type Domain struct {
	Name  string
	Src   Source
	Clock func(context.Context) (int64, error) // the guest's CLOCK_MONOTONIC
}

// sessionClock reads a session's target's clock.

// One prints one kernel's records, as they come with --follow.
// Records are consumed only once written out, or put back: each read's
// are written to standard output at its end, or, with a view or
// --perfetto, all of them once the trace ends; until then they are
// unwritten, and when the output fails they are saved for the next
// klasy trace (notWritten). Saved records taken are removed once
// written; until then they stay taken, for the next trace once this
// one's process is gone.
func One(ctx context.Context, s Output, f Options, src Source) error {
	p := &traceview.Printer{Out: s.Out, JSON: f.JSON, Aspect: f.Aspect, View: f.View}
	if f.Perfetto != "" {
		p.Export = &perfetto.Export{Path: f.Perfetto, Target: src.Name(), Note: s.Err}
	}
	// Without --follow, an export to a backend is written when the trace
	// ends: what it could not send is kept for the next trace.
	atEnd := p.View != nil || p.Export != nil || (f.OTLP != "" && !f.Follow)
	var otlp *otlpSink
	if f.OTLP != "" {
		var err error
		if otlp, err = newOTLPSink(ctx, f, s.Err, src.Name(), f.Clock); err != nil {
			return err
		}
	}
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
	if otlp != nil {
		if err := otlp.addRecords(ctx, aspectOnly(saved, f.Aspect)); err != nil {
			return err
		}
	}
	if !atEnd {
		if err := s.Flush(); err != nil {
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
		if otlp != nil {
			if err := otlp.close(); err != nil {
				if f.Follow {
					// What --follow sent is gone from the kernel: the
					// spans not sent were said as they failed.
					return err
				}
				return notWritten(src, unwritten, err)
			}
		}
		if err := s.Flush(); err != nil {
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
			if f.Aspect == "" || r.Aspect == f.Aspect {
				unwritten = append(unwritten, r)
			}
		}
		if err := p.Print(rs); err != nil {
			return notWritten(src, unwritten, err)
		}
		if otlp != nil {
			if err := otlp.addRecords(ctx, aspectOnly(rs, f.Aspect)); err != nil {
				return notWritten(src, unwritten, err)
			}
		}
		// Records as they come, not when 64 KiB of them are buffered.
		if err := s.Flush(); err != nil {
			return notWritten(src, unwritten, err)
		}
		if !atEnd {
			unwritten = nil
		}
		if st != nil {
			lost, perCPU = st.TotalLost(), st.Lost
		}
		if !f.Follow {
			if st == nil && len(saved) == 0 {
				fmt.Fprintf(s.Err, "klasy: nothing is woven into %s and no records are saved\n", src.Name())
			}
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(f.Poll):
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
		if f.JSON {
			return json.NewEncoder(s.Out).Encode(map[string]any{"lost": lost, "lost_per_cpu": perCPU})
		}
	}
	return nil
}

// notWritten is klasy trace's error when its output failed (err) with
// records read from the kernel and not written: it saves them for the
// next klasy trace, or says they are lost when it cannot.
func notWritten(src Source, rs []records.TraceRecord, err error) error {
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

// Domains reads every domain's records, merges them in host time
// and prints the timeline, or its flows, and writes the export: what
// trace --domains does once the domains are open. Records read from the
// kernels are put back when they could not be written (notWritten), and
// the saved ones taken are removed only once all are written.
func Domains(ctx context.Context, s Output, f Options, ds []Domain) (err error) {
	tds := make([]timeline.Domain, len(ds))
	names := make([]string, len(ds))
	var lostMsgs []string
	type read struct {
		src  Source
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
		names[i] = d.Name
		c, err := timeline.Measure(ctx, f.ClockSamples, f.HostClock, d.Clock)
		if err != nil {
			return fmt.Errorf("domain %s: %w", d.Name, err)
		}
		saved, done, err := d.Src.TakeSaved()
		if err != nil {
			return fmt.Errorf("domain %s: %w", d.Name, err)
		}
		rs, st, err := d.Src.Drain(ctx)
		if err != nil {
			return fmt.Errorf("domain %s: %w", d.Name, err)
		}
		if st == nil && len(saved) == 0 {
			fmt.Fprintf(s.Err, "klasy: nothing is woven into domain %s and no records are saved\n", d.Name)
		}
		if st != nil && st.TotalLost() > 0 {
			lostMsgs = append(lostMsgs, fmt.Sprintf("%s %d", d.Name, st.TotalLost()))
		}
		if f.Aspect != "" {
			saved, rs = ofAspect(saved, f.Aspect), ofAspect(rs, f.Aspect)
		}
		reads = append(reads, read{d.Src, rs, done})
		all := append(slices.Clip(saved), rs...)
		tds[i] = timeline.Domain{Name: d.Name, Clock: c, Records: all}
	}
	es := timeline.Merge(tds)
	if err := flowview.Header(s.Out, f.JSON, tds); err != nil {
		return err
	}
	if f.Flow {
		err = flowview.Flows(s.Out, f.JSON, timeline.Flows(es))
	} else {
		err = flowview.Timeline(s.Out, f.JSON, es)
	}
	if err != nil {
		return err
	}
	if err := s.Flush(); err != nil {
		return err
	}
	if f.OTLP != "" {
		o, err := newOTLPSink(ctx, f, s.Err, "", nil)
		if err != nil {
			return err
		}
		if err := o.addEvents(ctx, es); err != nil {
			return err
		}
		if err := o.close(); err != nil {
			return err
		}
	}
	if f.Perfetto != "" {
		if err := perfetto.WriteFile(f.Perfetto, names, es, timeline.FlowLinks(es), s.Err); err != nil {
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

// aspectOnly is rs, or with --aspect only that aspect's records.
func aspectOnly(rs []records.TraceRecord, aspect string) []records.TraceRecord {
	if aspect == "" {
		return rs
	}
	return ofAspect(rs, aspect)
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
