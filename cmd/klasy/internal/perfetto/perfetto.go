// Package perfetto writes what klasy trace prints as a trace a viewer
// opens (ui.perfetto.dev, chrome://tracing): the Chrome trace-event
// JSON format as package timeline writes it, a process per traced
// kernel, a track per CPU, one slice per record named by its function,
// and flow arrows that link the records of each group (--group-by: one
// packet's path) or, with --domains, of each flow across CPUs and
// kernels. The file is written whole or not at all, through to a device
// or a FIFO, and not at all when there are no records.
package perfetto

import (
	"cmp"
	"fmt"
	"io"
	"slices"

	"github.com/klasy/klasy/internal/atomicfile"
	"github.com/klasy/klasy/timeline"
	"github.com/klasy/klasy/weaver/records"
)

// Export collects the records klasy trace prints of one kernel.
type Export struct {
	Path   string
	Target string    // the process track's name: "lab demo"
	Note   io.Writer // where a file left unwritten is said; nil: nowhere
	rs     []records.TraceRecord
}

// Add adds a record, in the order klasy trace read it.
func (e *Export) Add(r records.TraceRecord) { e.rs = append(e.rs, r) }

// Group is records to link by a flow arrow: its name, and the indices
// of its records among those added.
type Group struct {
	Name    string
	Records []int
}

// Write writes the file; groups, when given (--group-by), become flows.
func (e *Export) Write(groups []Group) error {
	order := make([]int, len(e.rs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(e.rs[a].TimeNS, e.rs[b].TimeNS) })
	pos := make([]int, len(e.rs))
	es := make([]timeline.Event, len(e.rs))
	for p, i := range order {
		pos[i] = p
		es[p] = timeline.Event{Domain: e.Target, HostNS: int64(e.rs[i].TimeNS), TraceRecord: e.rs[i]}
	}
	var links []timeline.Link
	for _, g := range groups {
		l := timeline.Link{Name: g.Name}
		for _, i := range g.Records {
			l.Events = append(l.Events, pos[i])
		}
		links = append(links, l)
	}
	return WriteFile(e.Path, []string{e.Target}, es, links, e.Note)
}

// Check says whether the file at path could be written, before klasy
// trace consumes any record to write there.
func Check(path string) error {
	if err := atomicfile.Check(path); err != nil {
		return fmt.Errorf("--perfetto: %w", err)
	}
	return nil
}

// WriteFile writes the trace-event file at path, whole or not at all:
// a process per name, the events, and links as flow arrows. With no
// events, a regular file at path is left as it was and none is
// created, which note is told ("klasy: no records to write: ..."); a
// device or a FIFO gets the empty trace.
func WriteFile(path string, names []string, es []timeline.Event, links []timeline.Link, note io.Writer) error {
	if len(es) == 0 {
		_, fi, err := atomicfile.Resolve(path)
		if err == nil && (fi == nil || fi.Mode().IsRegular()) {
			if note != nil {
				if fi == nil {
					fmt.Fprintf(note, "klasy: no records to write: %s not created\n", path)
				} else {
					fmt.Fprintf(note, "klasy: no records to write: %s left as it was\n", path)
				}
			}
			return nil
		}
	}
	err := atomicfile.Write(path, func(w io.Writer) error { return timeline.WritePerfetto(w, names, es, links) })
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
