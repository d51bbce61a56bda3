package weaver_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/klasy/klasy/weaver"
	"github.com/klasy/klasy/weaver/joinpoint"
	"github.com/klasy/klasy/weaver/records"
	"github.com/klasy/klasy/weaver/target"
)

// fexitSrc is after advice on do_renameat2 (int, five arguments in
// registers): its return value and its first argument, taken at entry.
const fexitSrc = `<aspect>
  <advice>
    <pointcut>execution(do_renameat2) AND argument(olddfd, o)</pointcut>
    <after><![CDATA[STORE_DATA3($retval$, $retval$ < 0, *(int *)o);]]></after>
  </advice>
</aspect>
`

// pipeSrc is after advice on pipe_read, where a reader of an empty pipe
// whose writer never writes blocks for good.
const pipeSrc = `<aspect>
  <advice>
    <pointcut>execution(pipe_read)</pointcut>
    <after>COUNT($retval$);</after>
  </advice>
</aspect>
`

// sleepSrc hooks the entry and the return of hrtimer_nanosleep, where
// the tasks of klasy_prog sleep: the combination that once crashed an
// unweave (the session note of issue 22).
const sleepSrc = `<aspect>
  <advice>
    <pointcut>execution(hrtimer_nanosleep)</pointcut>
    <before>COUNT(1);</before>
  </advice>
  <advice>
    <pointcut>execution(hrtimer_nanosleep)</pointcut>
    <after>COUNT($retval$);</after>
  </advice>
</aspect>
`

