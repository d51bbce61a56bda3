package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/klasy/klasy/cmd/klasy/internal/coverview"
	"github.com/klasy/klasy/cmd/klasy/internal/jpview"
	"github.com/klasy/klasy/internal/human"
	"github.com/klasy/klasy/weaver"
	"github.com/klasy/klasy/weaver/cover"
	"github.com/klasy/klasy/weaver/joinpoint"
	"github.com/klasy/klasy/weaver/records"
	"github.com/klasy/klasy/weaver/resolve"
)

func init() {
	register(&command{
		Name:    "cover",
		Summary: "live coverage of kernel functions: block counts, gcov-style lines, edge counts",
		Help:    helpText("cover") + targetHelp,
		Run:     runCover,
	})
}

// coverFlags are klasy cover's options.
type coverFlags struct {
	targetFlags
	json   bool
	dur    time.Duration
	source string
}

func runCover(s *stdio, args []string) error {
	var f coverFlags
	fs := newFlagSet("cover")
	f.declare(fs, true, false)
	fs.BoolVar(&f.json, "json", false, "")
	fs.DurationVar(&f.dur, "for", 0, "")
	fs.StringVar(&f.source, "source", "", "")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return usageError{Msg: "want a FUNC or FILE to cover"}
	}
	// What follows FUNC|FILE is the command (after --, so that its own
	// flags are its, as for klasy lab exec).
	argv := fs.Args()[1:]
	if len(argv) == 0 {
		argv = nil
	}
	if f.dur < 0 || (f.dur == 0 && fs.Given("for")) {
		return usageError{Msg: "--for takes a positive duration, e.g. 10s"}
	}
	if f.dur > 0 && argv != nil {
		return usageError{Msg: "give either --for DURATION or -- CMD, not both"}
	}
	spec, err := cover.ParseCoverSpec(fs.Arg(0))
	if err != nil {
		return usageError{Msg: err.Error()}
	}
	path, src := spec.Aspect()

	ts, err := openTargets(s, &f.targetFlags, true, nil)
	if err != nil {
		return err
	}
	defer ts.Close()
	ctx, sess := ts.ctx, ts.one
	parsed, err := weaver.LoadAspect(path, src)
	if err != nil {
		return coverError(fs.Arg(0), err)
	}
	af, rep, err := weaver.Plan(sess, parsed)
	if err != nil {
		return coverError(fs.Arg(0), err)
	}
	woven, nfuncs, reasons := coverPlan(rep)
	if woven == 0 {
		return fmt.Errorf("covering %s: none of its %d blocks can be hooked (%s)", fs.Arg(0), len(rep.JoinPoints), strings.Join(reasons, "; "))
	}
	fmt.Fprintf(s.Err, "klasy: cover: weaving %s on the basic blocks of %s into %s\n", human.Plural(woven, "hook"), human.Plural(nfuncs, "function"), sess.T.Name())
	if err := weaver.WeaveResolved(ctx, sess, af, rep); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("covering %s: interrupted while weaving; nothing stays woven", fs.Arg(0))
		}
		return weaveError(s, err)
	}
	// From here on the hooks are in: whatever happens, they go.
	unwoven := false
	unweave := func() error {
		if unwoven {
			return nil
		}
		unwoven = true
		uctx, ucancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer ucancel()
		_, err := weaver.Unweave(uctx, sess, []string{rep.Aspect}, false)
		return err
	}
	defer unweave()
	mech := jpview.Mechanisms(rep)
	t := rep.Times
	fmt.Fprintf(s.Err, "klasy: cover: woven: resolve %s, generate %s, build %s, load %s; %s (ftrace %d, jump %d, int3 %d) registered in %s (%s per hook)",
		human.Dur(t.Resolve), human.Dur(t.Generate), human.Dur(t.Build), human.Dur(t.Load), human.Plural(woven, "hook"), mech["ftrace-ops"]+mech["ftrace"], mech["jump"], mech["int3"],
		human.DurPrecise(t.Register), human.DurPrecise(t.Register/time.Duration(woven)))
	if n := len(rep.JoinPoints) - woven; n > 0 {
		fmt.Fprintf(s.Err, "; %d blocks not hooked (%s)", n, strings.Join(reasons, "; "))
	}
	fmt.Fprintln(s.Err)

	start := time.Now()
	exit := 0
	var runErr error
	switch {
	case argv != nil:
		fmt.Fprintf(s.Err, "klasy: cover: running %s in %s\n", strings.Join(argv, " "), sess.T.Name())
		exit, runErr = sess.Exec(ctx, argv, s.Err, s.Err)
	case f.dur > 0:
		select {
		case <-ctx.Done():
		case <-time.After(f.dur):
		}
	default:
		fmt.Fprintf(s.Err, "klasy: cover: counting until Ctrl-C\n")
		<-ctx.Done()
	}
	elapsed := time.Since(start)
	interrupted := ctx.Err() != nil

	rctx, rcancel := context.WithTimeout(context.Background(), time.Minute)
	defer rcancel()
	st, err := sess.Status(rctx)
	if err == nil && st == nil {
		err = fmt.Errorf("the klasy runtime left %s while counting", sess.T.Name())
	}
	var asp *records.Aspect
	if err == nil {
		for i := range st.Aspects {
			if st.Aspects[i].Module == rep.Module {
				asp = &st.Aspects[i]
			}
		}
		if asp == nil {
			err = fmt.Errorf("aspect %s left %s while counting (unwoven by someone else?)", rep.Aspect, sess.T.Name())
		}
	}
	ustart := time.Now()
	if uerr := unweave(); uerr != nil {
		return fmt.Errorf("unweaving %s: %w", rep.Aspect, uerr)
	}
	if err != nil {
		return fmt.Errorf("reading the counts: %w", err)
	}
	fmt.Fprintf(s.Err, "klasy: cover: counted for %s; unwoven from %s in %s\n", human.DurPrecise(elapsed), sess.T.Name(), human.DurPrecise(time.Since(ustart)))
	if runErr != nil && !interrupted {
		return runErr
	}
	covs, err := cover.Functions(sess, rep.JoinPoints, asp)
	if err != nil {
		return err
	}
	cr := &coverview.Result{Target: sess.T.Name(), Spec: spec, Arg: fs.Arg(0), Funcs: covs, Hooks: woven,
		Skipped: len(rep.JoinPoints) - woven, Register: rep.Times.Register, Elapsed: elapsed, Argv: argv, Exit: exit}
	cr.Sources = coverview.FindSources(cr, f.source)
	if f.json {
		err = json.NewEncoder(s.Out).Encode(cr.JSON())
	} else {
		err = cr.Print(s.Out)
	}
	if err != nil {
		return err
	}
	switch {
	case interrupted:
		fmt.Fprintf(s.Err, "klasy: cover: interrupted: the counts are those until then\n")
		return exitError{Code: 130}
	case exit != 0:
		fmt.Fprintf(s.Err, "klasy: cover: %s exited with status %d\n", argv[0], exit)
		return exitError{Code: exit}
	}
	return nil
}

// coverError turns the diagnostics of the generated aspect into the
// message about what was asked for.
func coverError(what string, err error) error {
	var de *resolve.DiagnosticsError
	if errors.As(err, &de) && len(de.Diags) > 0 {
		var msgs []string
		for _, d := range de.Diags {
			msgs = append(msgs, d.Msg)
		}
		return fmt.Errorf("covering %s: %s", what, strings.Join(msgs, "; "))
	}
	return err
}

// coverPlan counts the hooks and functions of a cover and the reasons
// blocks are skipped for.
func coverPlan(rep *weaver.Report) (woven, funcs int, reasons []string) {
	fns := map[string]bool{}
	why := map[string]int{}
	for _, jp := range rep.JoinPoints {
		fns[jp.Module+" "+jp.Function] = true
		if jp.Skipped == "" {
			woven++
			continue
		}
		why[joinpoint.SkipClass(jp.Skipped)]++
	}
	for k, n := range why {
		reasons = append(reasons, fmt.Sprintf("%s %d", k, n))
	}
	slices.Sort(reasons)
	return woven, len(fns), reasons
}
