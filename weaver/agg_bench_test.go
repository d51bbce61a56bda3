package weaver_test

// make bench: what in-kernel aggregation costs per hit against logging
// the same hit with STORE_DATA, beside a bare kprobe module's empty
// handler and klasy's null advice, all at the ftrace-placed entry of
// getppid in one lab run under QEMU -icount (guest instructions, which
// repeat from run to run).

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/klasy/klasy/kmod"
	"github.com/klasy/klasy/lab"
	"github.com/klasy/klasy/lab/labboot"
	"github.com/klasy/klasy/weaver"
	"github.com/klasy/klasy/weaver/target"
)

// aggCalls is the getppid calls per timing: their records fit in the
// runtime's default 1 MiB trace buffer, so STORE_DATA loses none (a
// lost record costs less than a kept one).
const aggCalls = "10000"

func BenchmarkAggregation(b *testing.B) {
	l := labboot.Boot(b, lab.Config{Name: labboot.Name("aggbench"), Kernel: lab.Debian, ICount: true})
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
	path := filepath.Join(b.TempDir(), "aggbench.klasy")

	type aggConfig struct {
		name, advice string // advice "": no klasy hook
		bare         bool
	}
	configs := []aggConfig{
		{name: "no hook"},
		{name: "bare kprobe", bare: true},
		{name: "null advice", advice: " "},
		{name: "STORE_DATA(pid)", advice: "STORE_DATA(current->pid);"},
		{name: "COUNT(pid)", advice: "COUNT(current->pid);"},
		{name: "HIST(pid)", advice: "HIST(current->pid);"},
		{name: "TIMER_START+STOP", advice: "TIMER_START(t); TIMER_STOP(t);"},
	}
	load := func(c aggConfig) {
		switch {
		case c.bare:
			if _, err := kmod.Load(ctx, l.Client(), bare, fmt.Sprintf("sym=%s off=0", bareSym)); err != nil {
				b.Fatal(err)
			}
		case c.advice != "":
			src := fmt.Sprintf("<aspect><import>linux/sched.h</import><advice><pointcut>execution(%s)</pointcut><before>%s</before></advice></aspect>\n", benchSite, c.advice)
			if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
				b.Fatal(err)
			}
			rep, err := weaver.Weave(ctx, sess, mustAspect(path, []byte(src)))
			if err != nil {
				b.Fatalf("%s: %v", c.name, err)
			}
			// At the bare kprobe's site, the entry; klasy's hook is on
			// the aspect's ftrace_ops there (BenchmarkHooks compares it
			// with a kprobe on ftrace).
			if m := rep.JoinPoints[0].Mechanism; m != "ftrace-ops" {
				b.Fatalf("%s: the hook at getppid's entry became %s, want ftrace-ops", c.name, m)
			}
		}
	}
	unload := func(c aggConfig) {
		switch {
		case c.bare:
			kmod.Unload(ctx, l.Client(), "bare_kprobe")
		case c.advice != "":
			// Every record read, none lost: STORE_DATA paid for each.
			if _, st, err := sess.Drain(ctx); err != nil || st == nil || st.TotalLost() > 0 {
				b.Fatalf("%s: draining the records: %v, %+v", c.name, err, st)
			}
			if _, err := weaver.Unweave(ctx, sess, []string{"aggbench"}, false); err != nil {
				b.Fatal(err)
			}
		}
	}
	// Warm each configuration once, then time them interleaved, as
	// BenchmarkHooks does.
	times := map[string][]float64{}
	for rep := 0; rep < benchReps; rep++ {
		for _, c := range configs {
			load(c)
			if rep == 0 {
				bl.timeGetppid(aggCalls)
				if c.advice != "" {
					sess.Drain(ctx)
				}
			}
			times[c.name] = append(times[c.name], bl.timeGetppid(aggCalls))
			unload(c)
		}
	}
	none := median(times["no hook"])
	cost := func(name string) float64 { return median(times[name]) - none }
	fmt.Printf("\nklasy aggregation at getppid's entry (%s, an ftrace-based kprobe), lab under QEMU -icount (1 guest instruction = 1 ns):\n", benchSite)
	fmt.Printf("guest ns per hit above a getppid() of %.0f ns, median of %d runs of %s calls\n\n", none, benchReps, aggCalls)
	fmt.Printf("  %-18s %8s %14s\n", "", "per hit", "/ STORE_DATA")
	store := cost("STORE_DATA(pid)")
	for _, c := range configs[1:] {
		fmt.Printf("  %-18s %8.0f %13.2fx\n", c.name, cost(c.name), cost(c.name)/store)
	}
	fmt.Printf("\n  (STORE_DATA: one 48-byte record per hit into the trace buffer; COUNT and HIST: one\n")
	fmt.Printf("   per-CPU counter; TIMER: a start and a stop, each reading two clocks)\n")
	fmt.Printf("\nspread (min..max ns per getppid of each configuration's runs, hook included):\n")
	for _, c := range configs {
		ts := slices.Clone(times[c.name])
		sort.Float64s(ts)
		fmt.Printf("  %-18s %6.0f .. %6.0f\n", c.name, ts[0], ts[len(ts)-1])
	}
	b.ReportMetric(cost("COUNT(pid)"), "ns/COUNT")
	b.ReportMetric(store, "ns/STORE_DATA")
}
