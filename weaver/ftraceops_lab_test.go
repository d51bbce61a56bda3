package weaver_test

import (
	"fmt"
	"strings"

	"github.com/klasy/klasy/pattern"
	"github.com/klasy/klasy/weaver"
	"github.com/klasy/klasy/weaver/records"
	"github.com/klasy/klasy/weaver/target"
)

// entryFunctions returns up to n functions with one out-of-line body and
// no inlined copy whose execution join point the resolver weaves: n
// entry hooks at ftrace sites.
func (g *guest) entryFunctions(n int) []string {
	g.t.Helper()
	var names []string
	for _, p := range []string{"vfs_%", "do_%", "sys_%"} {
		pat, err := pattern.Compile(p, pattern.Pointcut)
		if err != nil {
			g.t.Fatal(err)
		}
		for _, fi := range g.sess.X.MatchFuncs(pat) {
			if !fi.InlineOnly && fi.Inlined == 0 && fi.External && len(g.sess.X.Funcs(fi.Name)) == 1 {
				names = append(names, "execution("+fi.Name+")")
			}
		}
	}
	var picked []string
	for len(picked) < n && len(names) > 0 {
		k := min(len(names), n-len(picked))
		src := "<aspect><advice><pointcut>" + strings.Join(names[:k], " OR ") + "</pointcut><before>STORE_DATA(1);</before></advice></aspect>\n"
		names = names[k:]
		_, rep, err := weaver.Plan(g.sess, mustAspect("try.klasy", []byte(src)))
		if err != nil {
			g.t.Fatal(err)
		}
		for _, jp := range rep.JoinPoints {
			if jp.Skipped == "" && jp.InlinedIn == "" {
				picked = append(picked, jp.Function)
			}
		}
	}
	return picked
}

// statusOf is the status of the aspect named name.
func (g *guest) statusOf(name string) records.Aspect {
	g.t.Helper()
	st, err := g.sess.Status(g.ctx)
	if err != nil || st == nil {
		g.t.Fatalf("status: %v, %v", st, err)
	}
	for _, a := range st.Aspects {
		if a.Name == name {
			return a
		}
	}
	g.t.Fatalf("no aspect %s in status %+v", name, st.Aspects)
	return records.Aspect{}
}

