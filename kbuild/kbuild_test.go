package kbuild_test

import (
	"bufio"
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klasy/klasy/internal/testenv"
	"github.com/klasy/klasy/kbuild"
	"github.com/klasy/klasy/kmod"
	"github.com/klasy/klasy/lab"
)

// debianTree returns the Debian kernel's headers, which out-of-tree
// modules build against, or skips (fails under make test) without them.
func debianTree(t testing.TB) lab.Kernel {
	t.Helper()
	k, err := lab.FindKernel(lab.Debian)
	testenv.Need(t, "debian-kernel", err)
	return k
}

func testdata(name string) string { return filepath.Join("testdata", name) }

func build(t testing.TB, kdir, name string, opts kbuild.Options) (*kbuild.Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	res, err := kbuild.Build(ctx, kdir, os.DirFS(testdata(name)), opts)
	t.Logf("building %s took %.2fs", name, time.Since(start).Seconds())
	return res, err
}

func info(t testing.TB, ko []byte) kmod.Info {
	t.Helper()
	i, err := kmod.ReadInfo(ko)
	if err != nil {
		t.Fatal(err)
	}
	return i
}

// modinfo returns the value of key in a module's .modinfo.
func modinfo(t testing.TB, ko []byte, key string) string {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(ko))
	if err != nil {
		t.Fatal(err)
	}
	data, err := f.Section(".modinfo").Data()
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range bytes.Split(data, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte(key+"=")); ok {
			return string(v)
		}
	}
	return ""
}

// TestBuild builds testdata/hello against Debian's headers in a
// temporary directory: one module named after its Kbuild object, built
// for that kernel, with debug information, its export in Module.symvers,
// a quiet log, and nothing left in $TMPDIR.
func TestBuild(t *testing.T) {
	k := debianTree(t)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	res, err := build(t, k.BuildDir, "hello", kbuild.Options{})
	if err != nil {
		t.Fatalf("%+v", err)
	}
	if len(res.Modules) != 1 || res.Modules[0].Name != "klasy_kbuild_hello" {
		t.Fatalf("modules %v, want klasy_kbuild_hello", res.Modules)
	}
	ko := res.Modules[0].Image
	i := info(t, ko)
	if i.Name != "klasy_kbuild_hello" || !strings.HasPrefix(i.Vermagic, k.Release+" ") {
		t.Errorf("modinfo %+v, want name klasy_kbuild_hello, vermagic of %s", i, k.Release)
	}
	if tag := modinfo(t, ko, "klasy_tag"); tag != "none" {
		t.Errorf("klasy_tag = %q, want none (no CFLAGS)", tag)
	}
	f, err := elf.NewFile(bytes.NewReader(ko))
	if err != nil {
		t.Fatal(err)
	}
	if f.Type != elf.ET_REL || f.Section(".debug_info") == nil {
		t.Errorf("module is %v with .debug_info %v, want a relocatable object with DWARF", f.Type, f.Section(".debug_info") != nil)
	}
	if !regexp.MustCompile(`(?m)^0x[0-9a-f]+\tklasy_kbuild_hello\t\S*klasy_kbuild_hello\tEXPORT_SYMBOL_GPL`).Match(res.Symvers) {
		t.Errorf("Module.symvers lacks the module's export:\n%s", res.Symvers)
	}
	for _, d := range res.Diagnostics {
		t.Errorf("diagnostic from a clean module: %v", d)
	}
	if res.Dir != "" {
		t.Errorf("Result.Dir = %q for a temporary directory", res.Dir)
	}
	if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
		t.Errorf("build left %v in $TMPDIR", ents)
	}
	t.Logf("log: %q", res.Log)
}

// TestBuildKeep: a named directory, and Keep, leave the build's files.
func TestBuildKeep(t *testing.T) {
	k := debianTree(t)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	dir := filepath.Join(tmp, "named")
	for _, opts := range []kbuild.Options{{Dir: dir}, {Keep: true}} {
		res, err := build(t, k.BuildDir, "hello", opts)
		if err != nil {
			t.Fatalf("%+v", err)
		}
		if opts.Dir != "" && res.Dir != dir {
			t.Errorf("Result.Dir = %q, want %q", res.Dir, dir)
		}
		ko, err := os.ReadFile(filepath.Join(res.Dir, "klasy_kbuild_hello.ko"))
		if err != nil || !bytes.Equal(ko, res.Modules[0].Image) {
			t.Errorf("kept directory %q lacks the module built: %v", res.Dir, err)
		}
	}
	// A directory in use is refused, not mixed with another build.
	if _, err := build(t, k.BuildDir, "hello", kbuild.Options{Dir: dir}); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("building into a non-empty directory: %v, want a 'not empty' error", err)
	}
}

