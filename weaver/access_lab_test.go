package weaver_test

// Access join points woven for real: in the built lab kernel (Debian's
// linux-source-6.1 compiled with the klasy plugin) itself, where lseek(2)
// moves a file's position through vfs_setpos, and into a small module
// of the test's own, built with the plugin against that kernel's tree
// and loaded there (testdata/counter). Each write of N to its bump
// parameter adds N to a counter; access(klasy_counter.value) AND
// target(c) must record the counter before and after each addition, and
// the hooks' hit counts must be the writes made.

import (
	"bytes"
	"context"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/klasy/klasy/internal/testenv"
	"github.com/klasy/klasy/kbuild"
	"github.com/klasy/klasy/kmod"
	"github.com/klasy/klasy/lab"
	"github.com/klasy/klasy/lab/labboot"
	"github.com/klasy/klasy/weaver"
	"github.com/klasy/klasy/weaver/joinpoint"
	"github.com/klasy/klasy/weaver/target"
)

const (
	bumpParam = "/sys/module/klasy_counter/parameters/bump"
	spanParam = "/sys/module/klasy_counter/parameters/span"
)

// counterModule builds testdata/counter with the plugin against the
// lab kernel's tree and writes the .ko into dir.
func counterModule(t *testing.T, k lab.Kernel, dir string) (string, []byte) {
	return pluginModule(t, k, dir, "counter", "klasy_counter")
}

