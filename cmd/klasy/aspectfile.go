package main

import (
	"errors"
	"fmt"

	"github.com/klasy/klasy/aspect"
	"github.com/klasy/klasy/domains"
	"github.com/klasy/klasy/weaver"
)

// aspectFile reads the aspect a weaver command is given. Its name is
// the aspect's: standard input has none.
func aspectFile(s *stdio, arg string) ([]byte, error) {
	if arg == "-" {
		return nil, usageError{Msg: "the aspect's name comes from its file name: give a FILE, not -"}
	}
	_, src, err := readAspect(s, arg)
	return src, err
}

// weaveError prints aspect diagnostics as FILE:LINE:COL lines.
func weaveError(s *stdio, err error) error {
	var de *weaver.DiagnosticsError
	if errors.As(err, &de) {
		for _, d := range de.Diags {
			fmt.Fprintln(s.Err, d.String())
		}
		return exitError{1}
	}
	return err
}

// checkAspect fails with the aspect's diagnostics, before any kernel is
// looked at.
func checkAspect(s *stdio, path string, src []byte) error {
	if _, diags := aspect.Load(path, src); len(diags) > 0 {
		return weaveError(s, &weaver.DiagnosticsError{Diags: diags})
	}
	return nil
}

// checkDomainsAspect loads the domains file and the aspect, and says
// which domains each advice goes to; diagnostics are printed. A bad
// aspect, or one naming a domain the file lacks, fails here, before any
// kernel is looked at.
func checkDomainsAspect(s *stdio, domainsPath, path string, src []byte) (*domains.File, [][]string, error) {
	file, err := domains.Load(domainsPath)
	if err != nil {
		return nil, nil, err
	}
	af, diags := aspect.Load(path, src)
	if len(diags) > 0 {
		return nil, nil, weaveError(s, &weaver.DiagnosticsError{Diags: diags})
	}
	names := make([]string, len(file.Domains))
	for i, d := range file.Domains {
		names[i] = d.Name
	}
	per, err := weaver.AdviceDomains(af, names)
	if err != nil {
		return nil, nil, weaveError(s, err)
	}
	return file, per, nil
}
