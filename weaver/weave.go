package weaver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing/fstest"
	"time"

	"github.com/klasy/klasy/aspect"
	"github.com/klasy/klasy/internal/atomicfile"
	"github.com/klasy/klasy/internal/cachedir"
	"github.com/klasy/klasy/kbuild"
	"github.com/klasy/klasy/kmod"
	"github.com/klasy/klasy/weaver/gen"
	"github.com/klasy/klasy/weaver/joinpoint"
	"github.com/klasy/klasy/weaver/records"
	"github.com/klasy/klasy/weaver/resolve"
	"github.com/klasy/klasy/weaver/runtime"
	"github.com/klasy/klasy/weaver/taskfilter"
	"github.com/klasy/klasy/xflow"
)

// Times splits a weave's time the way the report shows it.
type Times struct {
	Resolve, Generate, Build, Load, Register time.Duration
}

// Report is what a weave (or a list) did.
type Report struct {
	Aspect string
	Module string
	Target string
	// JoinPoints are all join points, woven and skipped, by advice and
	// address; Mechanism is filled for woven ones after a weave.
	JoinPoints []*joinpoint.JoinPoint
	Times      Times
	// LoadedRuntime is set when this weave loaded the runtime module.
	LoadedRuntime bool
	// Warnings are what resolving noticed (a pointcut of access(...)
	// that selects nothing).
	Warnings []joinpoint.Warning
	// Flows are the aspect's <xflow> names: the module declares, gets
	// and puts the runtime's table of each.
	Flows []string
	// FtraceOps: the runtime puts entry hooks at ftrace sites on the
	// aspect's ftrace_ops. OpsErr is the kernel's error when ftrace
	// refused that ops (its entry hooks are then kprobes), else 0.
	FtraceOps bool
	OpsErr    int
	// Fexit: the runtime puts after hooks at ftrace sites on a direct
	// trampoline. FexitErr is the kernel's error when ftrace refused
	// the aspect's direct ops (its after hooks are then kretprobes).
	Fexit    bool
	FexitErr int
}

// AfterKretprobesWhy says why after hooks of the aspect are kretprobes,
// not on the runtime's direct trampoline (klasy weave -v prints it), ""
// when none is.
func (r *Report) AfterKretprobesWhy() string {
	if r.FexitErr != 0 {
		return fmt.Sprintf("ftrace refused the direct ops: error %d (%v)", r.FexitErr, syscall.Errno(-r.FexitErr))
	}
	var why []string
	seen := map[string]bool{}
	for _, jp := range r.JoinPoints {
		if jp.Skipped != "" || jp.Kind != joinpoint.Kretprobe || jp.Mechanism != records.MechKretprobe || seen[jp.Function] {
			continue
		}
		seen[jp.Function] = true
		switch {
		case !r.Fexit:
			return "the runtime was loaded with fexit=0, or the kernel has no DYNAMIC_FTRACE_WITH_DIRECT_CALLS"
		case jp.Module != "":
			why = append(why, jp.Function+": in a module")
		case !jp.RegArgs:
			why = append(why, jp.Function+": not all its arguments are in registers (more than six, a struct or a float, or variadic)")
		default:
			why = append(why, jp.Function+": no ftrace site at its entry, a GCC clone, another after hook of the aspect there, a replacement, or entry values over 128 bytes")
		}
	}
	return strings.Join(why, "; ")
}

// EntryKprobesWhy says why the aspect's entry hooks are kprobes when
// they could have been on its ftrace_ops (klasy weave -v prints it), ""
// when none is.
func (r *Report) EntryKprobesWhy() string {
	if r.OpsErr != 0 {
		return fmt.Sprintf("ftrace refused the ftrace_ops: error %d (%v)", r.OpsErr, syscall.Errno(-r.OpsErr))
	}
	entry := slices.ContainsFunc(r.JoinPoints, func(jp *joinpoint.JoinPoint) bool {
		return jp.Skipped == "" && jp.Mechanism == records.MechFtrace && jp.Kind == joinpoint.Kprobe
	})
	if entry && !r.FtraceOps {
		return "the runtime was loaded with ftrace_ops=0"
	}
	return ""
}

// Woven counts the join points not skipped.
func (r *Report) Woven() int {
	n := 0
	for _, jp := range r.JoinPoints {
		if jp.Skipped == "" {
			n++
		}
	}
	return n
}