// pluginModule builds the module name from testdata/src with the plugin
// against the lab kernel's tree and writes the .ko into dir.
func pluginModule(t *testing.T, k lab.Kernel, dir, src, name string) (string, []byte) {
	t.Helper()
	so, err := filepath.Abs("../gcc-patches/klasy.so")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(so); err != nil {
		testenv.Need(t, "plugin", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := kbuild.Build(ctx, k.BuildDir, os.DirFS(filepath.Join("testdata", src)), kbuild.Options{CFLAGS: []string{"-fplugin=" + so}})
	if err != nil {
		t.Fatalf("building %s with the plugin against %s: %v", name, k.BuildDir, err)
	}
	if len(res.Modules) != 1 || res.Modules[0].Name != name {
		t.Fatalf("kbuild made %+v", res.Modules)
	}
	ko := filepath.Join(dir, name+".ko")
	if err := os.WriteFile(ko, res.Modules[0].Image, 0o644); err != nil {
		t.Fatal(err)
	}
	return ko, res.Modules[0].Image
}

// TestInferredModuleAccessInLab: the same module built without the
// plugin against Debian's own kernel headers, loaded into Debian's
// kernel: its accesses are inferred from its DWARF and its code,
// relocated at the module's layout, and woven with target() bound, as
// the plugin's records are in TestAccessInLab.
func TestInferredModuleAccessInLab(t *testing.T) {
	l := labboot.Boot(t, lab.Config{Name: labboot.Name("infermod"), Kernel: lab.Debian})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	res, err := kbuild.Build(ctx, l.Kernel().BuildDir, os.DirFS("testdata/counter"), kbuild.Options{})
	if err != nil {
		t.Fatalf("building klasy_counter against %s: %v", l.Kernel().BuildDir, err)
	}
	if len(res.Modules) != 1 {
		t.Fatalf("kbuild made %+v", res.Modules)
	}
	ko := filepath.Join(t.TempDir(), "klasy_counter.ko")
	if err := os.WriteFile(ko, res.Modules[0].Image, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := kmod.Load(ctx, l.Client(), res.Modules[0].Image, ""); err != nil {
		t.Fatal(err)
	}
	sess, err := weaver.OpenSession(ctx, weaver.SessionOptions{TargetOptions: target.TargetOptions{Lab: l.Name(), Modules: []string{ko}}})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	g := &guest{t: t, l: l, ctx: ctx, sess: sess}
	g.modules, g.kprobes, g.ftrace = g.kernelState()
	g.counterBumps(true)
}

func TestAccessInLab(t *testing.T) {
	l := labboot.Boot(t, lab.Config{Name: labboot.Name("access"), Kernel: lab.Built})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	ko, image := counterModule(t, l.Kernel(), t.TempDir())
	if _, err := kmod.Load(ctx, l.Client(), image, ""); err != nil {
		t.Fatal(err)
	}
	sess, err := weaver.OpenSession(ctx, weaver.SessionOptions{TargetOptions: target.TargetOptions{Lab: l.Name(), Modules: []string{ko}}})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	g := &guest{t: t, l: l, ctx: ctx, sess: sess}
	labboot.Install(t, l, prog, labboot.StaticProgram(t, "testdata/prog/klasy_prog.c"))
	g.modules, g.kprobes, g.ftrace = g.kernelState()

	t.Run("kernel file position", func(t *testing.T) {
		g := *g
		g.t = t
		rep := g.weave("fpos")
		lines := map[string]int{}
		for _, jp := range rep.JoinPoints {
			if jp.Skipped != "" || jp.Module != "" {
				t.Errorf("%s: skipped %q, module %q", jp.Where(), jp.Skipped, jp.Module)
			}
			lines[jp.Access.Mode] = jp.Line
		}
		if lines["read"] == 0 || lines["write"] == 0 || lines["read"] == lines["write"] {
			t.Fatalf("vfs_setpos's read and write of f_pos at lines %v", lines)
		}
		g.run("sh", "-c", "echo 0123456789abcdef > /tmp/klasy_seek")
		pid, _ := g.prog("lseek", "/tmp/klasy_seek", "5", "9", "2")
		var read, written []int64
		for _, r := range g.recordsOf(pid) {
			if len(r.Values) != 1 {
				t.Fatalf("record %+v", r)
			}
			switch r.Line {
			case lines["read"]:
				read = append(read, r.Values[0].Int)
			case lines["write"]:
				written = append(written, r.Values[0].Int)
			}
		}
		// if (offset != file->f_pos) { file->f_pos = offset; ... }: the
		// position compared is the last one set, the one set the offset.
		if want := []int64{0, 5, 9}; !slices.Equal(read, want) {
			t.Errorf("after reads of f_pos: %v, want %v", read, want)
		}
		if want := []int64{5, 9, 2}; !slices.Equal(written, want) {
			t.Errorf("after writes of f_pos: %v, want %v", written, want)
		}
		g.unweave("fpos")
		g.checkClean()
	})

	t.Run("kernel file position, writes only", func(t *testing.T) {
		g := *g
		g.t = t
		writesOnly(&g)
		g.checkClean()
	})

	t.Run("module counter", func(t *testing.T) {
		g := *g
		g.t = t
		g.counterBumps(false)
	})

	t.Run("module line overwriting its base, after advice", func(t *testing.T) {
		g := *g
		g.t = t
		g.spanAfter()
	})

	t.Run("module of another build", func(t *testing.T) {
		// The same module with another build-id in the file.
		other := bytes.Clone(image)
		id, _ := hex.DecodeString(sess.Modules[0].X.BuildID)
		i := bytes.Index(other, id)
		if len(id) == 0 || i < 0 {
			t.Fatalf("build-id %x not found in the .ko", id)
		}
		other[i] ^= 0xff
		p := filepath.Join(t.TempDir(), "klasy_counter.ko")
		if err := os.WriteFile(p, other, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := weaver.OpenSession(ctx, weaver.SessionOptions{TargetOptions: target.TargetOptions{Lab: l.Name(), Modules: []string{p}}})
		if err == nil || !strings.Contains(err.Error(), "give the .ko that was loaded") {
			t.Errorf("OpenSession with another build of the module: %v", err)
		}
	})

	t.Run("module not loaded", func(t *testing.T) {
		if err := kmod.Unload(ctx, l.Client(), "klasy_counter"); err != nil {
			t.Fatal(err)
		}
		_, err := weaver.OpenSession(ctx, weaver.SessionOptions{TargetOptions: target.TargetOptions{Lab: l.Name(), Modules: []string{ko}}})
		if err == nil || !strings.Contains(err.Error(), "module klasy_counter is not loaded in lab") {
			t.Errorf("OpenSession with a module not loaded: %v", err)
		}
	})
}

// counterBumps weaves testdata/counter into klasy_counter, loaded in the
// guest, bumps the counter by 3, 4 and 5 and checks what the access and
// execution advice recorded and the hooks' hit counts. inferred: the
// module was built without the plugin, its accesses inferred.
func (g *guest) counterBumps(inferred bool) {
	t, ctx, sess := g.t, g.ctx, g.sess
	rep := g.weave("counter/counter")
	var bump []*joinpoint.JoinPoint
	for _, jp := range rep.JoinPoints {
		if jp.Skipped != "" {
			t.Errorf("%s skipped: %s", jp.Where(), jp.Skipped)
		}
		if jp.Module != "klasy_counter" {
			t.Errorf("%s: module %q, want klasy_counter", jp.Where(), jp.Module)
		}
		if jp.Access != nil && jp.Access.Inferred != inferred {
			t.Errorf("%s: inferred %v, want %v", jp.Where(), jp.Access.Inferred, inferred)
		}
		if jp.Function == "counter_bump" && jp.Access != nil {
			bump = append(bump, jp)
			if !jp.Exact {
				t.Errorf("%s: not exact; counter_bump's c->value += by is one add to memory", jp.Where())
			}
		}
	}
	if len(bump) != 2 {
		t.Fatalf("join points in counter_bump: %d, want a before and an after: %+v", len(bump), rep.JoinPoints)
	}
	adds := []int{3, 4, 5}
	for _, n := range adds {
		g.run("sh", "-c", "echo "+strconv.Itoa(n)+" > "+bumpParam)
	}
	if got := strings.TrimSpace(g.run("cat", bumpParam)); got != "12 3" {
		t.Errorf("%s reads %q, want \"12 3\"", bumpParam, got)
	}
	rs, st, err := sess.Drain(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var before, after, by [][]int64
	gets := 0
	for _, r := range rs {
		switch {
		case r.Function == "counter_bump" && r.Advice == 3:
			by = append(by, r.Ints())
		case r.Function == "counter_bump" && r.Advice == 1:
			before = append(before, r.Ints())
		case r.Function == "counter_bump" && r.Advice == 2:
			after = append(after, r.Ints())
		case r.Function == "bump_get":
			gets++
			if !slices.Equal(r.Ints(), []int64{12}) {
				t.Errorf("bump_get: advice %d recorded %v, want [12]", r.Advice, r.Values)
			}
		default:
			t.Errorf("unexpected record %+v", r)
		}
	}
	// Before each addition the counter is the sum so far, after it
	// the sum with it: the written value is visible after advice.
	if want := [][]int64{{0}, {3}, {7}}; !slices.EqualFunc(before, want, slices.Equal) {
		t.Errorf("before advice recorded %v, want %v", before, want)
	}
	if want := [][]int64{{3}, {7}, {12}}; !slices.EqualFunc(after, want, slices.Equal) {
		t.Errorf("after advice recorded %v, want %v", after, want)
	}
	if want := [][]int64{{3}, {4}, {5}}; !slices.EqualFunc(by, want, slices.Equal) {
		t.Errorf("execution(counter_bump) recorded %v, want %v (its argument by)", by, want)
	}
	if gets != 2 {
		t.Errorf("%d records from bump_get, want 2 (one read of the parameter, before and after)", gets)
	}
	// Hit counts: each hook ran once per write, or per read.
	for _, a := range st.Aspects {
		for _, h := range a.Hooks {
			want := uint64(len(adds))
			if h.Function == "bump_get" {
				want = 1
			}
			if h.Hits != want || h.Module != "klasy_counter" {
				t.Errorf("hook %s %s [%s]: %d hits, want %d", h.Kind, h.Function, h.Module, h.Hits, want)
			}
		}
	}
	g.unweave("counter")
	g.checkClean()
}

// spanAfter weaves testdata/counter/span: after advice with target(c) at
// counter_span's line, whose last instruction overwrites c's register
// (DWARF has only c's entry value where the line's code ends). The hook
// must be a line-level kprobe-post on that instruction, and the advice
// must see the struct the line read.
func (g *guest) spanAfter() {
	t := g.t
	rep := g.weave("counter/span")
	n := 0
	for _, jp := range rep.JoinPoints {
		if jp.Function != "counter_span" {
			continue
		}
		n++
		if jp.Skipped != "" {
			t.Errorf("%s skipped: %s", jp.Where(), jp.Skipped)
		} else if jp.Exact || jp.Kind != joinpoint.KprobePost {
			t.Errorf("%s: exact %v, %s hook; want a line-level kprobe-post on the line's last instruction", jp.Where(), jp.Exact, jp.Kind)
		}
	}
	if n == 0 {
		t.Fatalf("no join point in counter_span: %+v", rep.JoinPoints)
	}
	if got := strings.TrimSpace(g.run("cat", spanParam)); got != "427" {
		t.Errorf("%s reads %q, want 427", spanParam, got)
	}
	rs, _, err := g.sess.Drain(g.ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for _, r := range rs {
		if r.Function != "counter_span" || !slices.Equal(r.Ints(), []int64{40, 2}) {
			t.Errorf("unexpected record %+v, want counter_span's span [40 2]", r)
			continue
		}
		got++
	}
	if got == 0 {
		t.Errorf("no record from counter_span's after advice")
	}
	g.unweave("span")
	g.checkClean()
}
