package main

import (
	"fmt"
	"time"

	"github.com/klasy/klasy/cmd/klasy/internal/jpview"
	"github.com/klasy/klasy/weaver"
	"github.com/klasy/klasy/weaver/gen"
	"github.com/klasy/klasy/weaver/multi"
	"github.com/klasy/klasy/weaver/runtime"
)

func init() {
	register(&command{
		Name:    "weave",
		Summary: "weave an aspect into a running kernel (hooks go live)",
		Help:    helpText("weave") + targetHelp + domainsHelp,
		Run:     runWeave,
	})
}

func runWeave(s *stdio, args []string) error {
	var t targetFlags
	var asJSON, verbose bool
	var bufferKB, maxJP, maxC int
	var maxBuild time.Duration
	var tf taskFlags
	fs := newFlagSet("weave")
	t.declare(fs, true, true)
	tf.declare(fs)
	fs.BoolVar(&asJSON, "json", false, "")
	fs.BoolVar(&verbose, "v", false, "")
	fs.IntVar(&bufferKB, "buffer-kb", 0, "")
	fs.IntVar(&maxJP, "max-join-points", 0, "")
	fs.IntVar(&maxC, "max-c-mb", 0, "")
	fs.DurationVar(&maxBuild, "max-build-time", 0, "")
	ps := declareParams(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.Given("max-join-points") && maxJP < 1 || fs.Given("max-c-mb") && maxC < 1 {
		return usageError{Msg: "--max-join-points and --max-c-mb take a number of at least 1"}
	}
	if fs.Given("max-build-time") && maxBuild <= 0 {
		return usageError{Msg: "--max-build-time takes a positive duration (20m)"}
	}
	if fs.NArg() != 1 {
		return usageError{Msg: fmt.Sprintf("want one aspect FILE, got %d arguments", fs.NArg())}
	}
	// 0 is the runtime's default when the flag is not given, and out of
	// range when it is.
	if fs.Given("buffer-kb") && (bufferKB < runtime.BufferKBMin || bufferKB > runtime.BufferKBMax) {
		return usageError{Msg: fmt.Sprintf("--buffer-kb %d: want %d..%d KiB per CPU", bufferKB, runtime.BufferKBMin, runtime.BufferKBMax)}
	}
	tasks, err := tf.filter(fs)
	if err != nil {
		return err
	}
	path := fs.Arg(0)
	src, err := aspectFile(s, path, ps)
	if err != nil {
		return err
	}
	// A bad aspect, or one naming a domain the file lacks, fails here,
	// before any kernel is looked at.
	var reps []multi.DomainReport
	if t.domains != "" {
		if err := t.needNoTarget(); err != nil {
			return err
		}
		file, af, _, err := checkDomainsAspect(s, t.domains, path, src)
		if err != nil {
			return err
		}
		ts, err := openTargets(s, &t, true, file)
		if err != nil {
			return err
		}
		defer ts.Close()
		for _, d := range ts.domains {
			d.BufferKB, d.MaxJoinPoints, d.MaxCMiB, d.MaxBuild, d.Tasks = bufferKB, maxJP, maxC, maxBuild, tasks
		}
		reps, err = multi.WeaveDomains(ts.ctx, ts.domains, af)
		if werr := weaveReported(s, reps, err); werr != nil {
			return werr
		}
	} else {
		af, err := checkAspect(s, path, src)
		if err != nil {
			return err
		}
		ts, err := openTargets(s, &t, true, nil)
		if err != nil {
			return err
		}
		defer ts.Close()
		ts.one.BufferKB, ts.one.MaxJoinPoints, ts.one.MaxCMiB, ts.one.MaxBuild, ts.one.Tasks = bufferKB, maxJP, maxC, maxBuild, tasks
		rep, err := weaver.Weave(ts.ctx, ts.one, af)
		reps = []multi.DomainReport{{Report: rep}}
		if werr := weaveReported(s, reps, err); werr != nil {
			return werr
		}
	}
	for _, r := range reps {
		switch {
		case r.Report == nil && !asJSON:
			fmt.Fprintf(s.Out, "%s: no advice goes to domain %s\n", gen.AspectName(path), r.Domain)
		case r.Report == nil:
		case asJSON:
			if err := jpview.JSON(s.Out, r.Domain, r.Report); err != nil {
				return err
			}
		default:
			jpview.Woven(s.Out, r.Report, verbose)
		}
	}
	return nil
}

// weaveReported warns of what the weave of each report noticed and
// skipped, and returns the weave's error, its diagnostics printed. A
// weave that fails for want of join points says why in its error,
// without the warnings.
func weaveReported(s *stdio, reps []multi.DomainReport, err error) error {
	for _, r := range reps {
		if r.Report != nil {
			if err == nil {
				jpview.Warnings(s.Err, r.Report)
			}
			jpview.Skipped(s.Err, r.Report)
		}
	}
	if err != nil {
		return weaveError(s, err)
	}
	return nil
}