// LoadAspect parses and checks the aspect at path, whose text is src:
// once per command, for every session it is planned or woven on.
func LoadAspect(path string, src []byte) (*aspect.File, error) {
	f, diags := aspect.Load(path, src)
	if len(diags) > 0 {
		return nil, &resolve.DiagnosticsError{Diags: diags}
	}
	return f, nil
}

// Plan resolves the aspect f (LoadAspect's) against s's image without
// touching the kernel (klasy list; the first half of a weave). It
// returns the aspect it resolved: f with its flows translated.
func Plan(s *Session, f *aspect.File) (*aspect.File, *Report, error) {
	path := f.Name
	rep := &Report{Aspect: gen.AspectName(path), Module: gen.ModuleName(gen.AspectName(path)), Target: s.T.Name()}
	start := time.Now()
	f, flows, err := Translate(f)
	if err != nil {
		return nil, nil, err
	}
	rep.Flows = flows
	jps, err := resolve.Resolve(f, s.X, resolve.ResolveOptions{Refused: s.Refused(), Modules: s.Modules, Domain: s.Domain,
		Progress: func(format string, args ...any) { fmt.Fprintf(s.log, "klasy: "+format+"\n", args...) },
		Warn:     func(w joinpoint.Warning) { rep.Warnings = append(rep.Warnings, w) }})
	if err != nil {
		var re *resolve.ResolveError
		if errors.As(err, &re) {
			return nil, nil, &resolve.DiagnosticsError{Diags: aspect.Diagnostics{{Pos: re.Pos, Msg: re.Msg}}}
		}
		return nil, nil, err
	}
	gen.SkipUnrunnable(f, jps)
	joinpoint.SortJoinPoints(jps)
	rep.JoinPoints = jps
	rep.Times.Resolve = time.Since(start)
	return f, rep, nil
}

// Translate turns an aspect with <xflow> definitions into the plain
// aspect the weaver weaves (xflow.Translate, dissertation §5.4.1): the
// flows' start, transit and quit advice come first, numbered 1.., so at
// a hook they run before the user's advice, whose numbers follow (as
// klasy translate prints them; records carry these numbers); advice with
// xflow(...) runs only for objects of the flow. It returns the flows'
// names. An aspect without flows is returned as it is.
func Translate(f *aspect.File) (*aspect.File, []string, error) {
	if len(f.Flows) == 0 {
		return f, nil, nil
	}
	out, err := xflow.Translate(f)
	if err != nil {
		return nil, nil, err
	}
	var names []string
	for _, fl := range f.Flows {
		names = append(names, fl.Name)
	}
	return out, names, nil
}

// Weave weaves the aspect f (LoadAspect's) into s's kernel: resolve,
// generate, build, load. It is all or nothing: on any error nothing of
// this weave stays in the kernel.
func Weave(ctx context.Context, s *Session, f *aspect.File) (*Report, error) {
	f, rep, err := Plan(s, f)
	if err != nil {
		return nil, err
	}
	if err := WeaveResolved(ctx, s, f, rep); err != nil {
		// A bound refuses the whole aspect: its join points' warnings
		// would only bury that.
		var be *BoundError
		if errors.As(err, &be) {
			return nil, err
		}
		return rep, err
	}
	return rep, nil
}

// WeaveResolved weaves the join points of rep, resolved for aspect f:
// Weave's second half, for callers that choose join points themselves
// (the benchmarks hook arbitrary instructions).
func WeaveResolved(ctx context.Context, s *Session, f *aspect.File, rep *Report) error {
	p, err := Prepare(ctx, s, f, rep)
	if err != nil {
		return err
	}
	return p.Load(ctx)
}

// Prepared is a weave generated and built, not yet loaded: a weave
// into several domains builds for all before it loads into any.
type Prepared struct {
	s   *Session
	m   *gen.Module
	rt  *builtRuntime
	ko  []byte
	rep *Report
}

