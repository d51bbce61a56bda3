package main

import (
	"context"

	"github.com/klasy/klasy/domains"
	"github.com/klasy/klasy/internal/interrupt"
	"github.com/klasy/klasy/weaver"
	"github.com/klasy/klasy/weaver/multi"
	"github.com/klasy/klasy/weaver/target"
)

// The weaver's commands act on one kernel (--lab NAME, or this
// machine's with --vmlinux and --headers, --module for its modules), or
// with --domains FILE on every domain (kernel) of a domains file
// (package domains, dissertation §5.4.2). Each declares its target's
// flags with targetFlags and opens its sessions with openTargets: the
// one path from the flags to a session, or to a session per domain.

// targetFlags are a weaver command's target.
type targetFlags struct {
	target.TargetOptions
	domains string // --domains FILE: every domain of a domains file
}

// declare declares --lab, --vmlinux and --headers, and as the command
// takes them --module and --domains.
func (t *targetFlags) declare(fs *flagSet, modules, domains bool) {
	fs.StringVar(&t.Lab, "lab", "", "")
	fs.StringVar(&t.Vmlinux, "vmlinux", "", "")
	fs.StringVar(&t.Headers, "headers", "", "")
	if modules {
		fs.Var((*stringList)(&t.Modules), "module", "")
	}
	if domains {
		fs.StringVar(&t.domains, "domains", "", "")
	}
}

// needNoTarget refuses the one-kernel options beside --domains.
func (t *targetFlags) needNoTarget() error {
	if t.Lab != "" || t.Vmlinux != "" || t.Headers != "" || len(t.Modules) > 0 {
		return usageError{Msg: "--domains FILE names each domain's kernel: give no --lab, --vmlinux, --headers or --module"}
	}
	return nil
}

// targets are the sessions a weaver command acts on, under a context
// that Ctrl-C or SIGTERM cancels: one kernel's, or with --domains one
// per domain of the file, in the file's order.
type targets struct {
	ctx     context.Context
	cancel  context.CancelFunc
	one     *weaver.Session        // without --domains
	domains []*multi.DomainSession // with --domains
}

// openTargets opens t's target. index reads each kernel's image, as
// what weaves needs; without it only the runtime is reached (unweave,
// status, stats, cover's counts). file is the domains file when the
// command loaded it already (to check the aspect against it first); else
// --domains is loaded here. The caller closes the targets.
func openTargets(s *stdio, t *targetFlags, index bool, file *domains.File) (*targets, error) {
	ctx, cancel := interrupt.Context()
	one, ds, err := openSessions(ctx, s, t, index, file)
	if err != nil {
		cancel()
		return nil, err
	}
	return &targets{ctx: ctx, cancel: cancel, one: one, domains: ds}, nil
}

// openSessions opens openTargets' sessions under ctx: one, or with
// --domains (or file) one per domain.
func openSessions(ctx context.Context, s *stdio, t *targetFlags, index bool, file *domains.File) (*weaver.Session, []*multi.DomainSession, error) {
	switch {
	case file != nil:
		ds, err := multi.OpenDomains(ctx, file, multi.DomainsOptions{Log: s.Err, SkipIndex: !index})
		return nil, ds, err
	case t.domains != "":
		_, ds, err := multi.OpenDomainsFile(ctx, t.domains, multi.DomainsOptions{Log: s.Err, SkipIndex: !index})
		return nil, ds, err
	}
	one, err := weaver.OpenSession(ctx, weaver.SessionOptions{TargetOptions: t.TargetOptions, Log: s.Err, SkipIndex: !index})
	return one, nil, err
}

// Close closes the sessions, then releases the signals.
func (ts *targets) Close() {
	if ts.one != nil {
		ts.one.Close()
	}
	multi.CloseDomains(ts.domains)
	ts.cancel()
}
