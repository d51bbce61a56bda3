package weaver_test

// make bench: what a hook costs per hit in a lab kernel, in the layout of
// the dissertation's Table 6.1 (rows: how the kernel placed the hook;
// columns: a bare kprobe module's empty handler, the baseline, then
// klasy's null advice without context, with an argument read from a
// register and with one read from the stack; an entry hook on the
// aspect's ftrace_ops beside the same hook as a kprobe on ftrace), and
// the time a weave of 100 execution join points takes, split by phase.
// The guest time to attach and detach N entry hooks is in
// BenchmarkPeers' table, beside BPF's and kprobe_events'.
//
// Under TCG only figures measured in one run compare: every figure is
// measured in this run, interleaved, and the medians are compared.

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/klasy/klasy/aspect"
	"github.com/klasy/klasy/dwarfmap"
	"github.com/klasy/klasy/kbuild"
	"github.com/klasy/klasy/kmod"
	"github.com/klasy/klasy/lab"
	"github.com/klasy/klasy/lab/labboot"
	"github.com/klasy/klasy/pattern"
	"github.com/klasy/klasy/weaver"
	"github.com/klasy/klasy/weaver/ctxvalue"
	"github.com/klasy/klasy/weaver/gen"
	"github.com/klasy/klasy/weaver/joinpoint"
	"github.com/klasy/klasy/weaver/records"
	"github.com/klasy/klasy/weaver/target"
)

const (
	// benchSite is getppid's body as DWARF names it; kallsyms also calls
	// it __x64_sys_getppid, the name the bare module probes.
	benchSite  = "__do_sys_getppid"
	bareSym    = "__x64_sys_getppid"
	benchCalls = "100000"
	benchReps  = 9
	// bpfFentryNull is BPF fentry's null program per hit in the same
	// setup (weaver.md, 2026-11-26; the BPF peer is not in this bench):
	// the target of an entry hook on the ftrace_ops.
	bpfFentryNull = 122.8
)

// reps is benchReps, or KLASY_BENCH_REPS when set (a quicker run).
func reps() int {
	if n, err := strconv.Atoi(os.Getenv("KLASY_BENCH_REPS")); err == nil && n > 0 {
		return n
	}
	return benchReps
}

type benchLab struct {
	b    *testing.B
	ctx  context.Context
	l    *lab.Lab
	sess *weaver.Session
}

func (bl *benchLab) run(argv ...string) string {
	bl.b.Helper()
	res, err := bl.l.Client().Run(bl.ctx, argv, nil)
	if err != nil || res.ExitCode != 0 {
		bl.b.Fatalf("guest: %q: %v, exit %d: %s%s", argv, err, res.ExitCode, res.Stdout, res.Stderr)
	}
	return string(res.Stdout)
}

// nsPerCall times the getppid loop in the guest.
func (bl *benchLab) nsPerCall() float64 { return bl.timeGetppid(benchCalls) }

// timeGetppid times n getppid calls in the guest: ns per call.
func (bl *benchLab) timeGetppid(n string) float64 {
	out := bl.run(prog, "time-getppid", n)
	i := strings.Index(out, "ns/call ")
	if i < 0 {
		bl.b.Fatalf("klasy_prog printed %q", out)
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(out[i+8:]), 64)
	if err != nil {
		bl.b.Fatal(err)
	}
	return v
}

// config is one column and row of the table: something to load before
// timing and unload after.
type config struct {
	name       string
	mech, kind string // row, column
	load       func() error
	unload     func()
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	sort.Float64s(s)
	return s[len(s)/2]
}

