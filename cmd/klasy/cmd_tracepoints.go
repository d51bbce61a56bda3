package main

import (
	"encoding/json"
	"fmt"
	"runtime/debug"
	"text/tabwriter"

	"github.com/klasy/klasy/internal/mmapfile"
	"github.com/klasy/klasy/weaver/joinpoint"
	"github.com/klasy/klasy/weaver/resolve/tracepoints"
)

func init() {
	register(&command{
		Name:    "tracepoints",
		Summary: "list the kernel's tracepoints matching SUBSYS:NAME, with their arguments",
		Help:    helpText("tracepoints") + imageHelp,
		Run:     runTracepoints,
	})
}

// tracepointJSON is one line of klasy tracepoints --json.
type tracepointJSON struct {
	Name   string                 `json:"name"`
	Header string                 `json:"header"`
	File   string                 `json:"file"`
	Line   int                    `json:"line"`
	Args   []joinpoint.EventParam `json:"args"`
	Error  string                 `json:"error,omitempty"`
}

func runTracepoints(s *stdio, args []string) (err error) {
	defer mmapfile.Catch(&err, debug.SetPanicOnFault(true))
	q, p, x, err := openPatternQuery(s, "tracepoints", args)
	if err != nil {
		return err
	}
	defer x.Close()
	tw := tabwriter.NewWriter(s.Out, 0, 8, 2, ' ', 0)
	enc := json.NewEncoder(s.Out)
	n := 0
	for _, t := range tracepoints.All(x) {
		if !p.Match(t.String()) {
			continue
		}
		n++
		j := tracepointJSON{Name: t.String(), File: t.Func.File, Line: t.Func.Line}
		proto := ""
		if ev, err := tracepoints.Arguments(x, t); err != nil {
			j.Error, proto = err.Error(), "(?)"
		} else {
			j.Header, j.Args, proto = ev.Header, ev.Params, "("+ev.Proto()+")"
		}
		if q.json {
			if err := enc.Encode(j); err != nil {
				return err
			}
			continue
		}
		fmt.Fprintf(tw, "%s%s\t%s:%d\n", t, proto, t.Func.File, t.Func.Line)
	}
	if err := x.Err(); err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("no tracepoint matches %q (SUBSYS:NAME, e.g. 'sched:sched_%%')", p.String())
	}
	return tw.Flush()
}
