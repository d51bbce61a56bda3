package weaver_test

// make bench, issue 10: access join points on the built lab kernel,
// against KLASY's figures for access(sk_buff.%) on Linux 2.6.10
// (dissertation §6.1: 2,791 lines selected, 2,494 hooked = 89.4%,
// target lost on 227 of them): coverage by tier, target and skip reason;
// the kernel's mechanism per hook and the weave's time split, weaving
// every sk_buff access of the whole kernel into a running lab; and the
// cost per hit of an exact and of a line-level hook, measured in one
// lab run under QEMU -icount (guest instructions per hit).

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/klasy/klasy/aspect"
	"github.com/klasy/klasy/lab"
	"github.com/klasy/klasy/lab/labboot"
	"github.com/klasy/klasy/weaver"
	"github.com/klasy/klasy/weaver/gen"
	"github.com/klasy/klasy/weaver/joinpoint"
	"github.com/klasy/klasy/weaver/target"
)

const (
	klasyLines      = 2791 // access(sk_buff.%) on 2.6.10, §6.1.5
	klasyHooked     = 2494
	klasyTargetLost = 227
)

func accessAspect(pc string) string {
	return "<aspect><advice><pointcut>" + pc + "</pointcut><before>STORE_DATA(1);</before></advice></aspect>\n"
}

func BenchmarkAccessSkBuff(b *testing.B) {
	l := labboot.Boot(b, lab.Config{Name: labboot.Name("acc"), Kernel: lab.Built, MemMB: 1024})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	sess, err := weaver.OpenSession(ctx, weaver.SessionOptions{TargetOptions: target.TargetOptions{Lab: l.Name()}})
	if err != nil {
		b.Fatal(err)
	}
	defer sess.Close()
	fmt.Printf("\naccess join points in the built lab kernel (%s), against KLASY on Linux 2.6.10 (dissertation §6.1):\n", l.Kernel().Release)
	for _, pc := range []string{"access(sk_buff.%)", "access(sk_buff.%) AND target(skb)"} {
		path := filepath.Join(b.TempDir(), "skb.klasy")
		src := accessAspect(pc)
		os.WriteFile(path, []byte(src), 0o644)
		start := time.Now()
		_, rep, err := weaver.Plan(sess, mustAspect(path, []byte(src)))
		if err != nil {
			b.Fatal(err)
		}
		plan := time.Since(start)
		c := joinpoint.Coverage(rep.JoinPoints)
		fmt.Printf("\n%s\n", pc)
		fmt.Printf("  %-34s %10s %10s\n", "", "klasy", "KLASY")
		fmt.Printf("  %-34s %10d %10d\n", "source lines selected", c.Lines, klasyLines)
		fmt.Printf("  %-34s %9.1f%% %9.1f%%   (%d; %d lines have no code in any copy: %.1f%% of those with code)\n", "lines with a join point",
			pct(c.LinesHooked, c.Lines), pct(klasyHooked, klasyLines), c.LinesHooked, c.LinesNoCode, pct(c.LinesHooked, c.Lines-c.LinesNoCode))
		fmt.Printf("  %-34s %9.1f%% %10s   (%d lines; join points: %d exact, %d line-level)\n", "lines hooked exactly",
			pct(c.LinesExact, c.Lines), "-", c.LinesExact, c.Exact, c.LineLevel)
		if strings.Contains(pc, "target") {
			fmt.Printf("  %-34s %9.1f%% %9.1f%%\n", "lines with target bound", pct(c.LinesTarget, c.Lines), pct(klasyHooked-klasyTargetLost, klasyLines))
		}
		fmt.Printf("  %-34s %10d\n", "join points skipped", len(rep.JoinPoints)-rep.Woven())
		var reasons []string
		for r, n := range c.Skipped {
			reasons = append(reasons, fmt.Sprintf("%6d  %s", n, r))
		}
		slices.Sort(reasons)
		slices.Reverse(reasons)
		for _, r := range reasons {
			fmt.Printf("      %s\n", r)
		}
		fmt.Printf("  resolve %v (the whole vmlinux, warm index; %v with the aspect's load and checks)\n", rep.Times.Resolve.Round(time.Millisecond), plan.Round(time.Millisecond))

		// Weave it into the running kernel: mechanisms and time split.
		rep, err = weaver.Weave(ctx, sess, mustAspect(path, []byte(src)))
		if err != nil {
			b.Fatalf("weaving %s: %v", pc, err)
		}
		mech := map[string]int{}
		for _, jp := range rep.JoinPoints {
			if jp.Skipped == "" {
				mech[jp.Mechanism]++
			}
		}
		t := rep.Times
		fmt.Printf("  woven: %d hooks: jump %d, int3 %d, ftrace %d\n", rep.Woven(), mech["jump"], mech["int3"], mech["ftrace"])
		fmt.Printf("  weave: resolve %v, generate %v, build %v, load %v (register %v)\n", t.Resolve.Round(time.Millisecond),
			t.Generate.Round(time.Millisecond), t.Build.Round(time.Millisecond), t.Load.Round(time.Millisecond), t.Register.Round(time.Millisecond))
		if _, err := weaver.Unweave(ctx, sess, []string{"skb"}, false); err != nil {
			b.Fatal(err)
		}
	}
}

