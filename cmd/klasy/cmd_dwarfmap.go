package main

// klasy lines / vars / struct / funcs: source-level queries against a
// kernel image's debug info, answered from dwarfmap's build-id keyed
// index (built on first use, then loaded in milliseconds).
//
// Each command arms its goroutine (mmapfile.Catch): an image or index
// file truncated while it is read ends in "FILE changed while it was
// read", not in a crash.

import (
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/klasy/klasy/cmd/klasy/internal/queryview"
	"github.com/klasy/klasy/dwarfmap"
	"github.com/klasy/klasy/dwarfmap/elfimage"
	"github.com/klasy/klasy/internal/mmapfile"
	"github.com/klasy/klasy/lab"
	"github.com/klasy/klasy/pattern"
)

var imageHelp = helpText("image")

func init() {
	register(&command{
		Name:    "lines",
		Summary: "list source lines with code and their addresses (like perf probe -L)",
		Help:    helpText("lines") + imageHelp,
		Run:     runLines,
	})
	register(&command{
		Name:    "vars",
		Summary: "list variables visible at a line or address and where they live (like perf probe -V)",
		Help:    helpText("vars") + imageHelp,
		Run:     runVars,
	})
	register(&command{
		Name:    "struct",
		Summary: "print a struct or union layout with member offsets and sizes",
		Help:    helpText("struct") + imageHelp,
		Run:     runStruct,
	})
	register(&command{
		Name:    "funcs",
		Summary: "list functions matching a pattern (% or * wildcards)",
		Help:    helpText("funcs") + imageHelp,
		Run:     runFuncs,
	})
}

// queryFlags are the options every dwarfmap command takes.
type queryFlags struct {
	json, rebuild, noCache bool
	inlined                bool
	vmlinux                string
	lab                    string // --lab NAME: the lab's vmlinux is the IMAGE
}

// parseQuery parses a dwarfmap command's flags and its npos positional
// arguments.
func parseQuery(name string, args []string, npos int) (*queryFlags, []string, error) {
	q := &queryFlags{}
	fs := newFlagSet(name)
	if name == "funcs" || name == "lines" {
		fs.BoolVar(&q.inlined, "inlined", false, "")
	}
	fs.BoolVar(&q.json, "json", false, "")
	fs.BoolVar(&q.rebuild, "rebuild", false, "")
	fs.BoolVar(&q.noCache, "no-cache", false, "")
	fs.StringVar(&q.vmlinux, "vmlinux", "", "")
	fs.StringVar(&q.lab, "lab", "", "")
	if err := fs.Parse(args); err != nil {
		return nil, nil, err
	}
	pos, err := imageArgs(q.lab, fs.Args(), npos)
	return q, pos, err
}

// imageArgs are a source-level query's npos arguments, IMAGE first: as
// given, or with --lab NAME the lab's vmlinux (from its record: the lab
// need not answer) and the rest.
func imageArgs(labName string, args []string, npos int) ([]string, error) {
	switch {
	case labName != "" && len(args) == npos:
		return nil, usageError{Msg: fmt.Sprintf("--lab %s names the image, and so does %s: give IMAGE or --lab NAME, not both", labName, args[0])}
	case labName != "" && len(args) != npos-1:
		return nil, usageError{Msg: fmt.Sprintf("want %d arguments besides --lab NAME, got %d", npos-1, len(args))}
	case labName == "" && len(args) == npos-1:
		return nil, usageError{Msg: fmt.Sprintf("want %d arguments, got %d: name the image, as IMAGE or with --lab NAME", npos, len(args))}
	case labName == "" && len(args) != npos:
		return nil, usageError{Msg: fmt.Sprintf("want %d arguments, got %d", npos, len(args))}
	case labName == "":
		return args, nil
	}
	k, err := lab.KernelOf(labName)
	if err != nil {
		return nil, err
	}
	return append([]string{k.Vmlinux}, args...), nil
}

