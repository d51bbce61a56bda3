package main

import (
	"fmt"

	"github.com/klasy/klasy/weaver"
	"github.com/klasy/klasy/weaver/multi"
)

func init() {
	register(&command{
		Name:    "unweave",
		Summary: "remove woven aspects: the kernel is back to what it was",
		Help:    helpText("unweave") + targetHelp + domainsHelp,
		Run:     runUnweave,
	})
}

func runUnweave(s *stdio, args []string) error {
	var t targetFlags
	var all bool
	fs := newFlagSet("unweave")
	t.declare(fs, false, true)
	fs.BoolVar(&all, "all", false, "")
	if err := fs.Parse(args); err != nil {
		return err
	}
	names := fs.Args()
	if all == (len(names) > 0) {
		return usageError{Msg: "name the aspects to unweave (FILE or NAME), or give --all"}
	}
	if t.domains != "" {
		if err := t.needNoTarget(); err != nil {
			return err
		}
	}
	ts, err := openTargets(s, &t, false, nil)
	if err != nil {
		return err
	}
	defer ts.Close()
	var reps []*weaver.UnweaveReport
	var where []string // each report's kernel
	if ts.one != nil {
		var rep *weaver.UnweaveReport
		rep, err = weaver.Unweave(ts.ctx, ts.one, names, all)
		reps, where = []*weaver.UnweaveReport{rep}, []string{ts.one.T.Name()}
	} else {
		reps, err = multi.UnweaveDomains(ts.ctx, ts.domains, names, all)
		for _, d := range ts.domains {
			where = append(where, d.Label())
		}
	}
	for i, rep := range reps {
		if rep == nil {
			continue
		}
		for _, a := range rep.Aspects {
			fmt.Fprintf(s.Out, "%s: unwoven from %s\n", a, where[i])
		}
		if rep.Saved > 0 {
			if ts.one == nil {
				fmt.Fprintf(s.Out, "%s: ", where[i])
			}
			fmt.Fprintf(s.Out, "%d unread records saved: 'klasy trace' prints them\n", rep.Saved)
		}
		if rep.RuntimeRemoved {
			fmt.Fprintf(s.Out, "no aspect left: the klasy runtime is removed from %s\n", where[i])
		} else if all && len(rep.Aspects) == 0 && err == nil {
			fmt.Fprintf(s.Out, "nothing of klasy is woven into %s\n", where[i])
		}
	}
	return err
}
