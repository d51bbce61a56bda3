package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/klasy/klasy/aspect"
	"github.com/klasy/klasy/domains"
	"github.com/klasy/klasy/weaver"
	"github.com/klasy/klasy/weaver/gen"
	"github.com/klasy/klasy/weaver/multi"
	"github.com/klasy/klasy/weaver/resolve"
	"github.com/klasy/klasy/weaver/target"
)

// The weaver's commands with --domains FILE: one command for every
// domain (kernel) of a domains file (package domains), dissertation
// §5.4.2.

const domainsHelp = `
Several kernels at once (--domains FILE): every domain of a domains file
(YAML; see 'klasy agent keys' and package domains), each reached through
a lab of 'klasy lab up' (lab: NAME) or an agent over mutual TLS
(address: HOST:PORT, with the file's ca: and controller: keys, which
'klasy agent keys FILE' makes), with its kernel image, headers and
plugin-built modules (vmlinux:, headers:, modules:; a lab knows its
own). A Xen lab writes such a file (klasy lab status shows where):

  domains:
    - name: a
      lab: klasy-a
    - name: b
      address: 127.0.0.1:40111
      cert: keys/b.crt
      key: keys/b.key
      vmlinux: /srv/b/vmlinux
      headers: /srv/b/build
      modules: [/srv/b/xen-netback.ko]

A domain gets only the advice its qualifiers allow: within_file(F@D) and
within_function(G@D) hold in domain D only. An AND-group of a pointcut
goes to every domain when it names none, to D when it names D; an advice
no domain gets is an error. weave resolves and builds for every domain
before it loads into any; a domain that fails (unreachable, a hook its
kernel refuses) fails the weave everywhere: the aspect is unwoven from
the domains it reached, and the error names the domain. Reports are
per domain; --json objects of weave and list have "domain" added.

  klasy weave --domains labs.yaml examples/netflow.klasy
  klasy status --domains labs.yaml
  klasy unweave --domains labs.yaml netflow
`

// needNoTarget refuses the one-kernel options beside --domains.
func needNoTarget(f *weaveFlags) error {
	if f.Lab != "" || f.Vmlinux != "" || f.Headers != "" || len(f.Modules) > 0 {
		return usageError{Msg: "--domains FILE names each domain's kernel: give no --lab, --vmlinux, --headers or --module"}
	}
	return nil
}

func runWeaveDomains(s *stdio, f *weaveFlags, path string, src []byte) error {
	if err := needNoTarget(f); err != nil {
		return err
	}
	// A bad aspect, or one naming a domain the file lacks, fails here,
	// before any kernel is looked at.
	file, asp, _, err := checkDomainsAspect(s, f.domains, path, src)
	if err != nil {
		return err
	}
	ctx, cancel := signalContext()
	defer cancel()
	ss, err := multi.OpenDomains(ctx, file, multi.DomainsOptions{Log: s.Err})
	if err != nil {
		return err
	}
	defer multi.CloseDomains(ss)
	for _, d := range ss {
		d.BufferKB = f.bufferKB
	}
	reps, err := multi.WeaveDomains(ctx, ss, asp)
	for _, r := range reps {
		if r.Report != nil {
			if err == nil {
				printWarnings(s, r.Report)
			}
			printSkipped(s, r.Report)
		}
	}
	if err != nil {
		return weaveError(s, err)
	}
	for _, r := range reps {
		switch {
		case r.Report == nil && !f.json:
			fmt.Fprintf(s.Out, "%s: no advice goes to domain %s\n", gen.AspectName(path), r.Domain)
		case r.Report == nil:
		case f.json:
			if err := printDomainJoinPointsJSON(s, r.Domain, r.Report); err != nil {
				return err
			}
		default:
			printWeaveReport(s, r.Report, f.verbose)
		}
	}
	return nil
}

// checkDomainsAspect loads the domains file and the aspect, and says
// which domains each advice goes to; diagnostics are printed.
func checkDomainsAspect(s *stdio, domainsPath, path string, src []byte) (*domains.File, *aspect.File, [][]string, error) {
	file, err := domains.Load(domainsPath)
	if err != nil {
		return nil, nil, nil, err
	}
	af, err := weaver.LoadAspect(path, src)
	if err != nil {
		return nil, nil, nil, weaveError(s, err)
	}
	names := make([]string, len(file.Domains))
	for i, d := range file.Domains {
		names[i] = d.Name
	}
	per, err := resolve.AdviceDomains(af, names)
	if err != nil {
		return nil, nil, nil, weaveError(s, err)
	}
	return file, af, per, nil
}

