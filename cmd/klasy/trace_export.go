package main

// klasy trace --perfetto FILE: the records as a trace a viewer opens
// (ui.perfetto.dev, chrome://tracing): the Chrome trace-event JSON
// format as package timeline writes it, a process per traced kernel, a
// track per CPU, one slice per record named by its function, and flow
// arrows that link the records of each group (--group-by: one packet's
// path) or, with --domains, of each flow across CPUs and kernels.

import (
	"bufio"
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/klasy/klasy/timeline"
	"github.com/klasy/klasy/weaver/records"
)

// perfettoExport collects the records klasy trace prints.
type perfettoExport struct {
	path   string
	target string // the process track's name: "lab demo"
	rs     []records.TraceRecord
}

func (e *perfettoExport) add(r records.TraceRecord) { e.rs = append(e.rs, r) }

// write writes the file; groups, when given (--group-by), become flows.
// A group's idx are the indices of its records among those added.
func (e *perfettoExport) write(groups []*traceGroup, valueIndex int) error {
	order := make([]int, len(e.rs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(e.rs[a].TimeNS, e.rs[b].TimeNS) })
	pos := make([]int, len(e.rs))
	es := make([]timeline.Event, len(e.rs))
	for p, i := range order {
		pos[i] = p
		es[p] = timeline.Event{Domain: e.target, HostNS: int64(e.rs[i].TimeNS), TraceRecord: e.rs[i]}
	}
	var links []timeline.Link
	for _, g := range groups {
		l := timeline.Link{Name: fmt.Sprintf("%s value %d = %s", g.aspect, valueIndex, formatValue(g.value))}
		for _, i := range g.idx {
			l.Events = append(l.Events, pos[i])
		}
		links = append(links, l)
	}
	return writePerfetto(e.path, []string{e.target}, es, links)
}

// writePerfetto writes the trace-event file at path, whole or not at
// all.
func writePerfetto(path string, names []string, es []timeline.Event, links []timeline.Link) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	w := bufio.NewWriter(tmp)
	err = timeline.WritePerfetto(w, names, es, links)
	if err == nil {
		err = w.Flush()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
