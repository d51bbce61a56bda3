package main

// klasy trace --domains FILE: the records of several kernels on one
// timeline in the host's time, each labelled with its domain, and with
// --flow each flow's path through them (Table 6.8).

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/klasy/klasy/timeline"
	"github.com/klasy/klasy/weaver/multi"
	"github.com/klasy/klasy/weaver/target"
)

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
	_, ss, err := multi.OpenDomainsFile(ctx, file, multi.DomainsOptions{Log: s.Err, SkipIndex: true})
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

// domainJSON is a domain in the header of trace --domains --json.
type domainJSON struct {
	Name string `json:"name"`
	timeline.Clock
	Records int `json:"records"`
}

func runTraceDomains(s *stdio, f weaveFlags) error {
	switch {
	case f.Lab != "" || f.Vmlinux != "" || f.Headers != "":
		return usageError{Msg: "--domains names the kernels: not with --lab, --vmlinux or --headers"}
	case f.follow:
		return usageError{Msg: "--follow is not supported with --domains: the timeline is merged once every domain is read"}
	case f.views.set():
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
	return traceDomains(ctx, s, f, ds)
}

// traceDomains reads every domain's records, merges them in host time
// and prints the timeline, or its flows, and writes the export: what
// trace --domains does once the domains are open.
func traceDomains(ctx context.Context, s *stdio, f weaveFlags, ds []traceDomain) error {
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
	if err := printDomainsHeader(s, f.json, tds); err != nil {
		return err
	}
	var err error
	if f.flow {
		err = printFlows(s, f.json, timeline.Flows(es))
	} else {
		err = printTimeline(s, f.json, es)
	}
	if err != nil {
		return err
	}
	if f.perfetto != "" {
		if err := writePerfetto(f.perfetto, names, es, timeline.FlowLinks(es)); err != nil {
			return err
		}
	}
	if len(lostMsgs) > 0 {
		fmt.Fprintf(s.Err, "klasy: records lost because a trace buffer was full: %s\n", strings.Join(lostMsgs, ", "))
	}
	return nil
}

func printDomainsHeader(s *stdio, asJSON bool, ds []timeline.Domain) error {
	if asJSON {
		h := struct {
			Domains []domainJSON `json:"domains"`
		}{}
		for _, d := range ds {
			h.Domains = append(h.Domains, domainJSON{Name: d.Name, Clock: d.Clock, Records: len(d.Records)})
		}
		return json.NewEncoder(s.Out).Encode(h)
	}
	for _, d := range ds {
		c := d.Clock
		fmt.Fprintf(s.Out, "# domain %s: %s; clock %+.3f ms from the host's ± %s µs (best round trip of %d: %s µs)\n",
			d.Name, plural(len(d.Records), "record"), float64(c.OffsetNS)/1e6, micros(uint64(c.BoundNS)), c.Samples, micros(uint64(c.RTTNS)))
	}
	return nil
}

// printTimeline prints one line per event as klasy trace does, with the
// host time and the domain first.
func printTimeline(s *stdio, asJSON bool, es []timeline.Event) error {
	enc := json.NewEncoder(s.Out)
	for _, e := range es {
		if asJSON {
			if err := enc.Encode(e); err != nil {
				return err
			}
			continue
		}
		fmt.Fprintf(s.Out, "%s %s %s\n", hostStamp(e.HostNS), e.Domain, recordLine(e.TraceRecord))
	}
	return nil
}

// hostStamp prints a host time as klasy trace prints a record's.
func hostStamp(ns int64) string {
	sign := ""
	if ns < 0 {
		sign, ns = "-", -ns
	}
	return fmt.Sprintf("[%s%5d.%06d]", sign, ns/1e9, ns%1e9/1e3)
}

// flowPathJSON is one flow of trace --domains --flow --json.
type flowPathJSON struct {
	Flow       int32               `json:"flow"`
	HostNS     int64               `json:"host_ns"`
	DurationNS int64               `json:"duration_ns"`
	Domains    []string            `json:"domains"`
	Events     []flowPathEventJSON `json:"events"`
}

type flowPathEventJSON struct {
	ElapsedNS int64 `json:"elapsed_ns"`
	timeline.Event
}

// printFlows prints each flow as Table 6.8 does: the µs since the
// flow's first event, the domain, file, line and function of each.
func printFlows(s *stdio, asJSON bool, fls []timeline.Flow) error {
	enc := json.NewEncoder(s.Out)
	for i, fl := range fls {
		start := fl.Events[0].HostNS
		dur := fl.Events[len(fl.Events)-1].HostNS - start
		if asJSON {
			fj := flowPathJSON{Flow: fl.ID, HostNS: start, DurationNS: dur, Domains: fl.Domains()}
			for _, e := range fl.Events {
				fj.Events = append(fj.Events, flowPathEventJSON{ElapsedNS: e.HostNS - start, Event: e})
			}
			if err := enc.Encode(fj); err != nil {
				return err
			}
			continue
		}
		if i > 0 {
			fmt.Fprintln(s.Out)
		}
		fmt.Fprintf(s.Out, "flow %d: %s in %s over %s µs from %s\n", fl.ID, plural(len(fl.Events), "event"),
			strings.Join(fl.Domains(), ", "), elapsedMicros(dur), hostStamp(start))
		tw := tabwriter.NewWriter(s.Out, 0, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "  ELAPSED µs\tDOMAIN\tFILE\tLINE\tFUNCTION")
		for _, e := range fl.Events {
			fmt.Fprintf(tw, "  %10s\t%s\t%s\t%d\t%s\n", elapsedMicros(e.HostNS-start), e.Domain, e.File, e.Line, timeline.Function(e.TraceRecord))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// elapsedMicros prints a non-negative span of nanoseconds as micros
// does.
func elapsedMicros(ns int64) string {
	if ns < 0 {
		return "-" + micros(uint64(-ns))
	}
	return micros(uint64(ns))
}
