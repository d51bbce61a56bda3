// The tests check the klasy GCC plugin against C sources in
// testdata/ compiled at test time, and against real kernel files from
// Debian's linux-source-6.1.
package plugintest_test

import (
	"bufio"
	"bytes"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/klasy/klasy/debugklasy"
	"github.com/klasy/klasy/internal/testenv"
	"github.com/klasy/klasy/pattern"
)

// plugin returns the absolute path of a klasy.so built from the current
// klasy.cc, or skips/fails through testenv.
func plugin(t testing.TB) string {
	t.Helper()
	so, err := filepath.Abs("../klasy.so")
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(so)
	if err != nil {
		err = fmt.Errorf("gcc-patches/klasy.so not built: run make plugin (installs gcc-12-plugin-dev)")
	}
	testenv.Need(t, "plugin", err)
	if src, err := os.Stat("../klasy.cc"); err == nil && src.ModTime().After(st.ModTime()) {
		testenv.Need(t, "plugin", fmt.Errorf("gcc-patches/klasy.so is older than klasy.cc: run make plugin"))
	}
	return so
}

// compile runs gcc -O2 -g -c on a testdata source and returns the object.
func compile(t testing.TB, src, out string, extra ...string) string {
	t.Helper()
	args := append([]string{"-O2", "-g", "-c", "-Wall", "-Wno-unused-function", "-o", out, src}, extra...)
	cmd := exec.Command("gcc", args...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gcc %s: %v\n%s", strings.Join(args, " "), err, b)
	} else if len(b) > 0 && bytes.Contains(b, []byte("internal compiler error")) {
		t.Fatalf("gcc %s crashed:\n%s", src, b)
	}
	return out
}

func compileWithPlugin(t testing.TB, src string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), strings.TrimSuffix(filepath.Base(src), ".c")+".o")
	return compile(t, src, out, "-fplugin="+plugin(t))
}

// want is one expected record: "task.count read param:t".
type want struct {
	access, mode, base string
}

func (w want) String() string { return w.access + " " + w.mode + " " + w.base }

var wantRe = regexp.MustCompile(`/\* want: (.*?) \*/`)

// wants reads the want comments of a source: file:line -> records.
func wants(t *testing.T, path string) map[int][]want {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[int][]want{}
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		m := wantRe.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		for _, item := range strings.Split(m[1], ";") {
			fields := strings.SplitN(strings.TrimSpace(item), " ", 3)
			if len(fields) != 3 {
				t.Fatalf("%s:%d: bad want %q", path, line, item)
			}
			out[line] = append(out[line], want{fields[0], fields[1], fields[2]})
		}
	}
	return out
}

func got(a *debugklasy.Access) want {
	return want{a.Struct + "." + a.Member, a.Mode.String(), a.Base.Kind.String() + ":" + a.Base.Expr}
}

func sortWants(ws []want) []string {
	s := make([]string, len(ws))
	for i, w := range ws {
		s[i] = w.String()
	}
	sort.Strings(s)
	return s
}

// TestFixtures checks every record of the testdata units against the want
// comments of the lines they are on: direct, pointer, nested, array,
// macro-hidden, header inline, multi-line condition, anonymous struct and
// member, union, bitfield, writes, compound assignments, address-taken,
// READ_ONCE/WRITE_ONCE, call-based and container_of bases.
func TestFixtures(t *testing.T) {
	for _, units := range [][]string{
		{"testdata/accesses.c", "testdata/accesses.h"},
		{"testdata/second.c", "testdata/accesses.h"},
		{"testdata/unusual.c"}, // uses no header inline function
	} {
		unit := units[0]
		t.Run(filepath.Base(unit), func(t *testing.T) {
			obj := compileWithPlugin(t, unit)
			tab, err := debugklasy.Open(obj)
			if err != nil {
				t.Fatal(err)
			}
			gotBy := map[string][]want{}
			for i := range tab.Accesses {
				a := &tab.Accesses[i]
				key := fmt.Sprintf("%s:%d", filepath.Base(a.File), a.Line)
				gotBy[key] = append(gotBy[key], got(a))
			}
			wantBy := map[string][]want{}
			for _, src := range units {
				for line, ws := range wants(t, src) {
					wantBy[fmt.Sprintf("%s:%d", filepath.Base(src), line)] = ws
				}
			}
			for key, ws := range wantBy {
				g, w := sortWants(gotBy[key]), sortWants(ws)
				if strings.Join(g, "\n") != strings.Join(w, "\n") {
					t.Errorf("%s:\n got  %q\n want %q", key, g, w)
				}
			}
			for key, gs := range gotBy {
				if _, ok := wantBy[key]; !ok {
					t.Errorf("%s: unexpected records %q", key, sortWants(gs))
				}
			}
		})
	}
}

