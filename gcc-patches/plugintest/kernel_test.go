package plugintest_test

import (
	"bytes"
	"context"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/klasy/klasy/debugklasy"
	"github.com/klasy/klasy/internal/cachedir"
	"github.com/klasy/klasy/internal/testenv"
	"github.com/klasy/klasy/kbuild"
	"github.com/klasy/klasy/lab"
)

// The kernel files the issue names, with what a plausible table holds:
// at least min distinct accesses, at least minOn of them on struct on.
var kernelFiles = []struct {
	obj   string
	min   int
	on    string
	minOn int
}{
	{"net/core/skbuff.o", 1000, "sk_buff", 400},
	{"fs/attr.o", 50, "iattr", 20},
	{"kernel/sched/core.o", 1000, "task_struct", 300},
}

type kernelTree struct {
	src, build string
}

func cacheDir() string { return cachedir.Root() }

// linuxSource returns the tree scripts/setup-linux-source.sh prepared.
func linuxSource(t testing.TB) kernelTree {
	t.Helper()
	top := filepath.Join(cacheDir(), "linux-source-6.1")
	k := kernelTree{src: filepath.Join(top, "src"), build: filepath.Join(top, "build-plugin-test")}
	_, err := os.Stat(filepath.Join(k.build, ".klasy-prepared"))
	if err != nil {
		err = fmt.Errorf("no prepared linux-source-6.1 tree in %s: run make linux-source", top)
	}
	testenv.Need(t, "linux-source", err)
	lockTree(t, top)
	return k
}

// lockTree holds the lock scripts/setup-linux-source.sh takes until t ends.
// The tree and its build directory are shared by every worktree on the
// machine: two `make test` runs, each with its own klasy.so, would rebuild
// the same objects at once and read each other's.
func lockTree(t testing.TB, top string) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(top, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatalf("locking the shared kernel tree: %v", err)
	}
	t.Cleanup(func() { f.Close() })
	if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
		return
	}
	t.Logf("waiting for another user of %s", top)
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatalf("locking the shared kernel tree: %v", err)
	}
}

