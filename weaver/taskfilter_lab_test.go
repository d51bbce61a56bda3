package weaver_test

import (
	"context"
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
	"github.com/klasy/klasy/weaver/taskfilter"
)

// TestTaskFilterInLab checks the filters done in the kernel against what
// the test's own processes did: klasy's agent (the process serving the
// weave, all its threads) is left out of every join point unless
// IncludeSelf, while the commands it runs are not; --pid keeps one
// thread group, --comm one command.
func TestTaskFilterInLab(t *testing.T) {
	l := labboot.Boot(t, lab.Config{Name: labboot.Name("taskfilter"), Kernel: lab.Debian})
	labboot.Install(t, l, prog, labboot.StaticProgram(t, "testdata/prog/klasy_prog.c"))
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	sess, err := weaver.OpenSession(ctx, weaver.SessionOptions{TargetOptions: target.TargetOptions{Lab: l.Name()}})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	g := &guest{t: t, l: l, ctx: ctx, sess: sess}
	g.modules, g.kprobes, g.ftrace = g.kernelState()
	agent, err := taskfilter.Self(ctx, sess.T.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	// The agent's threads, by pid: records carry the thread's.
	threads := map[int]bool{}
	for _, f := range strings.Fields(g.run("ls", "/proc/"+strconv.Itoa(agent)+"/task")) {
		n, _ := strconv.Atoi(f)
		threads[n] = true
	}
	if !threads[agent] {
		t.Fatalf("agent %d: its threads %v lack itself", agent, threads)
	}
	// agentRecords weaves every read(2), runs a program that reads,
	// drains (the agent reads the records file for that) and counts the
	// records of the agent's threads and of the program.
	agentRecords := func(t *testing.T, includeSelf bool) (fromAgent, fromProg int) {
		g := *g
		g.t = t
		g.sess.BufferKB = 2048
		g.sess.Tasks = taskfilter.Filter{IncludeSelf: includeSelf}
		defer func() { g.sess.BufferKB, g.sess.Tasks = 0, taskfilter.Filter{} }()
		g.weave("readself")
		pid, _ := g.prog("cat", "/proc/self/stat")
		var rs []records.TraceRecord
		for i := 0; i < 3; i++ { // each drain reads: records of the one before
			more, _, err := g.sess.Drain(g.ctx)
			if err != nil {
				t.Fatal(err)
			}
			rs = append(rs, more...)
		}
		g.unweave("readself")
		g.checkClean()
		for _, r := range rs {
			if threads[r.PID] {
				fromAgent++
			}
			if r.PID == pid {
				fromProg++
			}
		}
		return fromAgent, fromProg
	}
	t.Run("agent left out", func(t *testing.T) {
		fromAgent, fromProg := agentRecords(t, false)
		t.Logf("%d records of the agent's threads, %d of the program", fromAgent, fromProg)
		if fromAgent != 0 || fromProg == 0 {
			t.Errorf("%d records from the agent (pid %d), %d from the program it ran: want none from the agent, some from the program", fromAgent, agent, fromProg)
		}
	})
	t.Run("include self", func(t *testing.T) {
		fromAgent, fromProg := agentRecords(t, true)
		t.Logf("%d records of the agent's threads, %d of the program", fromAgent, fromProg)
		if fromAgent == 0 || fromProg == 0 {
			t.Errorf("%d records from the agent, %d from the program: with IncludeSelf want both", fromAgent, fromProg)
		}
	})

	t.Run("pid", func(t *testing.T) {
		g := *g
		g.t = t
		// A process that waits for a file, then calls getppid 9 times.
		const gate = "/tmp/klasy-pid-gate"
		out := g.run("sh", "-c", "sh -c 'while [ ! -e "+gate+" ]; do sleep 0.1; done; exec "+prog+" getppid 9' >/dev/null 2>&1 & echo $!")
		bg, err := strconv.Atoi(strings.TrimSpace(out))
		if err != nil {
			t.Fatalf("background pid %q", out)
		}
		g.sess.Tasks = taskfilter.Filter{PID: bg}
		defer func() { g.sess.Tasks = taskfilter.Filter{} }()
		g.weave("getppid")
		other, _ := g.prog("getppid", "5")
		g.run("touch", gate)
		deadline := time.Now().Add(time.Minute)
		for g.run("sh", "-c", "kill -0 "+strconv.Itoa(bg)+" 2>/dev/null && echo alive || true") != "" && time.Now().Before(deadline) {
			time.Sleep(200 * time.Millisecond)
		}
		g.run("rm", "-f", gate)
		rs, _, err := g.sess.Drain(g.ctx)
		if err != nil {
			t.Fatal(err)
		}
		g.unweave("getppid")
		g.checkClean()
		var pids []int
		for _, r := range rs {
			pids = append(pids, r.PID)
		}
		if len(rs) != 9 || slices.ContainsFunc(pids, func(p int) bool { return p != bg }) {
			t.Errorf("records from pids %v, want 9 from %d (--pid) and none from %d", pids, bg, other)
		}
	})

	t.Run("comm", func(t *testing.T) {
		g := *g
		g.t = t
		g.sess.Tasks = taskfilter.Filter{Comm: "klasy_prog"}
		defer func() { g.sess.Tasks = taskfilter.Filter{} }()
		g.weave("getppid")
		pid, _ := g.prog("getppid", "5")
		g.run("sh", "-c", "for i in 1 2 3; do cat /proc/self/stat >/dev/null; done")
		rs, _, err := g.sess.Drain(g.ctx)
		if err != nil {
			t.Fatal(err)
		}
		g.unweave("getppid")
		g.checkClean()
		n := 0
		for _, r := range rs {
			if r.Comm != "klasy_prog" {
				t.Errorf("record of %s (pid %d) with --comm klasy_prog", r.Comm, r.PID)
			}
			if r.PID == pid {
				n++
			}
		}
		if n != 5 {
			t.Errorf("%d records of klasy_prog (pid %d), want 5 (its getppid calls)", n, pid)
		}
	})
}
