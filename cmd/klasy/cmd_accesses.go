package main

import (
	"errors"
	"fmt"

	"github.com/klasy/klasy/cmd/klasy/internal/queryview"
	"github.com/klasy/klasy/debugklasy"
	"github.com/klasy/klasy/pattern"
)

func init() {
	register(&command{
		Name:    "accesses",
		Summary: "list the struct member accesses a pattern selects (from .debug_klasy)",
		Help:    helpText("accesses"),
		Run:     runAccesses,
	})
}

func runAccesses(s *stdio, args []string) error {
	fs := newFlagSet("accesses")
	asJSON := fs.Bool("json", false, "")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		return usageError{Msg: fmt.Sprintf("want BINARY and 'STRUCT.MEMBER', got %d arguments", fs.NArg())}
	}
	bin, pat := fs.Arg(0), fs.Arg(1)
	p, err := pattern.CompileMember(pat, pattern.CommandLine)
	if err != nil {
		return usageError{Msg: err.Error()}
	}
	t, err := debugklasy.Open(bin)
	if err != nil {
		var ve *debugklasy.VersionError
		if errors.Is(err, debugklasy.ErrNoSection) || errors.As(err, &ve) {
			return err
		}
		return fmt.Errorf("reading accesses: %w", err)
	}
	hits := t.Query(p)
	if err := queryview.Accesses(s.Out, hits, *asJSON); err != nil {
		return err
	}
	if err := s.flush(); err != nil {
		return err // no summary of output that was lost
	}
	if len(hits) == 0 {
		fmt.Fprintf(s.Err, "klasy accesses: no access matches %s in %s (%d accesses in %d compilation units)\n", pat, bin, len(t.Accesses), t.Units)
		return exitError{Code: 1}
	}
	fmt.Fprintf(s.Err, "klasy accesses: %d of %d accesses match %s\n", len(hits), len(t.Accesses), pat)
	return nil
}
