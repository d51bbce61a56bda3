package main

import (
	"context"
	"fmt"
	"time"

	"github.com/klasy/klasy/cmd/klasy/internal/perfetto"
	"github.com/klasy/klasy/cmd/klasy/internal/tracerun"
	"github.com/klasy/klasy/cmd/klasy/internal/traceview"
	"github.com/klasy/klasy/internal/interrupt"
	"github.com/klasy/klasy/otlpexport"
	"github.com/klasy/klasy/timeline"
	"github.com/klasy/klasy/weaver"
	"github.com/klasy/klasy/weaver/target"
)

func init() {
	register(&command{
		Name:    "trace",
		Summary: "print what woven advice recorded, symbolized",
		Help:    helpText("trace") + targetHelp,
		Run:     runTrace,
	})
}

// traceFlags are klasy trace's options.
type traceFlags struct {
	targetFlags
	json, follow, flow bool
	aspect, perfetto   string
	otlp               string
	views              traceview.Options
}

func runTrace(s *stdio, args []string) error {
	var f traceFlags
	fs := newFlagSet("trace")
	f.declare(fs, false, true)
	fs.BoolVar(&f.json, "json", false, "")
	fs.BoolVar(&f.follow, "follow", false, "")
	fs.StringVar(&f.aspect, "aspect", "", "")
	f.views.Declare(fs.FlagSet)
	fs.StringVar(&f.perfetto, "perfetto", "", "")
	fs.BoolVar(&f.flow, "flow", false, "")
	fs.StringVar(&f.otlp, "otlp", "", "")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if pos := fs.Args(); len(pos) != 0 {
		return usageError{Msg: fmt.Sprintf("takes no arguments, got %q", pos)}
	}
	// A reader of the output gone (trace --follow | head -1): writes fail
	// with EPIPE, and the records read are put back, instead of the
	// process dying of SIGPIPE with them.
	defer interrupt.CatchSIGPIPE()()
	// The --perfetto file is checked before any record is consumed to be
	// written there.
	checkOutput := func() error {
		if f.otlp != "" {
			if err := otlpexport.CheckURL(f.otlp); err != nil {
				return err
			}
		}
		if f.perfetto == "" {
			return nil
		}
		return perfetto.Check(f.perfetto)
	}
	if f.domains != "" {
		switch {
		case f.Lab != "" || f.Vmlinux != "" || f.Headers != "":
			return usageError{Msg: "--domains names the kernels: not with --lab, --vmlinux or --headers"}
		case f.follow:
			return usageError{Msg: "--follow is not supported with --domains: the timeline is merged once every domain is read"}
		case f.views.Set():
			return usageError{Msg: "--group-by, --hist and --lhist are not supported with --domains; --flow gives each flow's path"}
		}
		if err := checkOutput(); err != nil {
			return err
		}
		ctx, cancel := interrupt.Context()
		defer cancel()
		ds, err := openTraceDomains(ctx, s, f.domains)
		if err != nil {
			return err
		}
		defer func() {
			for _, d := range ds {
				d.Src.Close()
			}
		}()
		return tracerun.Domains(ctx, f.output(s), f.options(nil), ds)
	}
	if f.flow {
		return usageError{Msg: "--flow follows flows across kernels: give --domains FILE"}
	}
	view, err := f.views.View(s.Err)
	if err != nil {
		return usageError{Msg: err.Error()}
	}
	if err := checkOutput(); err != nil {
		return err
	}
	ctx, cancel := interrupt.Context()
	defer cancel()
	src, err := openTraceSource(ctx, s, f.TargetOptions)
	if err != nil {
		return err
	}
	defer src.Close()
	opt := f.options(view)
	opt.Clock = sessionClock(src)
	return tracerun.One(ctx, f.output(s), opt, src)
}

// sessionSource is a session on a kernel, as trace reads it.
type sessionSource struct{ *weaver.Session }

func (s sessionSource) Name() string { return s.T.Name() }

// openTraceSource opens klasy trace's target; a test gives its own
// records instead.
var openTraceSource = func(ctx context.Context, s *stdio, opt target.TargetOptions) (tracerun.Source, error) {
	sess, _, err := openSessions(ctx, s, &targetFlags{TargetOptions: opt}, false, nil)
	if err != nil {
		return nil, err
	}
	sess.WarnTroubles(ctx)
	return sessionSource{sess}, nil
}

// tracePoll is how often trace --follow reads the buffer (a test
// shortens it).
var tracePoll = 200 * time.Millisecond

// otlpRetry is how long trace --otlp retries a batch (a test shortens
// it); 0 is otlpexport's default.
var otlpRetry time.Duration

// sessionClock reads a session's target's clock.
func sessionClock(src tracerun.Source) func(context.Context) (int64, error) {
	return func(ctx context.Context) (int64, error) {
		if c, ok := src.(interface {
			Clock(context.Context) (int64, error)
		}); ok {
			return c.Clock(ctx)
		}
		if ss, ok := src.(sessionSource); ok {
			if c, ok := ss.T.(target.Clocked); ok {
				return c.Clock(ctx)
			}
		}
		return 0, fmt.Errorf("%s cannot report its clock", src.Name())
	}
}

// openTraceDomains opens a session on each domain of a domains file; a
// test gives its own.
var openTraceDomains = func(ctx context.Context, s *stdio, file string) ([]tracerun.Domain, error) {
	_, ss, err := openSessions(ctx, s, &targetFlags{domains: file}, false, nil)
	if err != nil {
		return nil, err
	}
	ds := make([]tracerun.Domain, len(ss))
	for i, d := range ss {
		d.WarnTroubles(ctx) // as trace on one kernel does, each after its domain
		src := sessionSource{d.Session}
		ds[i] = tracerun.Domain{Name: d.Name(), Src: src, Clock: sessionClock(src)}
	}
	return ds, nil
}

// clockSamples is how many clock exchanges each domain gets; hostClock
// is the host's clock (a test gives its own).
var (
	clockSamples = timeline.DefaultSamples
	hostClock    = timeline.HostNow
)

// output is where trace prints.
func (f *traceFlags) output(s *stdio) tracerun.Output {
	return tracerun.Output{Out: s.Out, Err: s.Err, Flush: s.flush}
}

// options are the flags as tracerun takes them.
func (f *traceFlags) options(view traceview.View) tracerun.Options {
	return tracerun.Options{JSON: f.json, Follow: f.follow, Flow: f.flow, Aspect: f.aspect, Perfetto: f.perfetto,
		OTLP: f.otlp, OTLPRetry: otlpRetry, View: view, Poll: tracePoll, ClockSamples: clockSamples, HostClock: hostClock}
}