func ftraceOpsSteps(g *guest, step func(string, func(*guest))) {
	step("ftrace-ops/entry hooks on one ftrace_ops, no kprobe", func(g *guest) {
		const n = 60
		fns := g.entryFunctions(n)
		if len(fns) < n {
			g.t.Fatalf("only %d functions to weave", len(fns))
		}
		var pcs []string
		for _, f := range fns {
			pcs = append(pcs, "execution("+f+")")
		}
		src := "<aspect><advice><pointcut>" + strings.Join(pcs, " OR ") + "</pointcut><before>STORE_DATA(1);</before></advice></aspect>\n"
		rep, err := weaver.Weave(g.ctx, g.sess, mustAspect("entries.klasy", []byte(src)))
		if err != nil {
			g.t.Fatal(err)
		}
		for _, jp := range rep.JoinPoints {
			if jp.Skipped == "" && jp.Mechanism != records.MechFtraceOps {
				g.t.Errorf("%s: hooked by %q, want %q", jp.Where(), jp.Mechanism, records.MechFtraceOps)
			}
		}
		a := g.statusOf("entries")
		if a.Ops != rep.Woven() || a.OpsErr != 0 {
			g.t.Errorf("status: %d of %d hooks on the ftrace_ops, ops_err %d; want all, 0", a.Ops, rep.Woven(), a.OpsErr)
		}
		// No kprobe was registered; ftrace calls out from each entry.
		if k := g.run("cat", target.KprobesList); k != g.kprobes {
			g.t.Errorf("kprobes with %d entry hooks woven:\n%s\nbefore:\n%s", rep.Woven(), k, g.kprobes)
		}
		ef := g.run("cat", enabledFunctions)
		for _, f := range fns {
			if !strings.Contains(ef, "\n"+f+" (") && !strings.HasPrefix(ef, f+" (") {
				g.t.Errorf("%s is not in ftrace's enabled_functions", f)
			}
		}
		g.t.Logf("%d entry hooks registered in %v (one ftrace update)", rep.Woven(), a.Register)
		g.run("ls", "-lR", "/proc/self/")
		var hits uint64
		for _, h := range g.statusOf("entries").Hooks {
			hits += h.Hits
		}
		if hits == 0 {
			g.t.Errorf("no hook of %d was hit after ls -lR", len(fns))
		}
		if rs, _, err := g.sess.Drain(g.ctx); err != nil || len(rs) == 0 {
			g.t.Errorf("records after ls -lR: %d, %v", len(rs), err)
		}
		g.unweave("entries")
	})

	step("ftrace-ops/a hook hit inside advice is counted as missed", func(g *guest) {
		// kstrdup's entry is hit inside getppid's advice, on the
		// same CPU in the same context: the runtime's guard
		// (klasy_enter's busy flag) refuses it, and status counts
		// each refusal as missed, where kprobes' ftrace handler drops
		// what its recursion lock refuses without counting.
		src := `<aspect>
  <advice>
    <pointcut>execution(__do_sys_getppid)</pointcut>
    <before>char *p = kstrdup("7", GFP_ATOMIC); if (p) { STORE_DATA(p[0] - '0'); kfree(p); }</before>
  </advice>
  <advice>
    <pointcut>execution(kstrdup)</pointcut>
    <before>STORE_DATA(1);</before>
  </advice>
</aspect>
`
		if _, err := weaver.Weave(g.ctx, g.sess, mustAspect("nested.klasy", []byte(src))); err != nil {
			g.t.Fatal(err)
		}
		const calls = 200
		pid, _ := g.prog("getppid", fmt.Sprint(calls))
		var getppid, kstrdup *records.Hook
		hs := g.statusOf("nested").Hooks
		for i := range hs {
			switch {
			case hs[i].Function == "__do_sys_getppid":
				getppid = &hs[i]
			case hs[i].Function == "kstrdup" && hs[i].InlinedIn == "":
				kstrdup = &hs[i]
			}
		}
		if getppid == nil || kstrdup == nil {
			g.t.Fatalf("status hooks %+v: want getppid's and kstrdup's entries", hs)
		}
		if getppid.Mech != records.MechFtraceOps || kstrdup.Mech != records.MechFtraceOps {
			g.t.Errorf("mechanisms: getppid %s, kstrdup %s; want %s", getppid.Mech, kstrdup.Mech, records.MechFtraceOps)
		}
		if getppid.Hits < calls || kstrdup.Missed < calls {
			g.t.Errorf("getppid's entry %d hits, kstrdup's %d missed after %d getppid calls; want at least %d each", getppid.Hits, kstrdup.Missed, calls, calls)
		}
		// The advice ran whole each time: kstrdup returned its copy.
		seven := 0
		for _, r := range g.recordsOf(pid) {
			if r.Advice == 1 && len(r.Values) == 1 && r.Values[0].Int == 7 {
				seven++
			}
		}
		if seven != calls {
			g.t.Errorf("records of pid %d: %d of getppid's advice with 7, want %d", pid, seven, calls)
		}
		g.unweave("nested")
	})

	step("ftrace-ops/kprobes when the runtime loads with ftrace_ops=0, said by weave -v", func(g *guest) {
		g.sess.KprobesOnly = true
		defer func() { g.sess.KprobesOnly = false }()
		rep := g.weave("mshow")
		if len(rep.JoinPoints) != 1 || rep.JoinPoints[0].Mechanism != records.MechFtrace {
			g.t.Fatalf("join points %+v, want m_show's entry as a kprobe on ftrace", rep.JoinPoints)
		}
		if a := g.statusOf("mshow"); a.Ops != 0 {
			g.t.Errorf("status: %d hooks on the ftrace_ops, want none", a.Ops)
		}
		if why := rep.EntryKprobesWhy(); why != "the runtime was loaded with ftrace_ops=0" {
			g.t.Errorf("why the entry hook is a kprobe (weave -v): %q", why)
		}
		pid, mounts := g.prog("cat", "/proc/self/mounts")
		if rs := g.recordsOf(pid); len(rs) != strings.Count(mounts, "\n") {
			g.t.Errorf("%d records for %d lines of /proc/self/mounts", len(rs), strings.Count(mounts, "\n"))
		}
		g.unweave("mshow")
	})
}
