package main

import (
	"fmt"

	"github.com/klasy/klasy/aspect"
	"github.com/klasy/klasy/cmd/klasy/internal/jpview"
	"github.com/klasy/klasy/internal/human"
	"github.com/klasy/klasy/weaver"
	"github.com/klasy/klasy/weaver/gen"
	"github.com/klasy/klasy/weaver/multi"
	"github.com/klasy/klasy/weaver/target"
)

func init() {
	register(&command{
		Name:    "list",
		Summary: "list the join points an aspect selects, without touching a kernel",
		Help:    helpText("list") + domainsHelp,
		Run:     runList,
	})
}

func runList(s *stdio, args []string) error {
	var t targetFlags
	var asJSON bool
	fs := newFlagSet("list")
	t.declare(fs, true, true)
	fs.BoolVar(&asJSON, "json", false, "")
	ps := declareParams(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError{Msg: fmt.Sprintf("want one aspect FILE, got %d arguments", fs.NArg())}
	}
	path := fs.Arg(0)
	src, err := aspectFile(s, path, ps)
	if err != nil {
		return err
	}
	// Only images are read: no session, no signal to roll back for.
	if t.domains == "" {
		af, err := checkAspect(s, path, src)
		if err != nil {
			return err
		}
		return listOne(s, af, "", t.TargetOptions, asJSON)
	}
	if err := t.needNoTarget(); err != nil {
		return err
	}
	file, af, per, err := checkDomainsAspect(s, t.domains, path, src)
	if err != nil {
		return err
	}
	for _, d := range file.Domains {
		if !multi.Receives(per, d.Name) {
			if !asJSON {
				fmt.Fprintf(s.Out, "%s: no advice goes to domain %s\n", gen.AspectName(path), d.Name)
			}
			continue
		}
		if err := file.NeedKernel(&d); err != nil {
			return err
		}
		opt := target.TargetOptions{Lab: d.Lab, Vmlinux: d.Vmlinux, Headers: d.Headers, Modules: d.Modules}
		if err := listOne(s, af, d.Name, opt, asJSON); err != nil {
			return err
		}
	}
	return nil
}

// listOne plans the aspect's weave into one image, of domain unless
// it is "", and prints its join points.
func listOne(s *stdio, af *aspect.File, domain string, opt target.TargetOptions, asJSON bool) error {
	sess, err := weaver.OpenImage(opt, s.Err)
	if err != nil {
		if domain != "" {
			return &multi.DomainError{Domain: domain, Err: err}
		}
		return err
	}
	defer sess.Close()
	sess.Domain = domain
	_, rep, err := weaver.Plan(sess, af)
	if err != nil {
		return weaveError(s, err)
	}
	jpview.Warnings(s.Err, rep)
	if asJSON {
		return jpview.JSON(s.Out, domain, rep)
	}
	in := ""
	if domain != "" {
		in = "domain " + domain + ": "
	}
	fmt.Fprintf(s.Out, "%s: %s%s in %s, %d would be skipped\n", rep.Aspect, in, human.Plural(len(rep.JoinPoints), "join point"), sess.T.Image(), len(rep.JoinPoints)-rep.Woven())
	jpview.Coverage(s.Out, rep)
	jpview.Table(s.Out, rep)
	return nil
}