func runListDomains(s *stdio, f *weaveFlags, path string, src []byte) error {
	if err := needNoTarget(f); err != nil {
		return err
	}
	file, asp, per, err := checkDomainsAspect(s, f.domains, path, src)
	if err != nil {
		return err
	}
	for _, d := range file.Domains {
		if !multi.Receives(per, d.Name) {
			if !f.json {
				fmt.Fprintf(s.Out, "%s: no advice goes to domain %s\n", gen.AspectName(path), d.Name)
			}
			continue
		}
		if err := file.NeedKernel(&d); err != nil {
			return err
		}
		sess, err := weaver.OpenImage(target.TargetOptions{Lab: d.Lab, Vmlinux: d.Vmlinux, Headers: d.Headers, Modules: d.Modules}, s.Err)
		if err != nil {
			return &multi.DomainError{Domain: d.Name, Err: err}
		}
		sess.Domain = d.Name
		_, rep, err := weaver.Plan(sess, asp)
		sess.Close()
		if err != nil {
			return weaveError(s, err)
		}
		printWarnings(s, rep)
		if f.json {
			if err := printDomainJoinPointsJSON(s, d.Name, rep); err != nil {
				return err
			}
			continue
		}
		fmt.Fprintf(s.Out, "%s: domain %s: %s in %s, %d would be skipped\n", rep.Aspect, d.Name, plural(len(rep.JoinPoints), "join point"), sess.T.Image(), len(rep.JoinPoints)-rep.Woven())
		printCoverage(s.Out, rep)
		printJoinPoints(s.Out, rep)
	}
	return nil
}

// runtimeSessions opens every domain of --domains for what reads or
// unloads the runtime only (unweave, status): no image is indexed.
func runtimeSessions(s *stdio, f *weaveFlags, run func(ctx context.Context, ss []*multi.DomainSession) error) error {
	if err := needNoTarget(f); err != nil {
		return err
	}
	ctx, cancel := signalContext()
	defer cancel()
	_, ss, err := multi.OpenDomainsFile(ctx, f.domains, multi.DomainsOptions{Log: s.Err, SkipIndex: true})
	if err != nil {
		return err
	}
	defer multi.CloseDomains(ss)
	return run(ctx, ss)
}

func runUnweaveDomains(s *stdio, f *weaveFlags, names []string) error {
	return runtimeSessions(s, f, func(ctx context.Context, ss []*multi.DomainSession) error {
		return unweaveDomains(ctx, s, f, ss, names)
	})
}

func unweaveDomains(ctx context.Context, s *stdio, f *weaveFlags, ss []*multi.DomainSession, names []string) error {
	reps, err := multi.UnweaveDomains(ctx, ss, names, f.all)
	for i, rep := range reps {
		if rep == nil {
			continue
		}
		where := ss[i].Label()
		for _, a := range rep.Aspects {
			fmt.Fprintf(s.Out, "%s: unwoven from %s\n", a, where)
		}
		if rep.Saved > 0 {
			fmt.Fprintf(s.Out, "%s: %d unread records saved: 'klasy trace' prints them\n", where, rep.Saved)
		}
		if rep.RuntimeRemoved {
			fmt.Fprintf(s.Out, "no aspect left: the klasy runtime is removed from %s\n", where)
		} else if f.all && len(rep.Aspects) == 0 && err == nil {
			fmt.Fprintf(s.Out, "nothing of klasy is woven into %s\n", where)
		}
	}
	return err
}

// domainStatusJSON is one domain of klasy status --domains --json.
type domainStatusJSON struct {
	Domain string `json:"domain"`
	statusJSON
}

func runStatusDomains(s *stdio, f *weaveFlags) error {
	return runtimeSessions(s, f, func(ctx context.Context, ss []*multi.DomainSession) error {
		return statusDomains(ctx, s, f, ss)
	})
}

func statusDomains(ctx context.Context, s *stdio, f *weaveFlags, ss []*multi.DomainSession) error {
	sts, err := multi.StatusDomains(ctx, ss)
	if err != nil {
		return err
	}
	if f.json {
		out := struct {
			Domains []domainStatusJSON `json:"domains"`
		}{Domains: []domainStatusJSON{}}
		for _, d := range sts {
			out.Domains = append(out.Domains, domainStatusJSON{Domain: d.Domain, statusJSON: statusView(d.Target, d.Status)})
		}
		return json.NewEncoder(s.Out).Encode(out)
	}
	for _, d := range sts {
		writeStatus(s.Out, d.Target, d.Status)
	}
	return nil
}