// TestBuildExtraWarnings: W=1 warns about the exported function without
// a prototype, and W=1e fails the build on it; the default stays quiet
// (TestBuild).
func TestBuildExtraWarnings(t *testing.T) {
	k := debianTree(t)
	src, err := os.ReadFile(filepath.Join(testdata("hello"), "klasy_kbuild_hello.c"))
	if err != nil {
		t.Fatal(err)
	}
	before, _, _ := strings.Cut(string(src), "\nint klasy_kbuild_hello(")
	want := kbuild.Diagnostic{File: "klasy_kbuild_hello.c", Line: strings.Count(before, "\n") + 2, Col: len("int ") + 1, Severity: "warning",
		Msg: "no previous prototype for 'klasy_kbuild_hello' [-Wmissing-prototypes]"}
	res, err := build(t, k.BuildDir, "hello", kbuild.Options{ExtraWarnings: "1"})
	if err != nil {
		t.Fatalf("%+v", err)
	}
	if !contains(res.Diagnostics, want) {
		t.Errorf("W=1: diagnostics %v lack %v", res.Diagnostics, want)
	}
	_, err = build(t, k.BuildDir, "hello", kbuild.Options{ExtraWarnings: "1e"})
	var be *kbuild.BuildError
	if want.Severity, want.Msg = "error", strings.Replace(want.Msg, "-W", "-Werror=", 1); !errors.As(err, &be) || !contains(be.Diagnostics, want) {
		t.Errorf("W=1e: %v, want a *BuildError with %v", err, want)
	}
	if _, err := build(t, k.BuildDir, "hello", kbuild.Options{ExtraWarnings: "4"}); err == nil || !strings.Contains(err.Error(), "ExtraWarnings") {
		t.Errorf("W=4: %v, want it refused", err)
	}
}

type want struct {
	file, severity, ident string
	line                  int
}

var (
	wantRe = regexp.MustCompile(`/\* want (\w+): (\w+) \*/`)
	lineRe = regexp.MustCompile(`^#line (\d+) "([^"]+)"`)
)

// wants reads the "want" comments of a C file and where the compiler
// must place them: the file's own line, or after a #line directive the
// line and file it names.
func wants(t *testing.T, path string) []want {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	file, delta := filepath.Base(path), 0
	var ws []want
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		if m := lineRe.FindStringSubmatch(sc.Text()); m != nil {
			next, _ := strconv.Atoi(m[1])
			file, delta = m[2], next-(n+1)
			continue
		}
		if m := wantRe.FindStringSubmatch(sc.Text()); m != nil {
			ws = append(ws, want{file: file, line: n + delta, severity: m[1], ident: m[2]})
		}
	}
	if len(ws) < 3 {
		t.Fatalf("%s: %d want comments", path, len(ws))
	}
	return ws
}

