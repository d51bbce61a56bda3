package multi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/klasy/klasy/aspect"
	"github.com/klasy/klasy/domains"
	"github.com/klasy/klasy/internal/human"
	"github.com/klasy/klasy/weaver"
	"github.com/klasy/klasy/weaver/gen"
	"github.com/klasy/klasy/weaver/records"
	"github.com/klasy/klasy/weaver/resolve"
	"github.com/klasy/klasy/weaver/target"
)

// DomainSession is a session on one domain of a domains file.
type DomainSession struct {
	*weaver.Session
	// Domain is the domain's entry in the file.
	Domain *domains.Domain
}

// Name is the domain's name.
func (d *DomainSession) Name() string { return d.Domain.Name }

// Label names the domain and its kernel for messages: "domain a (lab x)".
func (d *DomainSession) Label() string { return "domain " + d.Domain.Name + " (" + d.T.Name() + ")" }

// DomainsOptions say how OpenDomains opens its sessions.
type DomainsOptions struct {
	// Log receives progress and warnings; nil discards.
	Log io.Writer
	// SkipIndex opens each domain without reading its image, as
	// SessionOptions.SkipIndex (status, unweave, trace).
	SkipIndex bool
}

// OpenDomainsFile loads the domains file at path and opens a session on
// every domain of it (OpenDomains). The caller closes the sessions with
// CloseDomains.
//
// klasy trace --domains opens its sessions with it (SkipIndex), one per
// domain, each a Session whose TakeSaved and Drain read that domain's
// records; DomainSession.Name labels them.
func OpenDomainsFile(ctx context.Context, path string, opt DomainsOptions) (*domains.File, []*DomainSession, error) {
	f, err := domains.Load(path)
	if err != nil {
		return nil, nil, err
	}
	ss, err := OpenDomains(ctx, f, opt)
	if err != nil {
		return nil, nil, err
	}
	return f, ss, nil
}

// OpenDomains opens a session on every domain of f, in the file's order:
// a domain with lab: through the lab's agent channel (its image and
// headers the lab's unless the file gives them), one with address:
// through its agent over mutual TLS with f's keys (its vmlinux and
// headers from the file). Each session's Domain is set, so that Plan
// resolves only the advice that goes to it. A domain that cannot be
// reached, or whose image is not its running kernel's build, fails the
// whole with an error that names it; nothing stays open then.
func OpenDomains(ctx context.Context, f *domains.File, opt DomainsOptions) ([]*DomainSession, error) {
	var out []*DomainSession
	for i := range f.Domains {
		d := &f.Domains[i]
		s, err := openDomain(ctx, f, d, opt)
		if err != nil {
			CloseDomains(out)
			return nil, &DomainError{Domain: d.Name, Err: err}
		}
		s.Domain = d.Name
		s.FlowDomain, s.FlowDomains = i, len(f.Domains)
		out = append(out, &DomainSession{Session: s, Domain: d})
	}
	return out, nil
}

func openDomain(ctx context.Context, f *domains.File, d *domains.Domain, opt DomainsOptions) (*weaver.Session, error) {
	sopt := weaver.SessionOptions{TargetOptions: target.TargetOptions{Lab: d.Lab, Vmlinux: d.Vmlinux, Headers: d.Headers, Modules: d.Modules},
		Log: opt.Log, SkipIndex: opt.SkipIndex}
	if d.Lab != "" {
		return weaver.OpenSession(ctx, sopt)
	}
	if err := f.NeedKernel(d); err != nil {
		return nil, err
	}
	dctx, cancel := context.WithTimeout(ctx, target.AgentTimeout)
	defer cancel()
	c, err := f.Dial(dctx, d.Name)
	if err != nil {
		return nil, fmt.Errorf("its agent at %s: %w", d.Address, err)
	}
	t := target.NewAgentTarget("domain "+d.Name+" at "+d.Address, c, d.Vmlinux, d.Headers, c.Close)
	return weaver.OpenSessionOn(ctx, t, sopt)
}

// CloseDomains closes the sessions OpenDomains opened.
func CloseDomains(ss []*DomainSession) {
	for _, s := range ss {
		s.Close()
	}
}

// DomainError is a failure in one domain of a domains file.
type DomainError struct {
	Domain string
	Err    error
}

func (e *DomainError) Error() string { return "domain " + e.Domain + ": " + e.Err.Error() }
func (e *DomainError) Unwrap() error { return e.Err }

// inDomain names the domain in err; an aspect's diagnostics stay
// diagnostics at their FILE:LINE:COL, each saying the domain.
func inDomain(dom string, err error) error {
	var de *resolve.DiagnosticsError
	if errors.As(err, &de) {
		diags := make(aspect.Diagnostics, len(de.Diags))
		for i, d := range de.Diags {
			d.Msg = "in domain " + dom + ": " + d.Msg
			diags[i] = d
		}
		return &resolve.DiagnosticsError{Diags: diags}
	}
	return &DomainError{Domain: dom, Err: err}
}

// DomainReport is what a weave did in one domain.
type DomainReport struct {
	Domain string
	// Report is nil when no advice of the aspect goes to the domain.
	*weaver.Report
}

