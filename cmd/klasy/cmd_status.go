package main

import (
	"encoding/json"
	"fmt"

	"github.com/klasy/klasy/cmd/klasy/internal/statusview"
	"github.com/klasy/klasy/weaver/multi"
)

func init() {
	register(&command{
		Name:    "status",
		Summary: "show woven aspects, their hooks, hits, misses and lost records",
		Help:    helpText("status") + targetHelp + domainsHelp,
		Run:     runStatus,
	})
}

func runStatus(s *stdio, args []string) error {
	var t targetFlags
	var asJSON bool
	fs := newFlagSet("status")
	t.declare(fs, false, true)
	fs.BoolVar(&asJSON, "json", false, "")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if pos := fs.Args(); len(pos) != 0 {
		return usageError{Msg: fmt.Sprintf("takes no arguments, got %q", pos)}
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
	var sts []multi.DomainStatus
	if ts.one != nil {
		st, err := ts.one.StatusShown(ts.ctx)
		if err != nil {
			return err
		}
		sts = []multi.DomainStatus{{Target: ts.one.T.Name(), Status: st}}
	} else if sts, err = multi.StatusDomains(ts.ctx, ts.domains); err != nil {
		return err
	}
	switch {
	case asJSON && ts.one != nil:
		return json.NewEncoder(s.Out).Encode(statusview.View(sts[0].Target, sts[0].Status))
	case asJSON:
		out := struct {
			Domains []statusview.DomainJSON `json:"domains"`
		}{Domains: []statusview.DomainJSON{}}
		for _, d := range sts {
			out.Domains = append(out.Domains, statusview.DomainJSON{Domain: d.Domain, JSON: statusview.View(d.Target, d.Status)})
		}
		return json.NewEncoder(s.Out).Encode(out)
	}
	for _, d := range sts {
		statusview.Write(s.Out, d.Target, d.Status)
	}
	return nil
}