// TestBuildErrors builds a module with mistakes: a *BuildError whose
// diagnostics put each at the file and line a "want" comment says
// (through #line for the aspect's), whose message names the first error
// and whose %+v is the whole log.
func TestBuildErrors(t *testing.T) {
	k := debianTree(t)
	_, err := build(t, k.BuildDir, "bad", kbuild.Options{})
	var be *kbuild.BuildError
	if !errors.As(err, &be) {
		t.Fatalf("building testdata/bad: %v, want a *BuildError", err)
	}
	for _, w := range wants(t, filepath.Join(testdata("bad"), "klasy_kbuild_bad.c")) {
		found := false
		for _, d := range be.Diagnostics {
			if d.File == w.file && d.Line == w.line && d.Severity == w.severity && strings.Contains(d.Msg, "'"+w.ident+"'") && d.Col > 0 {
				found = true
			}
		}
		if !found {
			t.Errorf("no %s about %s at %s:%d among:\n%v", w.severity, w.ident, w.file, w.line, be.Diagnostics)
		}
	}
	var first kbuild.Diagnostic
	for _, d := range be.Diagnostics {
		if d.IsError() {
			first = d
			break
		}
	}
	if msg := err.Error(); !strings.HasPrefix(msg, "kbuild: "+first.String()) || !strings.Contains(msg, "more error") {
		t.Errorf("Error() = %q, want the first error %q and how many more", msg, first)
	}
	full := fmt.Sprintf("%+v", err)
	if !strings.HasPrefix(full, err.Error()+"\n") || !strings.Contains(full, string(bytes.TrimSpace(be.Log))) {
		t.Errorf("%%+v does not hold the message and the log:\n%s", full)
	}
	if ds := fmt.Sprint(be.Diagnostics); strings.Contains(ds, "klasy-kbuild-") {
		t.Errorf("diagnostics keep the temporary build directory's path:\n%s", ds)
	}
	if be.Dir != "" {
		t.Errorf("BuildError.Dir = %q for a temporary directory", be.Dir)
	}
}

// TestBuildExtraSymbols builds a module calling another module's export:
// modpost refuses it without that module's Module.symvers and accepts it,
// recording the dependency, with it.
func TestBuildExtraSymbols(t *testing.T) {
	k := debianTree(t)
	hello, err := build(t, k.BuildDir, "hello", kbuild.Options{})
	if err != nil {
		t.Fatalf("%+v", err)
	}
	_, err = build(t, k.BuildDir, "user", kbuild.Options{})
	var be *kbuild.BuildError
	if !errors.As(err, &be) {
		t.Fatalf("building testdata/user without the export: %v, want a *BuildError", err)
	}
	undefined := kbuild.Diagnostic{File: "modpost", Severity: "error", Msg: `"klasy_kbuild_hello" [klasy_kbuild_user.ko] undefined!`}
	if !contains(be.Diagnostics, undefined) {
		t.Errorf("diagnostics %v lack %v", be.Diagnostics, undefined)
	}
	user, err := build(t, k.BuildDir, "user", kbuild.Options{ExtraSymbols: [][]byte{hello.Symvers}})
	if err != nil {
		t.Fatalf("%+v", err)
	}
	if deps := info(t, user.Modules[0].Image).Depends; len(deps) != 1 || deps[0] != "klasy_kbuild_hello" {
		t.Errorf("klasy_kbuild_user depends on %q, want klasy_kbuild_hello", deps)
	}
}

func contains(ds []kbuild.Diagnostic, want kbuild.Diagnostic) bool {
	for _, d := range ds {
		if d == want {
			return true
		}
	}
	return false
}

// TestBuildConcurrent runs two builds of the same sources at once with
// different flags: each module carries its own.
func TestBuildConcurrent(t *testing.T) {
	k := debianTree(t)
	tags := []string{"one", "two"}
	res := make([]*kbuild.Result, len(tags))
	errs := make([]error, len(tags))
	var wg sync.WaitGroup
	for i, tag := range tags {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i], errs[i] = build(t, k.BuildDir, "hello", kbuild.Options{CFLAGS: []string{"-DKLASY_TAG=" + tag}})
		}()
	}
	wg.Wait()
	for i, tag := range tags {
		if errs[i] != nil {
			t.Fatalf("build %s: %+v", tag, errs[i])
		}
		if got := modinfo(t, res[i].Modules[0].Image, "klasy_tag"); got != tag {
			t.Errorf("build with KLASY_TAG=%s made a module tagged %q", tag, got)
		}
	}
}

// procsWith returns the pids of processes whose command line contains s.
func procsWith(s string) []int {
	var pids []int
	cmdlines, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range cmdlines {
		data, err := os.ReadFile(p)
		if err == nil && bytes.Contains(data, []byte(s)) {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
			pids = append(pids, pid)
		}
	}
	return pids
}

