package weaver_test

// make bench: a replaced function's call against the original's, in one
// lab run under QEMU -icount (guest instructions, which repeat from run
// to run): getppid(2) as the kernel has it, with klasy's null before
// advice at its entry (an ftrace-based kprobe), and replaced by
// <replace>return 42;</replace> (the same kprobe, armed with IPMODIFY,
// returning at once through the runtime's stub).

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/klasy/klasy/lab"
	"github.com/klasy/klasy/lab/labboot"
	"github.com/klasy/klasy/weaver"
	"github.com/klasy/klasy/weaver/target"
)

func BenchmarkReplace(b *testing.B) {
	l := labboot.Boot(b, lab.Config{Name: labboot.Name("replbench"), Kernel: lab.Debian, ICount: true})
	labboot.Install(b, l, prog, labboot.StaticProgram(b, "testdata/prog/klasy_prog.c"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	sess, err := weaver.OpenSession(ctx, weaver.SessionOptions{TargetOptions: target.TargetOptions{Lab: l.Name()}})
	if err != nil {
		b.Fatal(err)
	}
	defer sess.Close()
	bl := &benchLab{b: b, ctx: ctx, l: l, sess: sess}
	path := filepath.Join(b.TempDir(), "replbench.klasy")

	type replConfig struct {
		name, advice string // advice "": no hook
	}
	configs := []replConfig{
		{name: "original (no hook)"},
		{name: "null before advice", advice: "<before> </before>"},
		{name: "replaced: return 42", advice: "<replace>return 42;</replace>"},
	}
	load := func(c replConfig) {
		if c.advice == "" {
			return
		}
		src := fmt.Sprintf("<aspect><advice><pointcut>execution(%s)</pointcut>%s</advice></aspect>\n", benchSite, c.advice)
		if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
			b.Fatal(err)
		}
		rep, err := weaver.Weave(ctx, sess, mustAspect(path, []byte(src)))
		if err != nil {
			b.Fatalf("%s: %v", c.name, err)
		}
		if m := rep.JoinPoints[0].Mechanism; m != "ftrace" {
			b.Fatalf("%s: the hook at getppid's entry became %s, want ftrace", c.name, m)
		}
		if strings.HasPrefix(c.advice, "<replace>") {
			// A shell's $PPID comes from getppid.
			if got := strings.TrimSpace(bl.run("sh", "-c", "echo $PPID")); got != "42" {
				b.Fatalf("%s: a shell's $PPID is %q, want 42", c.name, got)
			}
		}
	}
	unload := func(c replConfig) {
		if c.advice == "" {
			return
		}
		if _, err := weaver.Unweave(ctx, sess, []string{"replbench"}, false); err != nil {
			b.Fatal(err)
		}
	}
	// Warm each configuration once, then time them interleaved, as
	// BenchmarkHooks does.
	times := map[string][]float64{}
	for rep := 0; rep < benchReps; rep++ {
		for _, c := range configs {
			load(c)
			if rep == 0 {
				bl.nsPerCall()
			}
			times[c.name] = append(times[c.name], bl.nsPerCall())
			unload(c)
		}
	}
	orig := median(times[configs[0].name])
	fmt.Printf("\nklasy <replace> at getppid's entry (%s), lab under QEMU -icount (1 guest instruction = 1 ns):\n", benchSite)
	fmt.Printf("guest ns per getppid() call, system call included, median of %d runs of %s calls\n\n", benchReps, benchCalls)
	fmt.Printf("  %-22s %8s %12s\n", "", "per call", "vs original")
	for _, c := range configs {
		m := median(times[c.name])
		fmt.Printf("  %-22s %8.0f %+11.0f\n", c.name, m, m-orig)
	}
	fmt.Printf("\n  (replaced: the hook's handler runs the replacement, sets rax and resumes at a lone ret;\n")
	fmt.Printf("   the original's body, a few instructions reading current->real_parent's tgid under RCU, does not run)\n")
	fmt.Printf("\nspread (min..max ns per getppid of each configuration's runs):\n")
	for _, c := range configs {
		ts := slices.Clone(times[c.name])
		sort.Float64s(ts)
		fmt.Printf("  %-22s %6.0f .. %6.0f\n", c.name, ts[0], ts[len(ts)-1])
	}
	b.ReportMetric(median(times[configs[2].name])-orig, "ns/replaced-call-over-original")
	b.ReportMetric(median(times[configs[1].name])-orig, "ns/null-advice")
}