// Prepare generates and builds the advice module of rep's join points,
// and the runtime; nothing reaches the kernel.
func Prepare(ctx context.Context, s *Session, f *aspect.File, rep *Report) (*Prepared, error) {
	path := f.Name
	if rep.Woven() == 0 {
		if len(rep.JoinPoints) == 0 && len(rep.Warnings) > 0 {
			return nil, fmt.Errorf("nothing to weave: %s", rep.Warnings[0])
		}
		return nil, fmt.Errorf("nothing to weave: all %d join points of %s are skipped", len(rep.JoinPoints), path)
	}
	if err := s.checkJoinPoints(rep.Woven()); err != nil {
		return nil, err
	}
	start := time.Now()
	ref := s.X.Funcs(gen.KASLRRef)
	if len(ref) != 1 || ref[0].InlineOnly {
		return nil, fmt.Errorf("%s has no single function %s to find the KASLR slide by", s.T.Image(), gen.KASLRRef)
	}
	tasks := s.Tasks
	if err := tasks.Check(); err != nil {
		return nil, err
	}
	if !tasks.IncludeSelf {
		// Left out of every join point: what the target's own agent
		// does for klasy (klasy trace --follow reading) is not traced.
		var err error
		if tasks.SelfTGID, err = taskfilter.Self(ctx, s.T.ReadFile); err != nil {
			return nil, err
		}
	}
	m, err := gen.Generate(f, rep.JoinPoints, gen.GenOptions{Path: path, RefAddr: ref[0].Entry, ModuleAddr: s.moduleAddr(ctx), Flows: rep.Flows, Tasks: tasks})
	if err != nil {
		return nil, err
	}
	rep.Times.Generate = time.Since(start)
	if err := s.checkCSize(m); err != nil {
		return nil, err
	}

	start = time.Now()
	rt, err := s.runtimeModule(ctx)
	if err != nil {
		return nil, err
	}
	ko, err := s.buildAdvice(ctx, m, rt.symvers)
	if err != nil {
		return nil, err
	}
	rep.Times.Build = time.Since(start)
	return &Prepared{s: s, m: m, rt: rt, ko: ko, rep: rep}, nil
}

// Load loads the runtime (unless it is there) and the advice module,
// and reads how the kernel placed each hook. On error nothing of this
// weave stays in the kernel.
func (p *Prepared) Load(ctx context.Context) error {
	s, m, rt, ko, rep := p.s, p.m, p.rt, p.ko, p.rep
	unlock, err := s.lock()
	if err != nil {
		return err
	}
	defer unlock()
	start := time.Now()
	if err := s.settleOrphans(ctx); err != nil {
		return err
	}
	if rep.LoadedRuntime, err = s.ensureRuntime(ctx, rt.ko, len(rep.Flows) > 0); err != nil {
		return err
	}
	if err := s.loadAdvice(ctx, m, ko, rep.LoadedRuntime); err != nil {
		if rep.LoadedRuntime && ctx.Err() == nil {
			s.releaseRuntime(ctx)
		}
		return err
	}
	rep.Times.Load = time.Since(start)
	if err := s.readMechanisms(ctx, rep, m); err != nil {
		if ctx.Err() == nil {
			return err
		}
		// Interrupted once the aspect is live, before it was reported:
		// unwound, as a weave interrupted earlier is.
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), unwindTimeout)
		defer cancel()
		if uerr := kmod.Unload(uctx, s.T, m.Name); uerr != nil {
			return fmt.Errorf("interrupted: %s is loaded and could not be unwoven (%v): it is live in %s; 'klasy unweave --all' removes it", m.Name, uerr, s.T.Name())
		}
		if rep.LoadedRuntime {
			s.releaseRuntime(uctx)
		}
		return fmt.Errorf("interrupted: %s was loaded and is unwoven again; nothing was woven", m.Name)
	}
	s.recordWoven(ctx, m.Name, m.Aspect, ko)
	return nil
}

// builtRuntime is the runtime module built for one kernel.
type builtRuntime struct {
	ko, symvers []byte
}