func pct(n, of int) float64 {
	if of == 0 {
		return 0
	}
	return 100 * float64(n) / float64(of)
}

// BenchmarkAccessHit: the cost per hit of an exact and of a line-level
// access hook with target bound, at the accesses of struct file an
// lseek(2) loop makes, found by weaving them all and reading which hooks
// the loop hits once per call.
func BenchmarkAccessHit(b *testing.B) {
	l := labboot.Boot(b, lab.Config{Name: labboot.Name("acchit"), Kernel: lab.Built, ICount: true})
	labboot.Install(b, l, prog, labboot.StaticProgram(b, "testdata/prog/klasy_prog.c"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	sess, err := weaver.OpenSession(ctx, weaver.SessionOptions{TargetOptions: target.TargetOptions{Lab: l.Name()}})
	if err != nil {
		b.Fatal(err)
	}
	defer sess.Close()
	bl := &benchLab{b: b, ctx: ctx, l: l, sess: sess}
	bl.run("sh", "-c", "echo 0123456789 > /tmp/lseek.dat")
	const calls = 20000
	timeLseek := func() float64 {
		out := bl.run(prog, "time-lseek", "/tmp/lseek.dat", strconv.Itoa(calls))
		i := strings.Index(out, "ns/call ")
		v, err := strconv.ParseFloat(strings.TrimSpace(out[i+8:]), 64)
		if err != nil {
			b.Fatalf("klasy_prog printed %q", out)
		}
		return v
	}
	// Find the hooks the loop hits once per call.
	path := filepath.Join(b.TempDir(), "fpos.klasy")
	// Every member access of read_write.c, where lseek(2) runs: the
	// advice uses the target (so computing it is not optimized away)
	// and records nothing (a record costs more than the hook).
	src := "<aspect><advice><pointcut>access(%.%) AND target(t) AND within_file(fs/read_write.c)</pointcut>" +
		"<before>if (!t) STORE_DATA(0);</before></advice></aspect>\n"
	os.WriteFile(path, []byte(src), 0o644)
	rep, err := weaver.Weave(ctx, sess, mustAspect(path, []byte(src)))
	if err != nil {
		b.Fatal(err)
	}
	timeLseek()
	st, err := sess.Status(ctx)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := weaver.Unweave(ctx, sess, []string{"fpos"}, false); err != nil {
		b.Fatal(err)
	}
	pick := map[bool]*joinpoint.JoinPoint{}
	for _, a := range st.Aspects {
		for _, h := range a.Hooks {
			if h.Hits != calls {
				continue
			}
			for _, jp := range rep.JoinPoints {
				if jp.Addr == h.Image && jp.Skipped == "" && pick[jp.Exact] == nil {
					pick[jp.Exact] = jp
				}
			}
		}
	}
	fmt.Printf("\naccess hooks with target bound in the built lab kernel under QEMU -icount: guest ns per hit above an lseek() (median of 7 runs of %d calls)\n", calls)
	none := []float64{}
	for i := 0; i < 7; i++ {
		none = append(none, timeLseek())
	}
	base := median(none)
	for _, exact := range []bool{true, false} {
		jp := pick[exact]
		tier := map[bool]string{true: "exact", false: "line-level"}[exact]
		if jp == nil {
			fmt.Printf("  %-10s  no such hook on lseek's path\n", tier)
			continue
		}
		one := *jp
		one.Mechanism = ""
		rep1 := &weaver.Report{Aspect: "hit", Module: gen.ModuleName("hit"), Target: sess.T.Name(), JoinPoints: []*joinpoint.JoinPoint{&one}}
		f, diags := aspect.Load("hit.klasy", []byte(src))
		if len(diags) > 0 {
			b.Fatal(diags)
		}
		if err := weaver.WeaveResolved(ctx, sess, f, rep1); err != nil {
			b.Fatal(err)
		}
		var ts []float64
		for i := 0; i < 7; i++ {
			ts = append(ts, timeLseek())
		}
		if _, err := weaver.Unweave(ctx, sess, []string{"hit"}, false); err != nil {
			b.Fatal(err)
		}
		fmt.Printf("  %-10s  %6.0f  (%s, %s at %s:%d, %s)\n", tier, median(ts)-base, one.Mechanism, one.Function, filepath.Base(one.File), one.Line, fmt.Sprintf("%s.%s %s", one.Access.Struct, one.Access.Member, one.Access.Mode))
	}
	fmt.Printf("  lseek() alone: %.0f\n", base)
}
