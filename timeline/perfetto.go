package timeline

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"

	"github.com/klasy/klasy/weaver/records"
)

// Link joins events into one path drawn as flow arrows: a flow's events,
// or the records of one group of klasy trace --group-by.
type Link struct {
	Name   string
	Events []int // indices into the events given to WritePerfetto
}

// TraceEvent is one event of the trace-event format
// (https://docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU)
// as WritePerfetto writes it.
type TraceEvent struct {
	Name string         `json:"name"`
	Cat  string         `json:"cat,omitempty"`
	Ph   string         `json:"ph"`
	TS   float64        `json:"ts"`            // µs
	Dur  *float64       `json:"dur,omitempty"` // µs; X events only
	PID  int            `json:"pid"`
	TID  int            `json:"tid"`
	Args map[string]any `json:"args,omitempty"`
	// Flow arrows, v2: the slice carrying them is their end point.
	// Perfetto's JSON importer (and catapult's) binds them to the X event
	// itself, so an arrow cannot land on another slice of the track.
	BindID  int  `json:"bind_id,omitempty"`
	FlowIn  bool `json:"flow_in,omitempty"`
	FlowOut bool `json:"flow_out,omitempty"`
}

// sliceDur is the length of each record's slice; a record followed
// sooner on its track gets a slice ending there, so slices never
// overlap (the importer nests overlapping slices of a track, or drops
// them).
const sliceDur = 1000 // ns

// Track returns the process and thread ids of a domain's CPU: a process
// per domain, numbered from 1 in the order of names, and a thread per
// CPU unique across processes (tid 0 is the idle task to the importer).
func Track(domain, cpu int) (pid, tid int) {
	return domain + 1, (domain+1)<<16 | (cpu + 1)
}

// PerfettoEvents returns the trace events of es (in host time order, as
// Merge gives them): metadata naming each domain's process and each
// CPU's thread, a slice per event named by its function, and the links
// as flow arrows from each event to the next of its link. An event takes
// part in one link, the first that names it.
func PerfettoEvents(names []string, es []Event, links []Link) []TraceEvent {
	names = slices.Clone(names)
	domain := map[string]int{}
	for i, n := range names {
		domain[n] = i
	}
	var out []TraceEvent
	tracks := map[[2]int]bool{}
	slicesAt := make([]int, len(es)) // index in out of each event's slice
	last := map[[2]int]int{}         // the previous slice of each track
	for i, e := range es {
		d, ok := domain[e.Domain]
		if !ok {
			d = len(names)
			domain[e.Domain] = d
			names = append(names, e.Domain)
		}
		pid, tid := Track(d, e.CPU)
		key := [2]int{pid, tid}
		if !tracks[key] {
			tracks[key] = true
			out = append(out, TraceEvent{Name: "thread_name", Ph: "M", PID: pid, TID: tid, Args: map[string]any{"name": fmt.Sprintf("cpu%d", e.CPU)}})
		}
		if j, ok := last[key]; ok {
			gap := float64(e.HostNS-es[j].HostNS) / 1e3
			if *out[slicesAt[j]].Dur > gap {
				*out[slicesAt[j]].Dur = gap
			}
		}
		last[key] = i
		dur := float64(sliceDur) / 1e3
		args := map[string]any{"domain": e.Domain, "where": fmt.Sprintf("%s:%d", e.File, e.Line), "pc": e.PC, "pid": e.PID, "comm": e.Comm,
			"advice": e.Advice, "values": e.Values, "time_ns": e.TimeNS}
		if e.InlinedIn != "" {
			args["inlined_in"] = e.InlinedIn
		}
		slicesAt[i] = len(out)
		out = append(out, TraceEvent{Name: Function(e.TraceRecord), Cat: e.Aspect, Ph: "X", TS: float64(e.HostNS) / 1e3, Dur: &dur, PID: pid, TID: tid, Args: args})
	}
	meta := make([]TraceEvent, 0, len(names))
	for i, n := range names {
		pid, _ := Track(i, 0)
		meta = append(meta, TraceEvent{Name: "process_name", Ph: "M", PID: pid, Args: map[string]any{"name": n}})
	}
	bound := make([]bool, len(es))
	id := 0
	for _, l := range links {
		idx := slices.DeleteFunc(slices.Clone(l.Events), func(i int) bool { return i < 0 || i >= len(es) || bound[i] })
		if len(idx) < 2 {
			continue
		}
		slices.Sort(idx)
		id++
		for j, i := range idx {
			bound[i] = true
			ev := &out[slicesAt[i]]
			ev.BindID, ev.FlowOut, ev.FlowIn = id, j < len(idx)-1, j > 0
			ev.Args["link"] = l.Name
		}
	}
	return append(meta, out...)
}

// WritePerfetto writes PerfettoEvents as a JSON trace file that
// ui.perfetto.dev and chrome://tracing open.
func WritePerfetto(w io.Writer, names []string, es []Event, links []Link) error {
	return json.NewEncoder(w).Encode(map[string]any{"displayTimeUnit": "ns", "traceEvents": PerfettoEvents(names, es, links)})
}

// Function names a record's function as klasy trace prints it: an
// inlined copy with the function it is inlined into.
func Function(r records.TraceRecord) string {
	if r.InlinedIn != "" {
		return r.Function + " (in " + r.InlinedIn + ")"
	}
	return r.Function
}