// find returns the one access of fn to s.m.
func find(t *testing.T, tab *debugklasy.Table, fn, sm string, mode debugklasy.Mode) *debugklasy.Access {
	t.Helper()
	var hits []*debugklasy.Access
	for i := range tab.Accesses {
		a := &tab.Accesses[i]
		if a.Function.Name == fn && a.Struct+"."+a.Member == sm && a.Mode == mode {
			hits = append(hits, a)
		}
	}
	if len(hits) != 1 {
		t.Fatalf("%s: %d accesses %s (%s), want 1", fn, len(hits), sm, mode)
	}
	return hits[0]
}

func lineOf(t *testing.T, path, text string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, text) {
			return i + 1
		}
	}
	t.Fatalf("%s: no line containing %q", path, text)
	return 0
}

// TestRecordDetails checks what the want comments do not: layout, flags,
// locations and the function table.
func TestRecordDetails(t *testing.T) {
	obj := compileWithPlugin(t, "testdata/accesses.c")
	tab, err := debugklasy.Open(obj)
	if err != nil {
		t.Fatal(err)
	}
	const c, h = "testdata/accesses.c", "testdata/accesses.h"

	t.Run("layout", func(t *testing.T) { checkLayout(t, obj, tab) })

	t.Run("bitfield", func(t *testing.T) {
		a := find(t, tab, "bitfields", "task.flag_b", debugklasy.Write)
		// thread(64) threads(256) emb(64) arr(128) = 512, then flag_a:3.
		if !a.Bitfield || a.BitOffset != 515 || a.BitSize != 5 {
			t.Errorf("flag_b: bitfield=%v offset=%d size=%d, want true 515 5", a.Bitfield, a.BitOffset, a.BitSize)
		}
	})
	t.Run("anonymous member collapsed", func(t *testing.T) {
		a := find(t, tab, "anonymous", "task.wide", debugklasy.Read)
		// The anonymous union follows the bitfield word at byte 68, aligned to 72.
		if !a.ViaAnon || a.BitOffset != 576 || a.BitSize != 64 {
			t.Errorf("wide: via_anon=%v offset=%d size=%d, want true 576 64", a.ViaAnon, a.BitOffset, a.BitSize)
		}
	})
	t.Run("anonymous type", func(t *testing.T) {
		a := find(t, tab, "anonymous", "anon_t.b", debugklasy.Read)
		if !a.AnonType || filepath.Base(a.DeclFile) != "accesses.h" || a.DeclLine != lineOf(t, h, "typedef struct {") {
			t.Errorf("anon_t: anon=%v declared %s:%d", a.AnonType, a.DeclFile, a.DeclLine)
		}
		l := find(t, tab, "anonymous", ".k", debugklasy.Write)
		if !l.AnonType || l.StructName() != fmt.Sprintf("(anonymous at %s:%d)", l.DeclFile, lineOf(t, c, "struct {")) {
			t.Errorf("loose: %s", l.StructName())
		}
	})
	t.Run("union", func(t *testing.T) {
		if a := find(t, tab, "unions", "value.f", debugklasy.Read); !a.Union {
			t.Error("value.f not marked as a union member")
		}
	})
	t.Run("macro hidden", func(t *testing.T) {
		a := find(t, tab, "macro_hidden", "inner.fs", debugklasy.Read)
		if filepath.Base(a.File) != "accesses.c" || a.Line != lineOf(t, c, "return task_fs(p);") {
			t.Errorf("hook at %s:%d, want the expansion point in accesses.c", a.File, a.Line)
		}
		if filepath.Base(a.SpellFile) != "accesses.h" || a.SpellLine != lineOf(t, h, "#define task_fs") {
			t.Errorf("spelling at %s:%d, want the #define in accesses.h", a.SpellFile, a.SpellLine)
		}
	})
	t.Run("header inline", func(t *testing.T) {
		a := find(t, tab, "task_count", "task.count", debugklasy.Read)
		if filepath.Base(a.File) != "accesses.h" || filepath.Base(a.Function.File) != "accesses.h" || !a.Function.Static {
			t.Errorf("task_count: hook %s, function file %s static=%v", a.File, a.Function.File, a.Function.Static)
		}
	})
	t.Run("multi-line condition", func(t *testing.T) {
		a := find(t, tab, "multi_line", "inner.fs", debugklasy.Read)
		if a.Line != lineOf(t, c, "p->emb.fs > 2") || a.StmtLine != lineOf(t, c, "if (a > 3 &&") {
			t.Errorf("line %d stmt %d", a.Line, a.StmtLine)
		}
	})
	t.Run("container_of", func(t *testing.T) {
		a := find(t, tab, "from_member", "task.ax", debugklasy.Read)
		if !a.Base.ContainerOf || a.Base.Offset != -40 || a.Base.Var != "in" || a.Base.Kind != debugklasy.Param {
			t.Errorf("base %+v", a.Base)
		}
	})
	t.Run("call", func(t *testing.T) {
		a := find(t, tab, "call_based", "holder.before", debugklasy.Read)
		if a.Base.Kind != debugklasy.Call || a.Base.Var != "end_pointer" {
			t.Errorf("base %+v", a.Base)
		}
	})
	t.Run("dropped functions", func(t *testing.T) {
		for _, a := range tab.Accesses {
			if a.Function.Name == "task_unused" || a.Function.Name == "unused_static" {
				t.Errorf("%s is never emitted but has a record at line %d", a.Function.Name, a.Line)
			}
		}
	})
}