// TestBuildCanceled cancels a build before it starts, and one whose
// Kbuild stalls in a shell command under make: Build returns the
// context's error at once, and neither make nor the shell nor its sleep
// is left running.
func TestBuildCanceled(t *testing.T) {
	k := debianTree(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := kbuild.Build(ctx, k.BuildDir, os.DirFS(testdata("hello")), kbuild.Options{}); !errors.Is(err, context.Canceled) {
		t.Errorf("Build with a canceled context: %v, want context.Canceled", err)
	}

	dir := filepath.Join(t.TempDir(), "stall")
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := kbuild.Build(ctx, k.BuildDir, os.DirFS(testdata("stall")), kbuild.Options{Dir: dir})
		done <- err
	}()
	stalled := "cd " + dir + " && sleep"
	for deadline := time.Now().Add(time.Minute); len(procsWith(stalled)) == 0; time.Sleep(20 * time.Millisecond) {
		select {
		case err := <-done:
			t.Fatalf("the stalling build ended by itself: %+v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the stalling build's shell never started")
		}
	}
	start := time.Now()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("canceled Build: %v, want context.Canceled", err)
		}
		t.Logf("canceled build returned after %v: %v", time.Since(start), err)
	case <-time.After(10 * time.Second):
		t.Fatal("Build did not return within 10s of its context's cancellation")
	}
	// The killed processes may take a moment to be reaped.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		left := procsWith(dir)
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes of the canceled build still running: %v", left)
		}
	}
}

// TestBuildBadInput: what Build refuses before running make.
func TestBuildBadInput(t *testing.T) {
	k := debianTree(t)
	ctx := context.Background()
	tests := []struct {
		name string
		kdir string
		src  string
		opts kbuild.Options
		want string
	}{
		{"no tree", t.TempDir(), "hello", kbuild.Options{}, "is not a kernel build tree"},
		{"no Kbuild", k.BuildDir, ".", kbuild.Options{}, "no Kbuild or Makefile"},
		{"flag with a space", k.BuildDir, "hello", kbuild.Options{CFLAGS: []string{"-DA=1 -DB=2"}}, "white space"},
	}
	for _, tt := range tests {
		_, err := kbuild.Build(ctx, tt.kdir, os.DirFS(testdata(tt.src)), tt.opts)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Build = %v, want an error containing %q", tt.name, err, tt.want)
		}
	}
	if _, err := kbuild.BuildTargets(ctx, k.BuildDir, []string{"x.o"}, kbuild.Options{Keep: true}); err == nil {
		t.Error("BuildTargets accepted Keep, which it cannot honour")
	}
}

// TestBuildOwnerKilled kills (kill -9) a process in the middle of a build
// whose Kbuild stalls in a shell under make (a child of this test binary,
// as klasy would be): it has no chance to clean up. The next build
// leaves no process of the killed one running and no directory of it.
func TestBuildOwnerKilled(t *testing.T) {
	k := debianTree(t)
	if os.Getenv("KLASY_KBUILD_OWNER") == "1" {
		kbuild.Build(context.Background(), k.BuildDir, os.DirFS(testdata("stall")), kbuild.Options{})
		os.Exit(0)
	}
	tmp := t.TempDir()
	owner := exec.Command(os.Args[0], "-test.run=^TestBuildOwnerKilled$")
	owner.Env = append(os.Environ(), "KLASY_KBUILD_OWNER=1", "TMPDIR="+tmp)
	if err := owner.Start(); err != nil {
		t.Fatal(err)
	}
	var dir string
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if dirs, _ := filepath.Glob(filepath.Join(tmp, "klasy-kbuild-*")); len(dirs) == 1 && len(procsWith("cd "+dirs[0]+" && sleep")) > 0 {
			dir = dirs[0]
			break
		}
		if time.Now().After(deadline) {
			owner.Process.Kill()
			owner.Wait()
			t.Fatal("the stalling build's shell never started")
		}
	}
	owner.Process.Kill()
	owner.Wait()

	t.Setenv("TMPDIR", tmp)
	if _, err := build(t, k.BuildDir, "hello", kbuild.Options{}); err != nil {
		t.Fatalf("the next build: %+v", err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		left := procsWith(dir)
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes of the killed build still running after the next build: %v", left)
		}
	}
	if dirs, _ := filepath.Glob(filepath.Join(tmp, "klasy-kbuild-*")); len(dirs) > 0 {
		t.Errorf("build directories left after the next build: %q", dirs)
	}
}
