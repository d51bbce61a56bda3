// Package flowview prints the records of several kernels merged on one
// timeline in the host's time (package timeline), as klasy trace
// --domains does: a header per domain with its records and clock, then
// one line per record with its host time and domain, or instead each
// flow's path through the domains as the dissertation's Table 6.8
// shows it.
package flowview

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/klasy/klasy/cmd/klasy/internal/traceview"
	"github.com/klasy/klasy/internal/human"
	"github.com/klasy/klasy/timeline"
)

// DomainJSON is a domain in the header of trace --domains --json.
type DomainJSON struct {
	Name string `json:"name"`
	timeline.Clock
	Records int `json:"records"`
}

// Header prints a line per domain: its records, its clock's offset from
// the host's and that offset's bound; in JSON one object of them all.
func Header(w io.Writer, asJSON bool, ds []timeline.Domain) error {
	if asJSON {
		h := struct {
			Domains []DomainJSON `json:"domains"`
		}{}
		for _, d := range ds {
			h.Domains = append(h.Domains, DomainJSON{Name: d.Name, Clock: d.Clock, Records: len(d.Records)})
		}
		return json.NewEncoder(w).Encode(h)
	}
	for _, d := range ds {
		c := d.Clock
		fmt.Fprintf(w, "# domain %s: %s; clock %+.3f ms from the host's ± %s µs (best round trip of %d: %s µs)\n",
			d.Name, human.Plural(len(d.Records), "record"), float64(c.OffsetNS)/1e6, human.Micros(uint64(c.BoundNS)), c.Samples, human.Micros(uint64(c.RTTNS)))
	}
	return nil
}

// Timeline prints one line per event as klasy trace does, with the host
// time and the domain first.
func Timeline(w io.Writer, asJSON bool, es []timeline.Event) error {
	enc := json.NewEncoder(w)
	for _, e := range es {
		if asJSON {
			if err := enc.Encode(e); err != nil {
				return err
			}
			continue
		}
		fmt.Fprintf(w, "%s %s %s\n", hostStamp(e.HostNS), e.Domain, traceview.Line(e.TraceRecord))
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

// Flows prints each flow as Table 6.8 does: the µs since the flow's
// first event, the domain, file, line and function of each.
func Flows(w io.Writer, asJSON bool, fls []timeline.Flow) error {
	enc := json.NewEncoder(w)
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
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "flow %d: %s in %s over %s µs from %s\n", fl.ID, human.Plural(len(fl.Events), "event"),
			strings.Join(fl.Domains(), ", "), human.ElapsedMicros(dur), hostStamp(start))
		tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "  ELAPSED µs\tDOMAIN\tFILE\tLINE\tFUNCTION")
		for _, e := range fl.Events {
			fmt.Fprintf(tw, "  %10s\t%s\t%s\t%d\t%s\n", human.ElapsedMicros(e.HostNS-start), e.Domain, e.File, e.Line, timeline.Function(e.TraceRecord))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}