// runtimeModule builds the runtime against the target's headers once per
// kernel build and runtime source, and keeps it in the cache.
func (s *Session) runtimeModule(ctx context.Context) (*builtRuntime, error) {
	h := sha256.New()
	fs.WalkDir(runtime.Sources, ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := fs.ReadFile(runtime.Sources, p)
			fmt.Fprintf(h, "%s %d\n", p, len(b))
			h.Write(b)
		}
		return nil
	})
	dir := filepath.Join(cachedir.Root(), "weaver", "runtime", s.X.BuildID+"-"+hex.EncodeToString(h.Sum(nil))[:16])
	ko, err1 := os.ReadFile(filepath.Join(dir, runtime.ModuleName+".ko"))
	sv, err2 := os.ReadFile(filepath.Join(dir, "Module.symvers"))
	if err1 == nil && err2 == nil {
		return &builtRuntime{ko, sv}, nil
	}
	fmt.Fprintf(s.log, "klasy: building the runtime module for %s\n", s.T.Name())
	res, err := kbuild.Build(ctx, s.T.Headers(), runtime.Sources, kbuild.Options{})
	if err != nil {
		return nil, fmt.Errorf("building the runtime module against %s: %w", s.T.Headers(), err)
	}
	for _, mod := range res.Modules {
		if mod.Name == runtime.ModuleName {
			ko = mod.Image
		}
	}
	if ko == nil {
		return nil, fmt.Errorf("building the runtime module: kbuild made no %s.ko", runtime.ModuleName)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	for name, data := range map[string][]byte{runtime.ModuleName + ".ko": ko, "Module.symvers": res.Symvers} {
		if err := atomicfile.WriteFile(filepath.Join(dir, name), data); err != nil {
			return nil, err
		}
	}
	return &builtRuntime{ko, res.Symvers}, nil
}

// buildAdvice compiles the advice module; errors in advice code come
// back at the aspect's own lines.
func (s *Session) buildAdvice(ctx context.Context, m *gen.Module, symvers []byte) ([]byte, error) {
	// The same aspect woven again into the same kernel builds the same
	// module: keep it, keyed by everything that goes into the build.
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n", s.X.BuildID, s.T.Headers())
	h.Write(symvers)
	names := make([]string, 0, len(m.Files))
	for name := range m.Files {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		fmt.Fprintf(h, "%s %d\n", name, len(m.Files[name]))
		h.Write(m.Files[name])
	}
	cached := filepath.Join(cachedir.Root(), "weaver", "advice", hex.EncodeToString(h.Sum(nil))[:32]+".ko")
	if ko, err := os.ReadFile(cached); err == nil {
		return ko, nil
	}
	files := fstest.MapFS{}
	for name, data := range m.Files {
		files[name] = &fstest.MapFile{Data: data, Mode: 0o644}
	}
	hdr, err := fs.ReadFile(runtime.Sources, runtime.Header)
	if err != nil {
		return nil, err
	}
	files[runtime.Header] = &fstest.MapFile{Data: hdr, Mode: 0o644}
	var res *kbuild.Result
	err = s.buildBounded(ctx, m, func(ctx context.Context) (err error) {
		res, err = kbuild.Build(ctx, s.T.Headers(), files, kbuild.Options{ExtraSymbols: [][]byte{symvers}})
		return err
	})
	var bound *BoundError
	if errors.As(err, &bound) {
		return nil, err
	}
	if err != nil {
		var be *kbuild.BuildError
		if errors.As(err, &be) {
			if diags := m.AdviceDiagnostics(be.Diagnostics); len(diags) > 0 {
				return nil, &resolve.DiagnosticsError{Diags: diags}
			}
		}
		return nil, fmt.Errorf("building the advice module %s: %w", m.Name, err)
	}
	for _, mod := range res.Modules {
		if mod.Name == m.Name {
			if err := os.MkdirAll(filepath.Dir(cached), 0o755); err == nil {
				atomicfile.WriteFile(cached, mod.Image) // a cache: a failure only costs a rebuild
			}
			return mod.Image, nil
		}
	}
	return nil, fmt.Errorf("building the advice module: kbuild made no %s.ko", m.Name)
}

// ensureRuntime loads the runtime unless it is loaded, with the
// session's flow domain; loaded says
// whether this call loaded it.
func (s *Session) ensureRuntime(ctx context.Context, ko []byte, flows bool) (loaded bool, err error) {
	var params []string
	if s.FlowDomains > 1 {
		params = append(params, fmt.Sprintf("flow_domain=%d flow_domains=%d", s.FlowDomain, s.FlowDomains))
	}
	if s.BufferKB > 0 {
		params = append(params, fmt.Sprintf("buffer_kb=%d", s.BufferKB))
	}
	if s.KprobesOnly {
		params = append(params, "ftrace_ops=0")
	}
	if st, err := s.Status(ctx); err != nil {
		return false, err
	} else if st != nil {
		// A runtime a killed weave left is this weave's now.
		os.Remove(s.weavingRecord(runtime.ModuleName))
		if s.BufferKB > 0 && st.BufferKB != s.BufferKB {
			return false, fmt.Errorf("the runtime in %s has a trace buffer of %d KiB per CPU, not %d: the size is set when the runtime loads, so unweave every aspect there first ('klasy status' lists them)", s.T.Name(), st.BufferKB, s.BufferKB)
		}
		if s.KprobesOnly && st.FtraceOps {
			return false, fmt.Errorf("the runtime in %s puts entry hooks on ftrace_ops, and this weave wants kprobes only: unweave every aspect there first ('klasy status' lists them)", s.T.Name())
		}
		if flows {
			return false, s.checkFlowDomain(ctx)
		}
		return false, nil
	}
	if interrupted, err := s.loadRuntime(ctx, ko, strings.Join(params, " ")); interrupted {
		return false, err
	} else if err != nil {
		if errors.Is(err, syscall.EEXIST) {
			return false, nil // another klasy loaded it meanwhile
		}
		return false, fmt.Errorf("loading the klasy runtime into %s: %w", s.T.Name(), err)
	}
	return true, nil
}