func fexitSteps(g *guest, step func(string, func(*guest))) {
	step("fexit/after advice on the direct trampoline: retval and arguments", func(g *guest) {
		rep, err := g.weaveSrc("renames", fexitSrc)
		if err != nil {
			g.t.Fatal(err)
		}
		if rep.Woven() != 1 || rep.JoinPoints[0].Mechanism != records.MechFexit {
			g.t.Fatalf("do_renameat2's return hooked by %q (%d woven), want %q; weave -v says: %s",
				rep.JoinPoints[0].Mechanism, rep.Woven(), records.MechFexit, rep.AfterKretprobesWhy())
		}
		if a := g.statusOf("renames"); a.Fexit != 1 || a.FexitErr != 0 {
			g.t.Errorf("status: fexit=%d fexit_err=%d, want 1, 0", a.Fexit, a.FexitErr)
		}
		// No kretprobe: ftrace calls the trampoline from the site.
		if k := g.run("cat", target.KprobesList); k != g.kprobes {
			g.t.Errorf("kprobes with the after hook woven:\n%s\nbefore:\n%s", k, g.kprobes)
		}
		if ef := g.run("cat", enabledFunctions); !strings.Contains(ef, "direct-->klasy_direct_tramp") {
			g.t.Errorf("enabled_functions has no direct call to klasy_direct_tramp:\n%s", ef)
		}
		// Renaming a directory into itself: -EINVAL from an int function.
		out := g.run("sh", "-c", "mkdir -p /tmp/fx && for i in 1 2 3; do mv /tmp/fx /tmp/fx/in 2>&1; done; rmdir /tmp/fx")
		rs, _, err := g.sess.Drain(g.ctx)
		if err != nil {
			g.t.Fatal(err)
		}
		var got [][]int64
		for _, r := range rs {
			got = append(got, r.Ints())
		}
		want := [][]int64{{-22, 1, -100}, {-22, 1, -100}, {-22, 1, -100}}
		if !slices.EqualFunc(got, want, slices.Equal) {
			g.t.Errorf("do_renameat2's ($retval$, $retval$ < 0, olddfd): %v, want %v (-EINVAL, AT_FDCWD); mv said %q", got, want, out)
		}
		g.unweave("renames")
	})

	step("fexit/unweave while tasks sleep inside the hooked function", func(g *guest) {
		// Four tasks in nanosleep(2) all the time, one 300 ms at a time:
		// each unweave finds tasks inside hrtimer_nanosleep, called from
		// the trampoline, and must wait for them to return.
		pids := strings.Fields(g.run("sh", "-c", fmt.Sprintf("for ms in 7 7 7 300; do %s sleep $ms 100000 >/dev/null 2>&1 </dev/null & echo $!; done", prog)))
		defer g.run("sh", "-c", "kill "+strings.Join(pids, " ")+" 2>/dev/null; true")
		sleepers := func() int {
			alive := g.run("sh", "-c", "for p in "+strings.Join(pids, " ")+"; do kill -0 $p 2>/dev/null && echo $p; done; true")
			return len(strings.Fields(alive))
		}
		if n := sleepers(); n != 4 {
			g.t.Fatalf("%d sleepers started (%q), want 4", n, pids)
		}
		const rounds = 12
		var unweave time.Duration
		for i := 0; i < rounds; i++ {
			rep, err := g.weaveSrc("sleeps", sleepSrc)
			if err != nil {
				g.t.Fatal(err)
			}
			for _, jp := range rep.JoinPoints {
				want := records.MechFtraceOps // beside the trampoline, no kprobe
				if jp.Kind == joinpoint.Kretprobe {
					want = records.MechFexit
				}
				if jp.Mechanism != want {
					g.t.Fatalf("round %d: %s of hrtimer_nanosleep hooked by %q, want %q", i, jp.Timing, jp.Mechanism, want)
				}
			}
			time.Sleep(30 * time.Millisecond)
			for _, h := range g.hooksOf("sleeps") {
				if h.Kind == records.KindKretprobe && h.Hits == 0 {
					g.t.Errorf("round %d: the after advice did not run (status %+v)", i, h)
				}
			}
			start := time.Now()
			g.unweave("sleeps")
			unweave += time.Since(start)
		}
		if n := sleepers(); n != 4 {
			g.t.Errorf("%d sleepers alive after %d unweaves, want 4", n, rounds)
		}
		if d := g.run("dmesg"); len(splats(d)) > 0 {
			g.t.Errorf("the kernel reported after %d unweaves under sleepers:\n%s", rounds, strings.Join(splats(d), "\n"))
		}
		g.t.Logf("%d weave/unweave rounds with 4 tasks asleep in hrtimer_nanosleep: unweave %v on average", rounds, unweave/rounds)
	})

	step("fexit/unweave does not wait for a task blocked in the hooked function", func(g *guest) {
		unweaveBlockedReader(g, true)
	})

	step("fexit/no return missed with more sleepers than a kretprobe's instances", func(g *guest) {
		// The timer test's case (timer_lab_test.go) on the trampoline:
		// no instance to run out of, so every sleep is timed.
		const k, n = 16, 3
		g.weave("agg")
		_, out := g.prog("sleepers", fmt.Sprint(k), "2000", fmt.Sprint(n), "20")
		if c := strings.Count(out, "child "); c != k {
			g.t.Fatalf("klasy_prog sleepers printed %q, want %d children", out, k)
		}
		for _, h := range g.hooksOf("agg") {
			if h.Function == "hrtimer_nanosleep" && h.Kind == records.KindKretprobe && (h.Mech != records.MechFexit || h.Missed != 0) {
				g.t.Errorf("the return of hrtimer_nanosleep: %s, %d missed; want fexit, none", h.Mech, h.Missed)
			}
		}
		st, err := g.sess.Stats(g.ctx)
		if err != nil {
			g.t.Fatal(err)
		}
		m := aggMap(st, records.KindTimer, "sleep")
		if m == nil || m.Timer == nil {
			g.t.Fatalf("no timer sleep in %+v", st)
		}
		if tm := m.Timer; tm.Nested != 0 || tm.Orphaned != 0 || tm.Count != k*n+k {
			g.t.Errorf("timer sleep after %d sleepers, then %d sleeps of each: %+v; want %d timed, none nested or orphaned", k, n, *tm, k*n+k)
		}
		g.unweave("agg")
	})

	step("fexit/rollback takes the direct ops out", func(g *guest) {
		// exc_int3 is noinstr: the kernel refuses its kprobe after the
		// after hook went on the direct ops, and the weave rolls back;
		// checkClean then finds enabled_functions as before.
		g.t.Setenv(weaver.NoPrecheckEnv, "1")
		src := strings.Replace(fexitSrc, "</aspect>", `  <advice>
    <pointcut>execution(exc_int3)</pointcut>
    <before>STORE_DATA(1);</before>
  </advice>
</aspect>`, 1)
		_, err := weaver.Weave(g.ctx, g.sess, mustAspect("rollback.klasy", []byte(src)))
		if err == nil || !strings.Contains(err.Error(), "exc_int3") || !strings.Contains(err.Error(), "nothing was woven") {
			g.t.Fatalf("weave: %v, want the kernel's refusal of exc_int3", err)
		}
		if a := g.aspects(); a != nil {
			g.t.Errorf("aspects after a refused weave: %q", a)
		}
	})
}

