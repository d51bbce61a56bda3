package main

// klasy trace --perfetto FILE: the records as a trace a viewer opens
// (ui.perfetto.dev, chrome://tracing): the Chrome trace-event JSON
// format, one track per CPU of each traced kernel, one slice per record
// named by its function, and with --group-by, flow arrows that link the
// records of each group (one packet's path) across CPUs.

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/klasy/klasy/weaver"
)

// perfettoExport collects the records klasy trace prints.
type perfettoExport struct {
	path   string
	target string // the process track's name: "lab demo"
	rs     []weaver.TraceRecord
}

func (e *perfettoExport) add(r weaver.TraceRecord) { e.rs = append(e.rs, r) }

// traceEvent is one event of the trace-event format
// (https://docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU).
type traceEvent struct {
	Name string         `json:"name"`
	Cat  string         `json:"cat,omitempty"`
	Ph   string         `json:"ph"`
	TS   float64        `json:"ts"` // µs
	Dur  float64        `json:"dur,omitempty"`
	PID  int            `json:"pid"`
	TID  int            `json:"tid"`
	ID   int            `json:"id,omitempty"`
	BP   string         `json:"bp,omitempty"`
	Args map[string]any `json:"args,omitempty"`
}

// write writes the file; groups, when given (--group-by), become flows.
func (e *perfettoExport) write(groups []*traceGroup, valueIndex int) error {
	const pid = 1
	events := []traceEvent{{Name: "process_name", Ph: "M", PID: pid, Args: map[string]any{"name": e.target}}}
	cpus := map[int]bool{}
	rs := slices.Clone(e.rs)
	slices.SortStableFunc(rs, func(a, b weaver.TraceRecord) int { return cmp.Compare(a.TimeNS, b.TimeNS) })
	for _, r := range rs {
		if !cpus[r.CPU] {
			cpus[r.CPU] = true
			events = append(events, traceEvent{Name: "thread_name", Ph: "M", PID: pid, TID: r.CPU, Args: map[string]any{"name": fmt.Sprintf("cpu%d", r.CPU)}})
		}
		events = append(events, traceEvent{Name: recordFunction(r), Cat: r.Aspect, Ph: "X", TS: us(r.TimeNS), Dur: 1, PID: pid, TID: r.CPU,
			Args: map[string]any{"where": fmt.Sprintf("%s:%d", r.File, r.Line), "pc": r.PC, "pid": r.PID, "comm": r.Comm,
				"advice": r.Advice, "values": r.Values}})
	}
	for i, g := range groups {
		grs := slices.Clone(g.rs)
		slices.SortStableFunc(grs, func(a, b weaver.TraceRecord) int { return cmp.Compare(a.TimeNS, b.TimeNS) })
		if len(grs) < 2 {
			continue
		}
		name := fmt.Sprintf("%s value %d = %s", g.aspect, valueIndex, formatValue(g.value))
		for j, r := range grs {
			ph := "t"
			switch j {
			case 0:
				ph = "s"
			case len(grs) - 1:
				ph = "f"
			}
			// bp "e": bind to the slice that encloses the point, the
			// record's own.
			events = append(events, traceEvent{Name: name, Cat: "group", Ph: ph, TS: us(r.TimeNS), PID: pid, TID: r.CPU, ID: i + 1, BP: "e"})
		}
	}
	tmp, err := os.CreateTemp(filepath.Dir(e.path), filepath.Base(e.path)+".tmp*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", e.path, err)
	}
	w := bufio.NewWriter(tmp)
	err = json.NewEncoder(w).Encode(map[string]any{"displayTimeUnit": "ns", "traceEvents": events})
	if err == nil {
		err = w.Flush()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), e.path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("writing %s: %w", e.path, err)
	}
	return nil
}

// us converts nanoseconds to the format's microseconds.
func us(ns uint64) float64 { return float64(ns) / 1e3 }