// checkFlowDomain refuses to weave flows into a runtime loaded for
// another domain of a weave (or for none): its IDs could equal another
// domain's.
func (s *Session) checkFlowDomain(ctx context.Context) error {
	want := [2]int{s.FlowDomain, max(s.FlowDomains, 1)}
	var got [2]int
	for i, p := range []string{"flow_domain", "flow_domains"} {
		b, err := s.T.ReadFile(ctx, "/sys/module/"+runtime.ModuleName+"/parameters/"+p)
		if err != nil {
			return fmt.Errorf("reading the runtime's %s in %s: %w", p, s.T.Name(), err)
		}
		if got[i], err = strconv.Atoi(strings.TrimSpace(string(b))); err != nil {
			return fmt.Errorf("the runtime's %s in %s: %w", p, s.T.Name(), err)
		}
	}
	if got != want {
		return fmt.Errorf("the runtime in %s makes flow IDs as domain %d of %d, this weave needs domain %d of %d: unweave the aspects woven there first (klasy status lists them)", s.T.Name(), got[0], got[1], want[0], want[1])
	}
	return nil
}

// releaseRuntime unloads the runtime a failed or interrupted weave
// loaded, when no aspect is woven. Its failure goes to the log, not to
// the caller, which returns the weave's own error; the runtime then
// stays loaded with no aspect, which status shows and unweave removes.
func (s *Session) releaseRuntime(ctx context.Context) {
	st, err := s.Status(ctx)
	if err == nil && (st == nil || len(st.Aspects) > 0) {
		return
	}
	if err == nil {
		err = unloadRuntime(ctx, s.T)
	}
	if err != nil {
		fmt.Fprintf(s.log, "klasy: the runtime this weave loaded stays in %s (%v): 'klasy unweave --all' removes it\n", s.T.Name(), err)
	}
}

// readMechanisms reads how the kernel placed each hook. Jump
// optimization happens shortly after registration, from a workqueue:
// wait for it up to a second.
func (s *Session) readMechanisms(ctx context.Context, rep *Report, m *gen.Module) error {
	var st *records.Status
	var asp *records.Aspect
	deadline := time.Now().Add(time.Second)
	for {
		var err error
		if st, err = s.Status(ctx); err != nil {
			return err
		}
		if st == nil {
			return fmt.Errorf("the klasy runtime left %s while weaving", s.T.Name())
		}
		asp = nil
		for i := range st.Aspects {
			if st.Aspects[i].Module == m.Name {
				asp = &st.Aspects[i]
			}
		}
		if asp == nil {
			return fmt.Errorf("%s is loaded but its aspect is not registered", m.Name)
		}
		if time.Now().After(deadline) || !mayOptimize(asp) {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	for i, h := range m.Hooks {
		if i >= len(asp.Hooks) {
			break
		}
		for _, jp := range h.Points {
			jp.Mechanism = asp.Hooks[i].Mech
		}
	}
	rep.Times.Register = asp.Register
	rep.FtraceOps, rep.OpsErr = st.FtraceOps, asp.OpsErr
	rep.Fexit, rep.FexitErr = st.Fexit, asp.FexitErr
	return nil
}

// mayOptimize: an int3 kprobe not at a function's entry may still become
// a jump.
func mayOptimize(a *records.Aspect) bool {
	for _, h := range a.Hooks {
		if h.Mech == records.MechInt3 {
			return true
		}
	}
	return false
}