// unweaveBlockedReader weaves after advice on pipe_read, blocks a reader
// in it for good and unweaves: unweave returns within seconds and leaves
// no hook, the reader, woken, returns safely, and a later weave works.
// With wantFexit the hook must be on the direct trampoline, which then
// keeps the runtime loaded until the reader returns.
func unweaveBlockedReader(g *guest, wantFexit bool) {
	before := splats(g.run("dmesg")) // a stall at boot under host load, say
	rep, err := g.weaveSrc("pipes", pipeSrc)
	if err != nil {
		g.t.Fatal(err)
	}
	fexit := rep.JoinPoints[0].Mechanism == records.MechFexit
	if wantFexit && !fexit {
		g.t.Fatalf("pipe_read's return hooked by %q, want %q", rep.JoinPoints[0].Mechanism, records.MechFexit)
	}
	held := 0 // a kretprobe holds nothing: its return handler is skipped
	if fexit {
		held = 1
	}
	// cat reads a pipe whose writer, sleep, never writes: cat is in
	// pipe_read, called from the trampoline, until sleep dies.
	pids := strings.Fields(g.run("sh", "-c", "sh -c 'echo $$ >/tmp/writer.pid; exec sleep 100000' | cat >/dev/null & c=$!; sleep 1; echo $c; cat /tmp/writer.pid"))
	if len(pids) != 2 {
		g.t.Fatalf("the blocked reader did not start: %q", pids)
	}
	cat := pids[0]
	if w := strings.TrimSpace(g.run("cat", "/proc/"+cat+"/wchan")); w != "pipe_read" {
		g.t.Fatalf("cat waits in %q, want pipe_read", w)
	}
	ctx, cancel := context.WithTimeout(g.ctx, 60*time.Second)
	defer cancel()
	start := time.Now()
	urep, err := weaver.Unweave(ctx, g.sess, []string{"pipes"}, false)
	took := time.Since(start)
	if err != nil {
		g.t.Fatalf("unweave with cat blocked in pipe_read: %v after %v", err, took)
	}
	if took > 20*time.Second {
		g.t.Errorf("unweave took %v with cat blocked in pipe_read, want seconds", took)
	}
	// No ftrace at all in the debug flavor: no file.
	if ef := g.run("sh", "-c", "cat "+enabledFunctions+" 2>/dev/null; true"); strings.Contains(ef, "klasy_direct_tramp") || strings.Contains(ef, "pipe_read") {
		g.t.Errorf("enabled_functions after the unweave:\n%s", ef)
	}
	if urep.RuntimeRemoved == (held > 0) || urep.RuntimeHeld != held {
		g.t.Errorf("unweave: runtime removed %v, held by %d trampolines; want held by %d", urep.RuntimeRemoved, urep.RuntimeHeld, held)
	}
	if held > 0 {
		if st, err := g.sess.Status(g.ctx); err != nil || st == nil || st.FexitHeld != held {
			g.t.Errorf("status with cat still in pipe_read: %+v, %v; want fexit_held=%d", st, err, held)
		}
	}
	// Its writer gone, cat returns through the trampoline: no advice,
	// the set released, the runtime free to go.
	g.run("sh", "-c", "kill "+strings.Join(pids[1:], " "))
	for i := 0; i < 100 && held != 0; i++ {
		time.Sleep(100 * time.Millisecond)
		st, err := g.sess.Status(g.ctx)
		if err != nil || st == nil {
			g.t.Fatalf("status: %v, %v", st, err)
		}
		held = st.FexitHeld
	}
	if held != 0 {
		g.t.Errorf("fexit_held=%d 10 s after cat returned, want 0", held)
	}
	// Gone, or a zombie of the guest's init: not in pipe_read.
	if st := g.run("sh", "-c", "cat /proc/"+cat+"/stat 2>/dev/null; true"); st != "" && !strings.Contains(st, ") Z ") {
		g.t.Errorf("cat still running after its writer died: %q", st)
	}
	d := g.run("dmesg")
	if s := slices.DeleteFunc(splats(d), func(l string) bool { return slices.Contains(before, l) }); len(s) > 0 {
		g.t.Errorf("the kernel reported after cat returned through an unwoven trampoline:\n%s\n--- dmesg (last lines) ---\n%s", strings.Join(s, "\n"), tail(d, 60))
	}
	// A later weave works, and its unweave takes the runtime out.
	if _, err := g.weaveSrc("pipes", pipeSrc); err != nil {
		g.t.Fatalf("weave again: %v", err)
	}
	g.run("sh", "-c", "echo x | cat >/dev/null")
	if h := g.hooksOf("pipes"); len(h) != 1 || h[0].Hits == 0 {
		g.t.Errorf("after advice of the second weave did not run: %+v", h)
	}
	if rep := g.unweave("pipes"); !rep.RuntimeRemoved {
		g.t.Errorf("the last unweave kept the runtime: %+v", rep)
	}
	g.t.Logf("unweave with a task blocked in pipe_read (%s) took %v", rep.JoinPoints[0].Mechanism, took)
}

// kretprobesOnly loads the runtime with an aspect of its own and sets its
// fexit parameter to 0: after hooks woven next are kretprobes, as on a
// kernel without direct calls. Call the func it returns to unweave it.
func (g *guest) kretprobesOnly() func() {
	g.t.Helper()
	if _, err := g.weaveSrc("kretprobes_only", "<aspect><advice><pointcut>execution(vfs_mkdir)</pointcut><before>;</before></advice></aspect>\n"); err != nil {
		g.t.Fatal(err)
	}
	g.run("sh", "-c", "echo 0 > /sys/module/klasy_runtime/parameters/fexit")
	return func() { g.unweave("kretprobes_only") }
}