// WeaveDomains weaves the aspect f (weaver.LoadAspect's) into every domain of ss, each
// domain getting only the advice its @domain qualifiers allow
// (AdviceDomains). It resolves, generates and builds for every domain
// before it loads into any; then it loads domain by domain, and a
// failure in one (the kernel refusing a hook, an agent gone) unweaves
// the aspect from every domain it was loaded into: all or nothing, as a
// weave into one kernel. Errors name the domain. The reports are in the
// order of ss.
func WeaveDomains(ctx context.Context, ss []*DomainSession, f *aspect.File) ([]DomainReport, error) {
	path := f.Name
	names := make([]string, len(ss))
	for i, s := range ss {
		names[i] = s.Name()
	}
	per, diags := aspect.AdviceDomains(f, names)
	if len(diags) > 0 {
		return nil, &resolve.DiagnosticsError{Diags: diags}
	}
	reps := make([]DomainReport, len(ss))
	var prepared []*weaver.Prepared
	var preparedIn []*DomainSession
	for i, s := range ss {
		reps[i].Domain = s.Name()
		if !Receives(per, s.Name()) {
			continue
		}
		pf, rep, err := weaver.Plan(s.Session, f)
		if err != nil {
			return nil, inDomain(s.Name(), err)
		}
		rep.Target = s.Label()
		reps[i].Report = rep
		p, err := weaver.Prepare(ctx, s.Session, pf, rep)
		if err != nil {
			return reps, inDomain(s.Name(), err)
		}
		prepared = append(prepared, p)
		preparedIn = append(preparedIn, s)
	}
	for i, p := range prepared {
		if err := p.Load(ctx); err != nil {
			err = inDomain(preparedIn[i].Name(), err)
			if i == 0 {
				return reps, err
			}
			return reps, rollback(ctx, preparedIn[:i], gen.AspectName(path), err)
		}
	}
	return reps, nil
}

// Receives says whether some advice goes to domain dom, per being
// AdviceDomains's answer.
func Receives(per [][]string, dom string) bool {
	for _, ds := range per {
		for _, d := range ds {
			if d == dom {
				return true
			}
		}
	}
	return false
}

// rollbackTimeout bounds the unweaves of a rollback, which run even when
// the weave was cancelled.
const rollbackTimeout = time.Minute

// rollback unweaves aspect from the domains it was woven into, after
// cause failed the weave elsewhere.
func rollback(ctx context.Context, woven []*DomainSession, aspectName string, cause error) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
	defer cancel()
	var done, failed []string
	for _, s := range woven {
		if _, err := weaver.Unweave(rctx, s.Session, []string{aspectName}, false); err != nil {
			failed = append(failed, fmt.Sprintf("domain %s: %v", s.Name(), err))
			continue
		}
		done = append(done, s.Name())
	}
	msg := ""
	if len(done) > 0 {
		msg = "; rolled back from " + human.Noun(len(done), "domain") + " " + strings.Join(done, ", ")
	}
	if len(failed) > 0 {
		msg += "; rolling back failed in " + strings.Join(failed, "; ")
	}
	return fmt.Errorf("%w%s", cause, msg)
}

// UnweaveDomains unweaves the aspects named (all: every aspect, and the
// runtime) from every domain of ss where they are woven. An aspect
// woven into no domain is an error; the reports are in the order of ss,
// nil for a domain that had none of them.
func UnweaveDomains(ctx context.Context, ss []*DomainSession, names []string, all bool) ([]*weaver.UnweaveReport, error) {
	reps := make([]*weaver.UnweaveReport, len(ss))
	found := map[string]bool{}
	var errs []error
	for i, s := range ss {
		mods, err := s.T.Modules(ctx)
		if err != nil {
			errs = append(errs, &DomainError{s.Name(), fmt.Errorf("listing its modules: %w", err)})
			continue
		}
		loaded := map[string]bool{}
		for _, m := range mods {
			loaded[m.Name] = true
		}
		var here []string
		for _, n := range names {
			if loaded[gen.ModuleName(gen.AspectName(n))] {
				here = append(here, n)
				found[gen.AspectName(n)] = true
			}
		}
		if !all && len(here) == 0 {
			continue
		}
		rep, err := weaver.Unweave(ctx, s.Session, here, all)
		reps[i] = rep
		if err != nil {
			errs = append(errs, &DomainError{s.Name(), err})
		}
	}
	for _, n := range names {
		if !found[gen.AspectName(n)] && len(errs) == 0 {
			errs = append(errs, fmt.Errorf("aspect %s is not woven into any domain (klasy status --domains lists what is)", gen.AspectName(n)))
		}
	}
	return reps, errors.Join(errs...)
}

// DomainStatus is the runtime's status in one domain (nil Status: no
// runtime there).
type DomainStatus struct {
	Domain string
	Target string // Label's
	Status *records.Status
}

// StatusDomains reads the runtime's status in every domain of ss, as klasy
// status shows it (StatusShown).
func StatusDomains(ctx context.Context, ss []*DomainSession) ([]DomainStatus, error) {
	out := make([]DomainStatus, len(ss))
	for i, s := range ss {
		st, err := s.StatusShown(ctx)
		if err != nil {
			return nil, &DomainError{s.Name(), err}
		}
		out[i] = DomainStatus{Domain: s.Name(), Target: s.Label(), Status: st}
	}
	return out, nil
}
