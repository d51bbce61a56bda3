package weaver_test

// Module addresses woven for real, in the built lab kernel: a module of
// the test's own (testdata/statcounter) keeps its counter in a static
// struct, and GCC, which sees stat_bump called only with its address,
// makes that address a constant in stat_bump. target() there is the
// static's address: the module's .data as loaded plus the static's
// offset. And a module reloaded between generating an aspect and
// loading it has moved: the runtime must refuse the weave, naming it.

import (
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/klasy/klasy/aspect"
	"github.com/klasy/klasy/kmod"
	"github.com/klasy/klasy/lab"
	"github.com/klasy/klasy/lab/labboot"
	"github.com/klasy/klasy/weaver"
	"github.com/klasy/klasy/weaver/target"
)

const statParam = "/sys/module/klasy_stat/parameters/bump"

func TestModuleAddressesInLab(t *testing.T) {
	l := labboot.Boot(t, lab.Config{Name: labboot.Name("modaddr"), Kernel: lab.Built})
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	dir := t.TempDir()
	ko, image := pluginModule(t, l.Kernel(), dir, "statcounter", "klasy_stat")
	_, filler := counterModule(t, l.Kernel(), dir)
	if _, err := kmod.Load(ctx, l.Client(), image, ""); err != nil {
		t.Fatal(err)
	}
	open := func(t *testing.T) *weaver.Session {
		sess, err := weaver.OpenSession(ctx, weaver.SessionOptions{TargetOptions: target.TargetOptions{Lab: l.Name(), Modules: []string{ko}}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sess.Close() })
		return sess
	}
	g := &guest{t: t, l: l, ctx: ctx, sess: open(t)}
	g.modules, g.kprobes, g.ftrace = g.kernelState()

	// bumps adds each of by to the counter and checks what the advice
	// read through target() before and after each addition, from the
	// value the module held first.
	bumps := func(g *guest, from int64, by ...int64) {
		t := g.t
		for _, n := range by {
			g.run("sh", "-c", "echo "+strconv.FormatInt(n, 10)+" > "+statParam)
		}
		var before, after, added [][]int64
		want := [3][][]int64{}
		v := from
		for _, n := range by {
			want[0] = append(want[0], []int64{v})
			v += n
			want[1] = append(want[1], []int64{v})
			want[2] = append(want[2], []int64{n})
		}
		if got, wantParam := strings.TrimSpace(g.run("cat", statParam)), strconv.FormatInt(v, 10); !strings.HasPrefix(got, wantParam+" ") {
			t.Errorf("%s reads %q, want the value %s first", statParam, got, wantParam)
		}
		rs, _, err := g.sess.Drain(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			switch {
			case r.Function == "stat_bump" && r.Advice == 1:
				before = append(before, r.Ints())
			case r.Function == "stat_bump" && r.Advice == 2:
				after = append(after, r.Ints())
			case r.Function == "stat_bump" && r.Advice == 3:
				added = append(added, r.Ints())
			default:
				t.Errorf("unexpected record %+v", r)
			}
		}
		if !slices.EqualFunc(before, want[0], slices.Equal) {
			t.Errorf("before advice read %v through target(s), the module held %v", before, want[0])
		}
		if !slices.EqualFunc(after, want[1], slices.Equal) {
			t.Errorf("after advice read %v through target(s), the module held %v", after, want[1])
		}
		if !slices.EqualFunc(added, want[2], slices.Equal) {
			t.Errorf("execution(stat_bump) recorded %v, want %v (its argument by)", added, want[2])
		}
	}

	t.Run("static struct as target", func(t *testing.T) {
		g := *g
		g.t = t
		rep := g.weave("statcounter/stat")
		woven := true
		defer func() {
			if woven { // a failure above: the next test needs the kernel as it was
				weaver.Unweave(ctx, g.sess, []string{"stat"}, false)
			}
		}()
		if len(rep.JoinPoints) != 3 {
			t.Fatalf("%d join points, want stat_bump's access before and after and its entry: %+v", len(rep.JoinPoints), rep.JoinPoints)
		}
		for _, jp := range rep.JoinPoints {
			if jp.Skipped != "" || jp.Module != "klasy_stat" || jp.Function != "stat_bump" || len(jp.Args) != 1 || jp.Args[0].Value == nil {
				t.Fatalf("%s: skipped %q, module %q, args %+v", jp.Where(), jp.Skipped, jp.Module, jp.Args)
			}
		}
		bumps(&g, 100, 3, 4, 5)
		g.unweave("stat")
		woven = false
		g.checkClean()
	})

	t.Run("module reloaded after generate", func(t *testing.T) {
		g := *g
		g.t = t
		f, rep, err := weaver.Plan(g.sess, aspectFile(t, "testdata/statcounter/stat.klasy"))
		if err != nil {
			t.Fatal(err)
		}
		p, err := weaver.Prepare(ctx, g.sess, f, rep)
		if err != nil {
			t.Fatal(err)
		}
		// Reload the module with another module loaded in between, which
		// takes the space it had: it comes back elsewhere.
		text := func() string { return strings.TrimSpace(g.run("cat", "/sys/module/klasy_stat/sections/.text")) }
		old := text()
		if err := kmod.Unload(ctx, l.Client(), "klasy_stat"); err != nil {
			t.Fatal(err)
		}
		if _, err := kmod.Load(ctx, l.Client(), filler, ""); err != nil {
			t.Fatal(err)
		}
		if _, err := kmod.Load(ctx, l.Client(), image, ""); err != nil {
			t.Fatal(err)
		}
		now := text()
		if now == old {
			t.Fatalf("klasy_stat reloaded at the same address %s: the test needs it moved", now)
		}
		t.Logf("klasy_stat's .text moved from %s to %s", old, now)
		g.modules, g.kprobes, g.ftrace = g.kernelState()
		err = p.Load(ctx)
		if err == nil {
			t.Fatal("the advice module generated for the old load of klasy_stat was loaded")
		}
		t.Logf("load refused: %v", err)
		for _, want := range []string{"module klasy_stat was reloaded in ", "since the aspect was generated", "stat_bump", "weave again", "nothing was woven"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q lacks %q", err, want)
			}
		}
		g.checkClean()

		// Woven again, the aspect reads the module as it is now loaded.
		g.sess = open(t)
		g.weave("statcounter/stat")
		bumps(&g, 100, 6)
		g.unweave("stat")
		g.checkClean()
	})
}

func aspectFile(t *testing.T, path string) *aspect.File {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return mustAspect(path, src)
}
