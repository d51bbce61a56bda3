package main

import (
	"github.com/klasy/klasy/aspect"
	"github.com/klasy/klasy/xflow"
)

var translateHelp = helpText("translate")

func init() {
	register(&command{
		Name:    "translate",
		Summary: "print an aspect with its xflow definitions turned into plain advice",
		Help:    translateHelp,
		Run:     runTranslate,
	})
}

func runTranslate(s *stdio, args []string) error {
	fs := newFlagSet("translate")
	ps := declareParams(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	files := fs.Args()
	if len(files) != 1 {
		return usageError{Msg: "give exactly one aspect file"}
	}
	name, src, err := readAspect(s, files[0])
	if err != nil {
		return err
	}
	if src, err = expandAspect(s, name, src, ps); err != nil {
		return weaveError(s, err)
	}
	f, diags := aspect.Load(name, src)
	if len(diags) > 0 {
		printDiagnostics(s, diags, false)
		return exitError{Code: 1}
	}
	out, err := xflow.Translate(f)
	if err != nil {
		return err
	}
	return aspect.Format(s.Out, out)
}
