package main

import (
	"errors"
	"fmt"

	"github.com/klasy/klasy/accessinfer"
	"github.com/klasy/klasy/cmd/klasy/internal/queryview"
	"github.com/klasy/klasy/debugklasy"
	"github.com/klasy/klasy/dwarfmap"
	"github.com/klasy/klasy/pattern"
	"github.com/klasy/klasy/weaver/resolve/accessjp"
)

func init() {
	register(&command{
		Name:    "accesses",
		Summary: "list the struct member accesses a pattern selects (from .debug_klasy, or inferred from DWARF and code)",
		Help:    helpText("accesses"),
		Run:     runAccesses,
	})
}

func runAccesses(s *stdio, args []string) error {
	fs := newFlagSet("accesses")
	asJSON := fs.Bool("json", false, "")
	labName := fs.String("lab", "", "")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *labName == "" && fs.NArg() != 2 {
		return usageError{Msg: fmt.Sprintf("want BINARY and 'STRUCT.MEMBER', got %d arguments (or name the lab whose vmlinux is BINARY: --lab NAME)", fs.NArg())}
	}
	pos, err := imageArgs(*labName, fs.Args(), 2)
	if err != nil {
		return err
	}
	bin, pat := pos[0], pos[1]
	p, err := pattern.CompileMember(pat, pattern.CommandLine)
	if err != nil {
		return usageError{Msg: err.Error()}
	}
	t, err := debugklasy.Open(bin)
	if errors.Is(err, debugklasy.ErrNoSection) {
		return inferredAccesses(s, bin, pat, p, *asJSON)
	}
	if err != nil {
		var ve *debugklasy.VersionError
		if errors.As(err, &ve) {
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

// inferredAccesses lists the accesses of an image built without the
// plugin (a vmlinux or a module) as accessinfer works them out: an
// instruction each, at its line (klasy weave hooks the same); a module's
// at their section and offset.
func inferredAccesses(s *stdio, bin, pat string, p *pattern.Member, asJSON bool) error {
	x, _, err := dwarfmap.Load(bin, dwarfmap.Options{})
	if err != nil {
		return err
	}
	defer x.Close()
	accs, total, err := accessinfer.Select(x.Image(), p.Match, func(format string, args ...any) {
		fmt.Fprintf(s.Err, "klasy accesses: "+format+"\n", args...)
	})
	if err != nil {
		return fmt.Errorf("inferring accesses: %w", err)
	}
	var rows []queryview.InferredAccess
	for _, a := range accs {
		file, line := accessjp.InferredLine(x, &a)
		row := queryview.InferredAccess{Access: a, File: file, Line: line}
		if x.Image().Rel {
			if sec, off, ok := x.Image().SectionAt(a.PC); ok {
				row.Where = fmt.Sprintf("%s+%#x", sec, off)
			}
		}
		rows = append(rows, row)
	}
	if err := queryview.InferredAccesses(s.Out, rows, asJSON); err != nil {
		return err
	}
	if err := s.flush(); err != nil {
		return err
	}
	if len(rows) == 0 {
		fmt.Fprintf(s.Err, "klasy accesses: no access matches %s in %s (no .debug_klasy: %d accesses inferred from its DWARF and code)\n", pat, bin, total)
		return exitError{Code: 1}
	}
	fmt.Fprintf(s.Err, "klasy accesses: %d of %d accesses match %s (no .debug_klasy: inferred from DWARF and the code, instruction by instruction)\n", len(rows), total, pat)
	return nil
}
