package main

import (
	"errors"
	"fmt"

	"github.com/klasy/klasy/aspect"
	"github.com/klasy/klasy/aspect/params"
	"github.com/klasy/klasy/domains"
	"github.com/klasy/klasy/weaver"
	"github.com/klasy/klasy/weaver/resolve"
)

// aspectFile reads the aspect a weaver command is given, with its
// parameters (ps, -D) in place. Its name is the aspect's: standard input
// has none.
func aspectFile(s *stdio, arg string, ps params.Set) ([]byte, error) {
	if arg == "-" {
		return nil, usageError{Msg: "the aspect's name comes from its file name: give a FILE, not -"}
	}
	_, src, err := readAspect(s, arg)
	if err != nil {
		return nil, err
	}
	src, err = expandAspect(s, arg, src, ps)
	if err != nil {
		return nil, weaveError(s, err)
	}
	return src, nil
}

// declareParams declares -D NAME=VALUE, the values of the aspect's
// ${NAME}s, on a command that reads an aspect.
func declareParams(fs *flagSet) params.Set {
	ps := params.Set{}
	fs.Var(ps, "D", "")
	return ps
}

// expandAspect puts the values of ps in place of the aspect's ${NAME}s;
// the aspect's diagnostics after it get their columns as written.
func expandAspect(s *stdio, name string, src []byte, ps params.Set) ([]byte, error) {
	out, e, diags := params.Expand(name, src, ps)
	if len(diags) > 0 {
		return nil, &resolve.DiagnosticsError{Diags: diags}
	}
	s.params = e
	return out, nil
}

// weaveError prints aspect diagnostics as FILE:LINE:COL lines.
func weaveError(s *stdio, err error) error {
	var de *resolve.DiagnosticsError
	if errors.As(err, &de) {
		for _, d := range s.params.Fix(de.Diags) {
			fmt.Fprintln(s.Err, d.String())
		}
		return exitError{1}
	}
	return err
}

// checkAspect parses and checks the aspect, once for the command; it
// fails with the aspect's diagnostics before any kernel is looked at.
func checkAspect(s *stdio, path string, src []byte) (*aspect.File, error) {
	af, err := weaver.LoadAspect(path, src)
	if err != nil {
		return nil, weaveError(s, err)
	}
	return af, nil
}

// checkDomainsAspect loads the domains file and the aspect, and says
// which domains each advice goes to; diagnostics are printed. A bad
// aspect, or one naming a domain the file lacks, fails here, before any
// kernel is looked at.
func checkDomainsAspect(s *stdio, domainsPath, path string, src []byte) (*domains.File, *aspect.File, [][]string, error) {
	file, err := domains.Load(domainsPath)
	if err != nil {
		return nil, nil, nil, err
	}
	af, err := checkAspect(s, path, src)
	if err != nil {
		return nil, nil, nil, err
	}
	names := make([]string, len(file.Domains))
	for i, d := range file.Domains {
		names[i] = d.Name
	}
	per, diags := aspect.AdviceDomains(af, names)
	if len(diags) > 0 {
		return nil, nil, nil, weaveError(s, &resolve.DiagnosticsError{Diags: diags})
	}
	return file, af, per, nil
}