func BenchmarkHooks(b *testing.B) {
	// The guest's clock counts instructions: the figures are guest
	// instructions per hit and repeat from run to run, where wall time
	// under TCG on a shared host swings twofold.
	l := labboot.Boot(b, lab.Config{Name: labboot.Name("bench"), Kernel: lab.Debian, ICount: true})
	labboot.Install(b, l, prog, labboot.StaticProgram(b, "testdata/prog/klasy_prog.c"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	sess, err := weaver.OpenSession(ctx, weaver.SessionOptions{TargetOptions: target.TargetOptions{Lab: l.Name()}})
	if err != nil {
		b.Fatal(err)
	}
	defer sess.Close()
	bl := &benchLab{b: b, ctx: ctx, l: l, sess: sess}

	bare := buildBare(b, l.Kernel().BuildDir)
	fi := sess.X.Funcs(benchSite)
	if len(fi) != 1 {
		b.Fatalf("%s: %d functions", benchSite, len(fi))
	}
	entry := fi[0].Entry
	sites := bl.sites(bare, fi[0])
	b.Logf("sites in %s: ftrace +0, jump +%#x, int3 +%#x", benchSite, sites["jump"]-entry, sites["int3"]-entry)

	var configs []config
	configs = append(configs, config{name: "no hook", load: func() error { return nil }, unload: func() {}})
	// ftrace-ops is the entry as ftrace: klasy's hook on the aspect's
	// ftrace_ops; its bare kprobe is the ftrace row's.
	sites["ftrace-ops"] = sites["ftrace"]
	for _, mech := range mechRows {
		addr := sites[mech]
		off := addr - entry
		if mech != "ftrace-ops" {
			configs = append(configs, config{name: "bare " + mech, mech: mech, kind: "bare kprobe",
				load: func() error {
					_, err := kmod.Load(ctx, l.Client(), bare, fmt.Sprintf("sym=%s off=%#x", bareSym, off))
					return err
				},
				unload: func() { kmod.Unload(ctx, l.Client(), "bare_kprobe") },
			})
		}
		for _, kind := range []string{"null advice", "register argument", "stack argument"} {
			configs = append(configs, config{name: "klasy " + mech + " " + kind, mech: mech, kind: kind,
				load: func() error { return bl.weaveAt(addr, kind, mech) },
				unload: func() {
					if _, err := weaver.Unweave(ctx, sess, []string{"bench"}, false); err != nil {
						b.Fatal(err)
					}
				},
			})
		}
	}
	// Warm each configuration once (builds are cached), then time them
	// interleaved so that drift in the machine's speed hits all alike.
	times := map[string][]float64{}
	nreps := reps()
	for rep := 0; rep < nreps; rep++ {
		for _, c := range configs {
			if err := c.load(); err != nil {
				b.Fatalf("%s: %v", c.name, err)
			}
			if rep == 0 {
				bl.nsPerCall()
			}
			times[c.name] = append(times[c.name], bl.nsPerCall())
			c.unload()
		}
	}
	none := median(times["no hook"])
	fmt.Printf("\nklasy hooks in %s, lab under QEMU -icount (1 guest instruction = 1 ns): guest ns per hit above a getppid() of %.0f ns, median of %d runs of %s calls\n", benchSite, none, nreps, benchCalls)
	fmt.Printf("(Table 6.1's layout: rows how the kernel placed the hook, columns what runs there)\n\n")
	fmt.Printf("%-10s %14s %14s %14s %14s %10s\n", "", "bare kprobe", "klasy null", "klasy reg arg", "klasy stk arg", "null/bare")
	rows := map[string]map[string]float64{}
	for _, mech := range mechRows {
		row := map[string]float64{}
		for _, c := range configs {
			if c.mech == mech || mech == "ftrace-ops" && c.mech == "ftrace" && c.kind == "bare kprobe" {
				row[c.kind] = median(times[c.name]) - none
			}
		}
		rows[mech] = row
		ratio := row["null advice"] / row["bare kprobe"]
		verdict := "within 10%"
		if ratio > 1.10 {
			verdict = "OVER 10%"
		}
		fmt.Printf("%-10s %14.0f %14.0f %14.0f %14.0f %9.2fx %s\n", mech, row["bare kprobe"], row["null advice"], row["register argument"], row["stack argument"], ratio, verdict)
	}
	ops, old := rows["ftrace-ops"]["null advice"], rows["ftrace"]["null advice"]
	fmt.Printf("\nentry hook, null advice: ftrace_ops %.0f ns, kprobe on ftrace %.0f ns (%.2fx), bare kprobe %.0f ns (%.2fx); BPF fentry %.1f ns in weaver.md's run (%.2fx): %s\n",
		ops, old, ops/old, rows["ftrace"]["bare kprobe"], ops/rows["ftrace"]["bare kprobe"], bpfFentryNull, ops/bpfFentryNull, verdict(ops <= bpfFentryNull, "at most BPF fentry's", "ABOVE BPF fentry's"))
	fmt.Printf("\nspread (min..max ns per getppid of each configuration's runs, hook included):\n")
	for _, c := range configs {
		ts := slices.Clone(times[c.name])
		sort.Float64s(ts)
		fmt.Printf("  %-32s %6.0f .. %6.0f\n", c.name, ts[0], ts[len(ts)-1])
	}
	b.ReportMetric(none, "ns/getppid")
	b.ReportMetric(ops, "ns/ftrace-ops-hit")
}

// mechRows are the table's rows: how the hook is placed.
var mechRows = []string{"ftrace-ops", "ftrace", "jump", "int3"}

func verdict(ok bool, yes, no string) string {
	if ok {
		return yes
	}
	return no
}

// entryFunctions returns n functions with one out-of-line body, no
// inlined copy and an ftrace call site (the resolver weaves their entry).
func (bl *benchLab) entryFunctions(n int) []string {
	sites, err := bl.sess.X.Image().FtraceSites()
	if err != nil || sites == nil {
		bl.b.Fatalf("the image's ftrace sites: %v", err)
	}
	var names []string
	for _, fi := range bl.sess.X.MatchFuncs(mustPattern(bl.b, "%")) {
		if !fi.InlineOnly && fi.Inlined == 0 && fi.External && len(bl.sess.X.Funcs(fi.Name)) == 1 && sites.Has(fi.Entry) {
			names = append(names, fi.Name)
		}
	}
	var picked []string
	for len(picked) < n && len(names) > 0 {
		k := min(len(names), 2*(n-len(picked)))
		try := names[:k]
		names = names[k:]
		_, rep, err := weaver.Plan(bl.sess, mustAspect("try.klasy", []byte(nullEntries(try))))
		if err != nil {
			bl.b.Fatal(err)
		}
		for _, jp := range rep.JoinPoints {
			if jp.Skipped == "" && jp.InlinedIn == "" && len(picked) < n {
				picked = append(picked, jp.Function)
			}
		}
	}
	if len(picked) < n {
		bl.b.Fatalf("only %d functions to weave", len(picked))
	}
	return picked
}

// nullEntries is an aspect with null advice at the entry of each of
// fns, a few hundred per advice (a pointcut is at most 64 KiB).
func nullEntries(fns []string) string {
	var b strings.Builder
	b.WriteString("<aspect>")
	for i := 0; i < len(fns); i += 400 {
		var pcs []string
		for _, f := range fns[i:min(i+400, len(fns))] {
			pcs = append(pcs, "execution("+f+")")
		}
		b.WriteString("<advice><pointcut>" + strings.Join(pcs, " OR ") + "</pointcut><before>;</before></advice>")
	}
	b.WriteString("</aspect>\n")
	return b.String()
}

// attachDetach weaves the entries of fns with null advice, on the
// ftrace_ops or as kprobes, and unweaves them: the guest ms the runtime
// took to register and to unregister the hooks.
func (bl *benchLab) attachDetach(fns []string, ops bool) (attach, detach float64) {
	name := fmt.Sprintf("attach%d", len(fns))
	src := nullEntries(fns)
	bl.sess.KprobesOnly = !ops
	defer func() { bl.sess.KprobesOnly = false }()
	rep, err := weaver.Weave(bl.ctx, bl.sess, mustAspect(name+".klasy", []byte(src)))
	if err != nil {
		bl.b.Fatal(err)
	}
	want := records.MechFtraceOps
	if !ops {
		want = records.MechFtrace
	}
	for _, jp := range rep.JoinPoints {
		if jp.Skipped == "" && jp.Mechanism != want {
			bl.b.Fatalf("%s: %s, want %s", jp.Where(), jp.Mechanism, want)
		}
	}
	bl.run("dmesg", "-c")
	if _, err := weaver.Unweave(bl.ctx, bl.sess, []string{name}, false); err != nil {
		bl.b.Fatal(err)
	}
	msg := bl.run("dmesg")
	i := strings.Index(msg, " unregistered in ")
	var us float64
	if i < 0 {
		bl.b.Fatalf("dmesg after unweaving %s: %q", name, msg)
	}
	fmt.Sscanf(msg[i+len(" unregistered in "):], "%g us", &us)
	return float64(rep.Times.Register.Microseconds()) / 1000, us / 1000
}

// sites finds, among the instruction boundaries of fn, one where the
// kernel jump-optimizes a kprobe and one where it keeps int3, by placing
// the bare kprobe there and reading the kernel's kprobe list.
func (bl *benchLab) sites(bare []byte, fn dwarfmap.FuncInfo) map[string]uint64 {
	sites := map[string]uint64{"ftrace": fn.Entry}
	end := fn.Ranges[0][1]
	for addr := fn.Entry + 1; addr < end && len(sites) < 3; addr++ {
		if bl.sess.X.CheckInstruction(addr) != nil {
			continue
		}
		if _, err := kmod.Load(bl.ctx, bl.l.Client(), bare, fmt.Sprintf("sym=%s off=%#x", bareSym, addr-fn.Entry)); err != nil {
			continue
		}
		time.Sleep(500 * time.Millisecond) // the optimizer runs from a workqueue
		list := bl.run("cat", target.KprobesList)
		kmod.Unload(bl.ctx, bl.l.Client(), "bare_kprobe")
		mech := "int3"
		if strings.Contains(list, "[OPTIMIZED]") {
			mech = "jump"
		}
		if strings.Contains(list, "[FTRACE]") {
			continue
		}
		if _, ok := sites[mech]; !ok {
			sites[mech] = addr
		}
	}
	if len(sites) < 3 {
		bl.b.Fatalf("found only %v in %s", sites, fn.Name)
	}
	return sites
}

// weaveAt weaves the null advice of the given kind at addr: an entry
// hook as a kprobe on ftrace for mech ftrace, on the aspect's ftrace_ops
// for ftrace-ops.
func (bl *benchLab) weaveAt(addr uint64, kind, mech string) error {
	bl.sess.KprobesOnly = mech == "ftrace"
	defer func() { bl.sess.KprobesOnly = false }()
	body, pc := "", "execution("+benchSite+")"
	var args []joinpoint.Arg
	switch kind {
	case "register argument":
		// __x64_sys_getppid(const struct pt_regs *regs): regs is in rdi
		// (the Go side names the parameter for the advice only).
		pc += " AND argument(regs, p)"
		body = "if (*(unsigned long *)p == 12345) STORE_DATA(1);"
		args = []joinpoint.Arg{{Param: "p", Var: "regs", Value: &ctxvalue.Value{Ops: []ctxvalue.ValueOp{{Kind: ctxvalue.PushReg, Reg: 5}}, Size: 8}}}
	case "stack argument":
		// A value from the stack, read with copy_from_kernel_nofault as
		// every stack slot is: the word at the stack pointer.
		pc += " AND argument(regs, p)"
		body = "if (*(unsigned long *)p == 12345) STORE_DATA(1);"
		args = []joinpoint.Arg{{Param: "p", Var: "regs", Value: &ctxvalue.Value{Ops: []ctxvalue.ValueOp{{Kind: ctxvalue.PushReg, Reg: 7}}, Size: 8, InMemory: true}}}
	}
	src := fmt.Sprintf("<aspect><advice><pointcut>%s</pointcut><before>%s</before></advice></aspect>\n", pc, body)
	f, diags := aspect.Load("bench.klasy", []byte(src))
	if len(diags) > 0 {
		return diags
	}
	rep := &weaver.Report{Aspect: "bench", Module: gen.ModuleName("bench"), Target: bl.sess.T.Name(),
		JoinPoints: []*joinpoint.JoinPoint{{Advice: 1, Kind: joinpoint.Kprobe, Addr: addr, Function: benchSite, File: "bench", Line: 1, Args: args}}}
	if err := weaver.WeaveResolved(bl.ctx, bl.sess, f, rep); err != nil {
		return err
	}
	if got := rep.JoinPoints[0].Mechanism; got != mech {
		return fmt.Errorf("klasy's hook at %#x became %s, the bare kprobe's %s", addr, got, mech)
	}
	return nil
}

func buildBare(b *testing.B, headers string) []byte {
	res, err := kbuild.Build(context.Background(), headers, os.DirFS("testdata/bench").(fs.FS), kbuild.Options{})
	if err != nil {
		b.Fatal(err)
	}
	return res.Modules[0].Image
}

// BenchmarkWeave100 weaves an aspect of 100 execution join points into
// the lab and reports the time of each phase.
func BenchmarkWeave100(b *testing.B) {
	l := labboot.Boot(b, lab.Config{Name: labboot.Name("bench100"), Kernel: lab.Debian})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	sess, err := weaver.OpenSession(ctx, weaver.SessionOptions{TargetOptions: target.TargetOptions{Lab: l.Name()}})
	if err != nil {
		b.Fatal(err)
	}
	defer sess.Close()
	// 100 functions, each with one body and no inlined copy: one join
	// point each. Those the resolver would skip are left out.
	var names []string
	for _, p := range []string{"vfs_%", "do_%", "sys_%"} {
		for _, fi := range sess.X.MatchFuncs(mustPattern(b, p)) {
			if !fi.InlineOnly && fi.Inlined == 0 && fi.External && len(sess.X.Funcs(fi.Name)) == 1 {
				names = append(names, "execution("+fi.Name+")")
			}
		}
	}
	var woven []string
	for len(woven) < 100 && len(names) > 0 {
		n := min(len(names), 100-len(woven))
		try := names[:n]
		names = names[n:]
		src := "<aspect><advice><pointcut>" + strings.Join(try, " OR ") + "</pointcut><before>STORE_DATA(1);</before></advice></aspect>\n"
		_, rep, err := weaver.Plan(sess, mustAspect("try.klasy", []byte(src)))
		if err != nil {
			b.Fatal(err)
		}
		for _, jp := range rep.JoinPoints {
			if jp.Skipped == "" {
				woven = append(woven, "execution("+jp.Function+")")
			}
		}
	}
	if len(woven) < 100 {
		b.Fatalf("only %d functions to weave", len(woven))
	}
	src := "<aspect><advice><pointcut>" + strings.Join(woven[:100], " OR ") + "</pointcut><before>STORE_DATA(1);</before></advice></aspect>\n"
	path := b.TempDir() + "/hundred.klasy"
	os.WriteFile(path, []byte(src), 0o644)
	// The first weave builds the runtime for this kernel once: not part
	// of a weave's time afterwards.
	if _, err := weaver.Weave(ctx, sess, mustAspect(path, []byte(src))); err != nil {
		b.Fatal(err)
	}
	weaver.Unweave(ctx, sess, []string{"hundred"}, false)
	var reps []*weaver.Report
	for i := 0; i < 3; i++ {
		// A new advice body each time: a weave of an aspect klasy has not
		// built before (the same aspect again reuses its module).
		src := strings.Replace(src, "STORE_DATA(1);", fmt.Sprintf("STORE_DATA(%d);", i+2), 1)
		start := time.Now()
		rep, err := weaver.Weave(ctx, sess, mustAspect(path, []byte(src)))
		if err != nil {
			b.Fatal(err)
		}
		wall := time.Since(start)
		if rep.Woven() != 100 {
			b.Fatalf("%d of 100 join points woven", rep.Woven())
		}
		if _, err := weaver.Unweave(ctx, sess, []string{"hundred"}, false); err != nil {
			b.Fatal(err)
		}
		reps = append(reps, rep)
		b.Logf("weave %d: %v", i, wall)
	}
	fmt.Printf("\nweaving 100 execution join points into a Debian lab kernel (median of 3 new aspects; the runtime already built):\n")
	pick := func(f func(t weaver.Times) time.Duration) time.Duration {
		var ds []float64
		for _, r := range reps {
			ds = append(ds, float64(f(r.Times)))
		}
		return time.Duration(median(ds))
	}
	fmt.Printf("  resolve %v, generate %v, build %v, load %v (of which register %v)\n",
		pick(func(t weaver.Times) time.Duration { return t.Resolve }).Round(time.Millisecond),
		pick(func(t weaver.Times) time.Duration { return t.Generate }).Round(time.Millisecond),
		pick(func(t weaver.Times) time.Duration { return t.Build }).Round(time.Millisecond),
		pick(func(t weaver.Times) time.Duration { return t.Load }).Round(time.Millisecond),
		pick(func(t weaver.Times) time.Duration { return t.Register }).Round(time.Millisecond))
}

func mustPattern(b *testing.B, s string) *pattern.Pattern {
	p, err := pattern.Compile(s, pattern.Pointcut)
	if err != nil {
		b.Fatal(err)
	}
	return p
}