// openIndex loads the index of image, printing progress of a build to
// s.Err.
func openIndex(s *stdio, q *queryFlags, image string) (*dwarfmap.Index, error) {
	if q.vmlinux != "" {
		mod, err := elfimage.Open(image)
		if err != nil {
			return nil, err
		}
		defer mod.Close()
		vm, err := elfimage.Open(q.vmlinux)
		if err != nil && !errors.Is(err, elfimage.ErrNoDebugInfo) {
			return nil, err
		}
		if vm != nil {
			defer vm.Close()
			if err := elfimage.CheckModuleMatches(mod, vm); err != nil {
				return nil, err
			}
		}
	}
	x, info, err := dwarfmap.Load(image, dwarfmap.Options{
		NoCache: q.noCache,
		Rebuild: q.rebuild,
		Log:     func(f string, a ...any) { fmt.Fprintf(s.Err, "klasy: "+f+"\n", a...) },
	})
	if err != nil {
		return nil, err
	}
	if !info.FromCache {
		st := x.Stats()
		fmt.Fprintf(s.Err, "klasy: indexed %s in %.1fs: %d units, %d line rows, %d functions, %d inlined copies, %d structs\n",
			image, info.Built.Seconds(), st.Units, st.Rows, st.Funcs, st.Inlines, st.Structs)
	}
	return x, nil
}

func runLines(s *stdio, args []string) (err error) {
	defer mmapfile.Catch(&err, debug.SetPanicOnFault(true))
	q, pos, err := parseQuery("lines", args, 2)
	if err != nil {
		return err
	}
	sp, err := dwarfmap.ParseLineSpec(pos[1])
	if err != nil {
		return usageError{Msg: err.Error()}
	}
	if q.inlined && sp.Func == "" {
		return usageError{Msg: "--inlined applies to the lines of a function, not of a file"}
	}
	sp.Inlined = q.inlined
	x, err := openIndex(s, q, pos[0])
	if err != nil {
		return err
	}
	defer x.Close()
	lines, err := x.Lines(sp)
	if err != nil {
		return err
	}
	return queryview.Lines(s.Out, lines, q.json)
}

func runVars(s *stdio, args []string) (err error) {
	defer mmapfile.Catch(&err, debug.SetPanicOnFault(true))
	q, pos, err := parseQuery("vars", args, 2)
	if err != nil {
		return err
	}
	spec := pos[1]
	x, err := openIndex(s, q, pos[0])
	if err != nil {
		return err
	}
	defer x.Close()
	var vars []dwarfmap.Var
	if i := strings.LastIndexByte(spec, ':'); i > 0 && !strings.HasPrefix(spec, "0x") {
		sp, err := dwarfmap.ParseLineSpec(spec)
		if err != nil || sp.Func == "" || sp.Line == 0 {
			return usageError{Msg: fmt.Sprintf("%q is not FUNC:LINE or an address", spec)}
		}
		vars, err = x.VarsAtLine(sp.Func, sp.Line)
		if err != nil {
			return err
		}
	} else {
		addr, err := x.ParseAddr(spec)
		if err != nil {
			return err
		}
		if vars, err = x.VarsAt(addr); err != nil {
			return err
		}
	}
	return queryview.Vars(s.Out, x, vars, q.json)
}

func runStruct(s *stdio, args []string) (err error) {
	defer mmapfile.Catch(&err, debug.SetPanicOnFault(true))
	q, pos, err := parseQuery("struct", args, 2)
	if err != nil {
		return err
	}
	x, err := openIndex(s, q, pos[0])
	if err != nil {
		return err
	}
	defer x.Close()
	l, err := x.Struct(pos[1])
	if err != nil {
		return err
	}
	if q.json {
		return json.NewEncoder(s.Out).Encode(l)
	}
	l.Print(s.Out)
	return nil
}

// openPatternQuery parses a query command's IMAGE PATTERN arguments and
// opens the image's index: funcs and tracepoints take the same two.
func openPatternQuery(s *stdio, cmd string, args []string) (*queryFlags, *pattern.Pattern, *dwarfmap.Index, error) {
	q, pos, err := parseQuery(cmd, args, 2)
	if err != nil {
		return q, nil, nil, err
	}
	p, err := pattern.Compile(pos[1], pattern.CommandLine)
	if err != nil {
		return q, nil, nil, usageError{Msg: err.Error()}
	}
	x, err := openIndex(s, q, pos[0])
	return q, p, x, err
}

func runFuncs(s *stdio, args []string) (err error) {
	defer mmapfile.Catch(&err, debug.SetPanicOnFault(true))
	q, p, x, err := openPatternQuery(s, "funcs", args)
	if err != nil {
		return err
	}
	defer x.Close()
	fs := x.MatchFuncs(p)
	if err := x.Err(); err != nil {
		return err
	}
	if len(fs) == 0 {
		return fmt.Errorf("no function matches %q", p.String())
	}
	if q.inlined {
		return queryview.Inlines(s.Out, x, fs, p.String(), q.json)
	}
	return queryview.Funcs(s.Out, fs, q.json)
}