// makeObjects builds objs in the prepared tree with the plugin, the way a
// developer would: make KCFLAGS=-fplugin=... Objects are deleted first
// because make does not notice a changed plugin.
func (k kernelTree) makeObjects(t testing.TB, so string, objs ...string) {
	t.Helper()
	for _, o := range objs {
		os.Remove(filepath.Join(k.build, o))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	res, err := kbuild.BuildTargets(ctx, k.build, objs, kbuild.Options{CFLAGS: []string{"-fplugin=" + so}, Jobs: 2})
	if err != nil {
		t.Fatalf("building %s with the plugin: %+v", strings.Join(objs, " "), err)
	}
	if bytes.Contains(res.Log, []byte("internal compiler error")) || bytes.Contains(res.Log, []byte("klasy: ")) {
		t.Fatalf("building %s printed plugin diagnostics:\n%s", strings.Join(objs, " "), res.Log)
	}
}

var pluginFlag = regexp.MustCompile(`\s-fplugin(=|-arg-klasy-)\S*`)

// compileCommand returns the gcc command kbuild used for obj (from its
// .cmd file, without objtool and without any klasy plugin flags), writing
// to out instead. Run it with sh -c in k.build.
func (k kernelTree) compileCommand(t testing.TB, obj, out string) string {
	t.Helper()
	cmdFile := filepath.Join(k.build, filepath.Dir(obj), "."+filepath.Base(obj)+".cmd")
	b, err := os.ReadFile(cmdFile)
	if err != nil {
		t.Fatalf("reading kbuild's command: %v", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	_, cmd, ok := strings.Cut(line, ":= ")
	if !ok {
		t.Fatalf("%s: no command in %q", cmdFile, line)
	}
	cmd, _, _ = strings.Cut(cmd, ";") // objtool runs after gcc
	cmd = pluginFlag.ReplaceAllString(cmd, "")
	n := strings.Count(cmd, " -o "+obj+" ")
	if n != 1 {
		t.Fatalf("%s: %d outputs %q in %q", cmdFile, n, obj, cmd)
	}
	cmd = strings.Replace(cmd, " -o "+obj+" ", " -o "+out+" ", 1)
	cmd = regexp.MustCompile(`-Wp,-MMD,\S+`).ReplaceAllString(cmd, "-Wp,-MMD,"+out+".d")
	return cmd
}

func (k kernelTree) run(t testing.TB, cmd string) {
	t.Helper()
	c := exec.Command("sh", "-c", cmd)
	c.Dir = k.build
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", cmd, err, out)
	}
}

// TestKernelFiles compiles three files of Debian's linux-source-6.1 with
// the plugin through kbuild and checks the tables are plausible.
func TestKernelFiles(t *testing.T) {
	so := plugin(t)
	k := linuxSource(t)
	var objs []string
	for _, f := range kernelFiles {
		objs = append(objs, f.obj)
	}
	k.makeObjects(t, so, objs...)
	for _, f := range kernelFiles {
		t.Run(f.obj, func(t *testing.T) {
			obj := filepath.Join(k.build, f.obj)
			tab, err := debugklasy.Open(obj)
			if err != nil {
				t.Fatal(err)
			}
			checkLayout(t, obj, tab)
			on, unsupported, calls, noLine := 0, 0, 0, 0
			for _, a := range tab.Accesses {
				if a.Struct == f.on {
					on++
				}
				switch a.Base.Kind {
				case debugklasy.Unsupported:
					unsupported++
				case debugklasy.Call:
					calls++
				}
				if a.Line == 0 || a.File == "" {
					noLine++
				}
			}
			t.Logf("%s: %d accesses (%d on %s), %d call bases, %d unsupported bases", f.obj, len(tab.Accesses), on, f.on, calls, unsupported)
			if len(tab.Accesses) < f.min || on < f.minOn {
				t.Errorf("%d accesses (%d on %s), want at least %d (%d)", len(tab.Accesses), on, f.on, f.min, f.minOn)
			}
			if unsupported*10 > len(tab.Accesses) {
				t.Errorf("%d of %d bases unsupported, want under 10%%", unsupported, len(tab.Accesses))
			}
			if noLine > 0 {
				t.Errorf("%d accesses without a location", noLine)
			}
			if tab.Units != 1 {
				t.Errorf("%d units, want 1", tab.Units)
			}
		})
	}
}

// TestKernelCodeUnchanged compiles the same kernel files with kbuild's own
// command line, with and without the plugin: every loaded section must be
// byte-identical.
func TestKernelCodeUnchanged(t *testing.T) {
	so := plugin(t)
	k := linuxSource(t)
	for _, f := range kernelFiles {
		if _, err := os.Stat(filepath.Join(k.build, filepath.Dir(f.obj), "."+filepath.Base(f.obj)+".cmd")); err != nil {
			k.makeObjects(t, so, f.obj)
		}
	}
	dir := t.TempDir()
	for _, f := range kernelFiles {
		t.Run(f.obj, func(t *testing.T) {
			base := filepath.Join(dir, strings.ReplaceAll(f.obj, "/", "_"))
			without := base + ".without.o"
			with := base + ".with.o"
			k.run(t, k.compileCommand(t, f.obj, without))
			k.run(t, k.compileCommand(t, f.obj, with)+" -fplugin="+so)
			sameCode(t, with, without)
			ef, err := elf.Open(with)
			if err != nil {
				t.Fatal(err)
			}
			defer ef.Close()
			if ef.Section(debugklasy.SectionName) == nil {
				t.Errorf("%s: no %s with the plugin", f.obj, debugklasy.SectionName)
			}
		})
	}
}

// TestOutOfTreeModule builds testdata/module against Debian's kernel
// headers with the plugin, as gcc-patches/README.md tells a developer to
// (an M= build with KCFLAGS=-fplugin=...): modpost must not complain
// about the section and the .ko must carry the module's accesses.
func TestOutOfTreeModule(t *testing.T) {
	so := plugin(t)
	k, err := lab.FindKernel(lab.Debian)
	testenv.Need(t, "debian-kernel", err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := filepath.Join(t.TempDir(), "module")
	res, err := kbuild.Build(ctx, k.BuildDir, os.DirFS("testdata/module"), kbuild.Options{CFLAGS: []string{"-fplugin=" + so}, Dir: dir})
	if err != nil {
		t.Fatalf("%+v", err)
	}
	for _, bad := range []string{"orphan", "non-allocatable", "klasy: ", "internal compiler error"} {
		if bytes.Contains(res.Log, []byte(bad)) {
			t.Errorf("the build printed %q:\n%s", bad, res.Log)
		}
	}
	for _, d := range res.Diagnostics {
		t.Errorf("the build printed %v", d)
	}
	tab, err := debugklasy.Open(filepath.Join(dir, "klasy_probe.ko"))
	if err != nil {
		t.Fatal(err)
	}
	var skbLen, hits bool
	for _, a := range tab.Accesses {
		switch {
		case a.Function.Name == "klasy_probe_len" && a.Struct == "sk_buff" && a.Member == "len" && a.Base.Expr == "skb":
			skbLen = true
		case a.Function.Name == "klasy_probe_init" && a.Struct == "probe_entry" && a.Member == "hits" && a.Mode == debugklasy.ReadWrite:
			hits = true
		}
	}
	if !skbLen || !hits {
		t.Errorf("klasy_probe.ko lacks skb->len (%v) or e->hits++ (%v) among %d accesses", skbLen, hits, len(tab.Accesses))
	}
}
