package main

import (
	"encoding/json"
	"fmt"

	"github.com/klasy/klasy/cmd/klasy/internal/statusview"
	"github.com/klasy/klasy/weaver"
)

func init() {
	register(&command{
		Name:    "status",
		Summary: "show woven aspects, their hooks, hits, misses and lost records",
		Help: `usage: klasy status [--lab NAME | --domains FILE] [--json]

Reads from the kernel what klasy has woven into it: each aspect, each
hook with its address, mechanism (ftrace, jump, int3, kretprobe; "ftrace
replace" for a <replace>, kind "replace" in --json), hits and misses (a
hook hit while a handler ran: for a replacement, a call that ran the
original body), and the records waiting and
lost per CPU because the trace buffer was full. Being read from the
kernel, it is right even after a klasy that was killed.

Each flow table (an xflow of the woven aspects) shows its entries (the
objects that carry a flow ID now) and their limit, hits and misses of
get_flowid, evictions (entries pushed out at the limit), freed (entries
of objects freed without reaching quit), ambiguous (IDs cut to fit a
header while another live ID had the same kept bits), dropped
(registrations not done: NMI context, no memory) and without ID (xout_*
that found no flow ID in the header they read, and registered nothing).

--json prints one object: target runtime abi cpus buffer_kb unread
lost_per_cpu flows (each: name entries limit hits misses evictions freed
ambiguous dropped noid) aspects (each: id name module register_us hooks; each
hook: kind mechanism addr pc hits missed advice function inlined_in file
line module, addr the running kernel's address, pc the image's, module
only for a hook in a module, whose pc is then its .ko's).

With --domains, the same for every domain of the file, each under a
line naming the domain; --json prints {"domains": [...]}, each the
object above with "domain" added.

` + targetHelp + domainsHelp,
		Run: runStatus,
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
	var sts []weaver.DomainStatus
	if ts.one != nil {
		st, err := ts.one.Status(ts.ctx)
		if err != nil {
			return err
		}
		sts = []weaver.DomainStatus{{Target: ts.one.T.Name(), Status: st}}
	} else if sts, err = weaver.StatusDomains(ts.ctx, ts.domains); err != nil {
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
