package main

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/klasy/klasy/aspect"
	"github.com/klasy/klasy/internal/boundedread"
	"github.com/klasy/klasy/weaver/resolve"
)

var checkHelp = helpText("check")

func init() {
	register(&command{
		Name:    "check",
		Summary: "check aspect files for errors (FILE:LINE:COL: message)",
		Help:    checkHelp,
		Run:     runCheck,
	})
}

func runCheck(s *stdio, args []string) error {
	fs := newFlagSet("check")
	jsonOut := fs.Bool("json", false, "")
	ps := declareParams(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	files := fs.Args()
	if len(files) == 0 {
		return usageError{Msg: "no aspect file given"}
	}
	failed := false
	for _, arg := range files {
		name, src, err := readAspect(s, arg)
		if err != nil {
			// Like gcc with several files: say so and check the rest.
			fmt.Fprintf(s.Err, "klasy: %v\n", err)
			failed = true
			continue
		}
		s.params = nil // each file's own
		src, err = expandAspect(s, name, src, ps)
		var diags aspect.Diagnostics
		if err == nil {
			_, diags = aspect.Load(name, src)
		} else {
			diags = err.(*resolve.DiagnosticsError).Diags
		}
		if len(diags) > 0 {
			failed = true
		}
		printDiagnostics(s, diags, *jsonOut)
	}
	if failed {
		return exitError{Code: 1}
	}
	return nil
}

// readAspect reads the aspect file arg, or standard input if arg is
// "-", and returns the name diagnostics give it. Either holds at most
// aspect.MaxFileSize bytes; devices and directories are refused.
func readAspect(s *stdio, arg string) (string, []byte, error) {
	if arg == "-" {
		src, err := boundedread.Reader("<stdin>", s.In, aspect.MaxFileSize, "an aspect")
		if err != nil {
			var tl *boundedread.TooLargeError
			if errors.As(err, &tl) {
				return "<stdin>", nil, fmt.Errorf("reading aspect: %w", err)
			}
			return "<stdin>", nil, fmt.Errorf("reading aspect from standard input: %w", err)
		}
		return "<stdin>", src, nil
	}
	src, err := boundedread.File(arg, aspect.MaxFileSize, "an aspect")
	if err != nil {
		return arg, nil, fmt.Errorf("reading aspect: %w", err)
	}
	return arg, src, nil
}

// printDiagnostics writes diagnostics to stderr as text, or to stdout
// as JSON lines for scripts.
func printDiagnostics(s *stdio, diags aspect.Diagnostics, jsonOut bool) {
	for _, d := range s.params.Fix(diags) {
		if !jsonOut {
			fmt.Fprintln(s.Err, d)
			continue
		}
		b, _ := json.Marshal(struct {
			File    string `json:"file"`
			Line    int    `json:"line"`
			Col     int    `json:"col"`
			Message string `json:"message"`
		}{d.Pos.Filename, d.Pos.Line, d.Pos.Col, d.Msg})
		fmt.Fprintf(s.Out, "%s\n", b)
	}
}
