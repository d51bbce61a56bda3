package weaver_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/klasy/klasy/lab"
	"github.com/klasy/klasy/lab/labboot"
	"github.com/klasy/klasy/weaver"
	"github.com/klasy/klasy/weaver/records"
	"github.com/klasy/klasy/weaver/target"
)

// TestTracepointInLab weaves advice on the kernel's sched_process_fork
// tracepoint and checks its records against the children the program
// forked: the event's typed arguments by their names, the mechanism in
// status, and the kernel as before after the unweave. A tracepoint that
// does not exist is refused with the nearest names, nothing loaded.
func TestTracepointInLab(t *testing.T) {
	l := labboot.Boot(t, lab.Config{Name: labboot.Name("tracepoint"), Kernel: lab.Debian})
	labboot.Install(t, l, prog, labboot.StaticProgram(t, "testdata/prog/klasy_prog.c"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	sess, err := weaver.OpenSession(ctx, weaver.SessionOptions{TargetOptions: target.TargetOptions{Lab: l.Name()}})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	g := &guest{t: t, l: l, ctx: ctx, sess: sess}
	g.modules, g.kprobes, g.ftrace = g.kernelState()

	src, err := os.ReadFile("testdata/fork_tp_typo.klasy")
	if err != nil {
		t.Fatal(err)
	}
	_, err = weaver.Weave(ctx, sess, mustAspect("testdata/fork_tp_typo.klasy", src))
	if err == nil || !strings.Contains(err.Error(), "did you mean sched:sched_process_fork") {
		t.Errorf("weaving tracepoint(sched:sched_proces_fork): %v, want an error suggesting sched:sched_process_fork", err)
	}
	g.checkClean()

	rep := g.weave("fork_tp")
	if len(rep.JoinPoints) != 1 || rep.JoinPoints[0].Mechanism != records.MechTracepoint {
		t.Fatalf("join points %+v, want one on the tracepoint with mechanism %q", rep.JoinPoints, records.MechTracepoint)
	}
	pid, out := g.prog("fork", "3")
	var children []int64
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		c, err := strconv.Atoi(strings.TrimPrefix(line, "child "))
		if err != nil {
			t.Fatalf("klasy_prog fork printed %q", out)
		}
		children = append(children, int64(c))
	}
	rs := g.recordsOf(pid)
	var got []int64
	for _, r := range rs {
		if len(r.Values) != 2 || r.Values[0].Int != int64(pid) {
			t.Errorf("record %+v: want values [%d child]", r, pid)
			continue
		}
		got = append(got, r.Values[1].Int)
		if r.Function != "sched:sched_process_fork" {
			t.Errorf("record from %q, want sched:sched_process_fork", r.Function)
		}
	}
	if !slices.Equal(got, children) {
		t.Errorf("children in the records %v, the program forked %v", got, children)
	}
	st, err := sess.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var status []string
	for _, a := range st.Aspects {
		for _, h := range a.Hooks {
			status = append(status, fmt.Sprintf("%s kind=%s mech=%s hits=%d", a.Name, h.Kind, h.Mech, h.Hits))
			if a.Name == "fork_tp" && (h.Kind != records.KindTracepoint || h.Mech != records.MechTracepoint || h.Hits < 3) {
				t.Errorf("status of the hook: kind=%s mech=%s hits=%d, want kind and mech tracepoint, at least 3 hits", h.Kind, h.Mech, h.Hits)
			}
		}
	}
	t.Logf("status: %s", strings.Join(status, "; "))
	g.unweave("fork_tp")
	g.checkClean()
}