// linkUnits compiles srcs with the plugin, links them with ld -r as kbuild
// does for built-in.a parts and modules, and reads the result.
func linkUnits(t *testing.T, srcs ...string) *debugklasy.Table {
	t.Helper()
	out := filepath.Join(t.TempDir(), "linked.o")
	args := []string{"-r", "-o", out}
	for _, src := range srcs {
		args = append(args, compileWithPlugin(t, src))
	}
	if b, err := exec.Command("ld", args...).CombinedOutput(); err != nil {
		t.Fatalf("ld %s: %v\n%s", strings.Join(args, " "), err, b)
	}
	tab, err := debugklasy.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

// TestConcatenation links two units with ld -r, as kbuild does for
// built-in.a parts and modules: both units survive, the copies of the
// header inline task_count() merge.
func TestConcatenation(t *testing.T) {
	tab := linkUnits(t, "testdata/accesses.c", "testdata/second.c")
	if tab.Units != 2 {
		t.Errorf("%d units after ld -r, want 2", tab.Units)
	}
	n := 0
	for _, x := range tab.Accesses {
		if x.Function.Name == "task_count" {
			n++
		}
	}
	if n != 1 || tab.Records != len(tab.Accesses)+1 {
		t.Errorf("task_count listed %d times (records %d, distinct %d), want once", n, tab.Records, len(tab.Accesses))
	}
	if hits := tab.Query(mustPattern(t, "task.flag_%")); len(hits) < 4 {
		t.Errorf("task.flag_%%: %d hits, want the 4 of both units", len(hits))
	}
}

// TestUncleanPaths compiles the two units through paths with "..", as
// kbuild does for arch/x86/events/intel/../perf_event.h: the table names
// files the way .debug_line readers (dwarfmap, klasy lines) do, cleaned, so
// the weaver finds the hook line and the header copies still merge.
func TestUncleanPaths(t *testing.T) {
	tab := linkUnits(t, "testdata/accesses.c", "testdata/../testdata/second.c")
	n := 0
	for _, x := range tab.Accesses {
		for _, p := range []string{x.File, x.SpellFile, x.DeclFile, x.Function.File} {
			if p != "" && path.Clean(p) != p {
				t.Errorf("%s.%s in %s: path %q is not clean", x.Struct, x.Member, x.Function.Name, p)
			}
		}
		if x.Function.Name == "task_count" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("task_count listed %d times, want once", n)
	}
}

func mustPattern(t testing.TB, s string) *pattern.Member {
	t.Helper()
	p, err := pattern.CompileMember(s, pattern.CommandLine)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// allocSections returns the contents of the sections that end up in
// memory (.text*, .data*, .rodata*, ...), keyed by name.
func allocSections(t testing.TB, path string) map[string][]byte {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]byte{}
	for _, s := range f.Sections {
		if s.Flags&elf.SHF_ALLOC == 0 || s.Type == elf.SHT_NOBITS {
			continue
		}
		b, err := s.Data()
		if err != nil {
			t.Fatal(err)
		}
		out[s.Name] = b
	}
	return out
}

// sameCode fails unless the loaded sections of two objects are identical.
func sameCode(t testing.TB, with, without string) {
	t.Helper()
	a, b := allocSections(t, with), allocSections(t, without)
	checked := 0
	for name, bb := range b {
		ab, ok := a[name]
		if !ok {
			t.Errorf("%s: section %s missing with the plugin", filepath.Base(with), name)
			continue
		}
		if !bytes.Equal(ab, bb) {
			t.Errorf("%s: section %s differs with the plugin (%d vs %d bytes)", filepath.Base(with), name, len(ab), len(bb))
		}
		if strings.HasPrefix(name, ".text") || strings.HasPrefix(name, ".data") || strings.HasPrefix(name, ".rodata") {
			checked++
		}
	}
	for name := range a {
		if _, ok := b[name]; !ok {
			t.Errorf("%s: plugin added loaded section %s", filepath.Base(with), name)
		}
	}
	if checked == 0 {
		t.Errorf("%s: no .text/.data/.rodata section compared", filepath.Base(with))
	}
}

// TestCodeUnchanged proves the plugin only adds .debug_klasy: every loaded
// section is byte-identical with and without it.
func TestCodeUnchanged(t *testing.T) {
	so := plugin(t)
	for _, src := range []string{"testdata/accesses.c", "testdata/second.c", "testdata/unusual.c"} {
		dir := t.TempDir()
		with := compile(t, src, filepath.Join(dir, "with.o"), "-fplugin="+so)
		without := compile(t, src, filepath.Join(dir, "without.o"))
		sameCode(t, with, without)
		f, err := elf.Open(with)
		if err != nil {
			t.Fatal(err)
		}
		s := f.Section(debugklasy.SectionName)
		f.Close()
		if s == nil || s.Flags&elf.SHF_ALLOC != 0 {
			t.Errorf("%s: want a non-allocated %s section, got %+v", src, debugklasy.SectionName, s)
		}
	}
}

// TestOptions checks the plugin's arguments: a dump on request, unknown
// keys refused (a typo must not silently do nothing), call-graph filtering
// switchable for debugging.
func TestOptions(t *testing.T) {
	so := plugin(t)
	dir := t.TempDir()
	gcc := func(args ...string) (string, error) {
		cmd := exec.Command("gcc", append([]string{"-O2", "-g", "-c", "-Wno-unused-function", "-fplugin=" + so}, args...)...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	src, _ := filepath.Abs("testdata/accesses.c")

	t.Run("dump", func(t *testing.T) {
		if out, err := gcc("-fplugin-arg-klasy-dump", "-o", "sub.o", src); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		b, err := os.ReadFile(filepath.Join(dir, "sub.klasy.txt"))
		if err != nil {
			t.Fatalf("no default dump beside the object: %v", err)
		}
		if !strings.Contains(string(b), "pointer_and_nested") || !strings.Contains(string(b), "inner.fs read 0/32 param:p->thread") {
			t.Errorf("dump lacks the p->thread->fs record:\n%s", b)
		}
		if out, err := gcc("-fplugin-arg-klasy-dump=named.txt", "-o", "sub.o", src); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if _, err := os.Stat(filepath.Join(dir, "named.txt")); err != nil {
			t.Error(err)
		}
	})
	t.Run("unknown key", func(t *testing.T) {
		out, err := gcc("-fplugin-arg-klasy-dumpp", "-o", "x.o", src)
		if err == nil || !strings.Contains(out, "unknown option") || !strings.Contains(out, "-fplugin-arg-klasy-dumpp") {
			t.Errorf("err=%v, output:\n%s", err, out)
		}
	})
	t.Run("all-functions", func(t *testing.T) {
		if out, err := gcc("-fplugin-arg-klasy-all-functions", "-o", "all.o", src); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		tab, err := debugklasy.Open(filepath.Join(dir, "all.o"))
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, a := range tab.Accesses {
			found = found || a.Function.Name == "unused_static"
		}
		if !found {
			t.Error("all-functions did not keep unused_static")
		}
	})
	t.Run("help", func(t *testing.T) {
		out, _ := exec.Command("gcc", "-fplugin="+so, "-v", "--help").CombinedOutput()
		for _, w := range []string{"Help for the loaded plugins", ".debug_klasy", "-fplugin-arg-klasy-dump"} {
			if !strings.Contains(string(out), w) {
				t.Errorf("gcc -fplugin=klasy.so -v --help lacks %q", w)
			}
		}
	})
}

// TestUnusual checks what the plugin says about shapes it cannot follow,
// and that unoptimized builds work too.
func TestUnusual(t *testing.T) {
	tab, err := debugklasy.Open(compileWithPlugin(t, "testdata/unusual.c"))
	if err != nil {
		t.Fatal(err)
	}
	reasons := map[string]string{}
	for _, a := range tab.Accesses {
		if a.Base.Kind == debugklasy.Unsupported {
			reasons[a.Function.Name] = a.Base.Reason
		}
	}
	for fn, want := range map[string]string{
		"conditional_base": "conditional expression",
		"by_value":         "compound literal",
		"hidden":           "macro temporary __ptr set by a statement (inline asm?)",
		"incremented":      "the base is incremented in the same expression",
	} {
		if reasons[fn] != want {
			t.Errorf("%s: unsupported reason %q, want %q", fn, reasons[fn], want)
		}
	}
	if a := find(t, tab, "flexible", "flex.data", debugklasy.Read); a.BitSize != 0 || a.BitOffset != 32 {
		t.Errorf("flexible array member: offset %d size %d, want 32 0", a.BitOffset, a.BitSize)
	}
	find(t, tab, "inner_fn", "task.arr", debugklasy.Read) // GNU C nested function
	if a := find(t, tab, "vla_struct", ".after", debugklasy.Write); !a.NoOffset {
		t.Errorf("member after a variable-length array: offset %d known, want unknown", a.BitOffset)
	}
	if a := find(t, tab, "vla_struct", ".len", debugklasy.Write); a.NoOffset || a.BitOffset != 0 || a.BitSize != 32 {
		t.Errorf("member before a variable-length array: unknown=%v offset %d size %d, want 0 32", a.NoOffset, a.BitOffset, a.BitSize)
	}

	for _, src := range []string{"testdata/accesses.c", "testdata/unusual.c"} {
		out := filepath.Join(t.TempDir(), "o0.o")
		compile(t, src, out, "-O0", "-fplugin="+plugin(t))
		o0, err := debugklasy.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		if len(o0.Accesses) == 0 {
			t.Errorf("%s at -O0: no accesses", src)
		}
	}
}
