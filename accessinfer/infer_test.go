package accessinfer

import (
	"bufio"
	"debug/dwarf"
	"debug/elf"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/klasy/klasy/debugklasy"
	"github.com/klasy/klasy/dwarfmap/elfimage"
	"github.com/klasy/klasy/internal/testenv"
)

// build compiles testdata sources (with main.c) into an executable with
// gcc -O2 -g, with extra flags.
func build(t testing.TB, out string, extra []string, srcs ...string) string {
	t.Helper()
	args := []string{"-O2", "-g", "-no-pie", "-fno-pie", "-Wall", "-Wno-unused-function", "-o", out}
	args = append(args, extra...)
	for _, s := range srcs {
		args = append(args, filepath.Join("testdata", s))
	}
	args = append(args, filepath.Join("testdata", "main.c"))
	testenv.GCC(t, args...)
	return out
}

// lineTable maps each instruction address to its line-table row's line
// (of the named source file only; 0 elsewhere), by the row in force.
type lineTable struct {
	addrs []uint64
	files []string
	lines []int
}

func readLines(t testing.TB, path string) *lineTable {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d, err := f.DWARF()
	if err != nil {
		t.Fatal(err)
	}
	lt := &lineTable{}
	r := d.Reader()
	type row struct {
		a    uint64
		file string
		line int
	}
	var rows []row
	for {
		e, err := r.Next()
		if err != nil || e == nil {
			break
		}
		if e.Tag != dwarf.TagCompileUnit {
			r.SkipChildren()
			continue
		}
		lr, err := d.LineReader(e)
		if err != nil || lr == nil {
			continue
		}
		var le dwarf.LineEntry
		for lr.Next(&le) == nil {
			name := ""
			if le.File != nil {
				name = le.File.Name
			}
			if le.EndSequence {
				name = ""
			}
			rows = append(rows, row{le.Address, name, le.Line})
		}
		r.SkipChildren()
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].a < rows[j].a })
	for _, r := range rows {
		lt.addrs = append(lt.addrs, r.a)
		lt.files = append(lt.files, r.file)
		lt.lines = append(lt.lines, r.line)
	}
	return lt
}

// at returns the files and lines of the rows in force at pc: all those
// at the greatest address not above it (a compiler puts several lines
// at one address when their code merged).
func (lt *lineTable) at(pc uint64) (files []string, lines []int) {
	i := sort.Search(len(lt.addrs), func(i int) bool { return lt.addrs[i] > pc }) - 1
	for j := i; j >= 0 && lt.addrs[j] == lt.addrs[i]; j-- {
		files, lines = append(files, lt.files[j]), append(lines, lt.lines[j])
	}
	return files, lines
}

var wantRe = regexp.MustCompile(`/\* want(-any)?: (.*?) \*/`)

// wants reads a fixture's expectations: by line, the accesses it must
// have and those it may have.
func wants(t testing.TB, src string) (must, may map[int][]string) {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", src))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	must, may = map[int][]string{}, map[int][]string{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		for _, m := range wantRe.FindAllStringSubmatch(sc.Text(), -1) {
			for _, w := range strings.Fields(m[2]) {
				may[n] = append(may[n], w)
				if m[1] == "" {
					must[n] = append(must[n], w)
				}
			}
		}
	}
	return must, may
}

func (a Access) key() string { return fmt.Sprintf("%s.%s:%s", a.Struct, a.Member, a.Kind) }

// linesOf are the fixture lines an access is attributed to: its row's
// and the call sites of the inlined copies holding it.
func linesOf(lt *lineTable, a Access, src string) []int {
	var out []int
	fs, ls := lt.at(a.PC)
	for i, f := range fs {
		if strings.HasSuffix(f, "/"+src) {
			out = append(out, ls[i])
		}
	}
	for _, c := range a.Calls {
		if strings.HasSuffix(c.File, "/"+src) {
			out = append(out, c.Line)
		}
	}
	return out
}

func TestFixtures(t *testing.T) {
	for _, src := range []string{"basic.c", "bitfields.c", "copies.c", "wrappers.c", "adjacent.c", "nested.c"} {
		t.Run(src, func(t *testing.T) {
			var flags []string
			if src == "copies.c" || src == "wrappers.c" || src == "nested.c" {
				// As the kernel builds: struct copies through general
				// registers, not SSE ones.
				flags = []string{"-mno-sse", "-mno-mmx", "-mno-red-zone"}
			}
			exe := build(t, filepath.Join(t.TempDir(), "a.out"), flags, src)
			img, err := elfimage.Open(exe)
			if err != nil {
				t.Fatal(err)
			}
			defer img.Close()
			res, err := Infer(img, Options{})
			if err != nil {
				t.Fatal(err)
			}
			lt := readLines(t, exe)
			must, may := wants(t, src)
			found := map[int]map[string]bool{}
			for _, a := range res.Accesses {
				ls := linesOf(lt, a, src)
				ok := false
				for _, l := range ls {
					if found[l] == nil {
						found[l] = map[string]bool{}
					}
					found[l][a.key()] = true
					for _, w := range may[l] {
						ok = ok || w == a.key()
					}
				}
				if testing.Verbose() {
					t.Logf("%s lines %v: %s", a, ls, map[bool]string{true: "ok", false: "UNEXPECTED"}[ok])
				}
				if !ok {
					t.Errorf("%s: lines %v expect none of it (want %v)", a, ls, wantsAt(may, ls))
				}
			}
			var lines []int
			for l := range must {
				lines = append(lines, l)
			}
			sort.Ints(lines)
			for _, l := range lines {
				for _, w := range must[l] {
					if !found[l][w] {
						t.Errorf("%s:%d: %s not inferred (found %v)", src, l, w, keys(found[l]))
					}
				}
			}
		})
	}
}

// TestRelocatableObject: a module (.ko) is a relocatable object, linked
// with ld -r as kbuild links one: inference finds there, function by
// function and instruction by instruction from the entry, what it finds
// in the same code linked into an executable.
func TestRelocatableObject(t *testing.T) {
	dir := t.TempDir()
	exe := build(t, filepath.Join(dir, "a.out"), nil, "basic.c", "bitfields.c")
	obj := build(t, filepath.Join(dir, "mod.o"), []string{"-r", "-nostdlib"}, "basic.c", "bitfields.c")
	found := func(path string) map[string]int {
		img, err := elfimage.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer img.Close()
		if path == obj && img.ELF.Type != elf.ET_REL {
			t.Fatalf("%s is %v, want a relocatable object", path, img.ELF.Type)
		}
		res, err := Infer(img, Options{})
		if err != nil {
			t.Fatal(err)
		}
		entry := map[string]uint64{}
		syms, err := img.ELF.Symbols()
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range syms {
			if elf.ST_TYPE(s.Info) == elf.STT_FUNC && int(s.Section) < len(img.ELF.Sections) {
				entry[s.Name] = s.Value
				if img.Rel {
					entry[s.Name] += img.ELF.Sections[s.Section].Addr
				}
			}
		}
		out := map[string]int{}
		for _, a := range res.Accesses {
			e, ok := entry[a.Func]
			if !ok {
				t.Fatalf("%s: no symbol for %s", path, a.Func)
			}
			out[fmt.Sprintf("%s+%#x %s", a.Func, a.PC-e, a.key())]++
		}
		return out
	}
	want, got := found(exe), found(obj)
	if len(want) == 0 {
		t.Fatal("nothing inferred in the executable")
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("%s: %d in the relocatable object, %d in the executable", k, got[k], n)
		}
	}
	for k, n := range got {
		if want[k] == 0 {
			t.Errorf("%s: %d in the relocatable object, none in the executable", k, n)
		}
	}
}

func wantsAt(may map[int][]string, ls []int) []string {
	var out []string
	for _, l := range ls {
		out = append(out, may[l]...)
	}
	return out
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// plugin returns gcc-patches/klasy.so, or skips.
func plugin(t testing.TB) string {
	t.Helper()
	so, err := filepath.Abs("../gcc-patches/klasy.so")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(so); err != nil {
		testenv.Need(t, "plugin", fmt.Errorf("gcc-patches/klasy.so not built: run make plugin"))
	}
	return so
}

// TestPluginMissesBitfieldTests shows the plugin's blind spot that
// Score.BitTests counts: a bitfield tested against a constant (if
// (p->x), p->y && .., p->z == 3) has no record in .debug_klasy, a
// bitfield read as a value (return p->z) has one; inference finds all
// and marks the tests.
func TestPluginMissesBitfieldTests(t *testing.T) {
	recs, got := pluginAndInferred(t, "bitfields.c",
		func(r *debugklasy.Access) bool { return r.Struct == "flags" && r.Mode == debugklasy.Read },
		Options{Func: func(n string) bool { return strings.HasPrefix(n, "flag_") }},
		func(a *Access) bool { return a.Bitfield })
	for _, k := range []string{"flag_x x", "flag_y y", "flag_z3 z"} {
		if recs[k] != 0 {
			t.Errorf("%s: the plugin records the bitfield test now (%d): Score.BitTests may go", k, recs[k])
		}
	}
	if recs["flag_z z"] == 0 || recs["flag_y b"] == 0 {
		t.Errorf("the plugin's value reads are missing: %v", recs)
	}
	for k, want := range map[string]bool{"flag_x x": true, "flag_y y": true, "flag_z z": false, "flag_z3 z": true} {
		if bt, ok := got[k]; !ok || bt != want {
			t.Errorf("%s: inferred %v, BitTest %v; want BitTest %v", k, ok, bt, want)
		}
	}
}

// pluginAndInferred builds src with the plugin and returns, by
// "function member", how many of the plugin's records rec keeps there,
// and the BitTest of the accesses (of the functions opt selects) that
// acc keeps.
func pluginAndInferred(t *testing.T, src string, rec func(*debugklasy.Access) bool, opt Options, acc func(*Access) bool) (map[string]int, map[string]bool) {
	t.Helper()
	so := plugin(t)
	exe := build(t, filepath.Join(t.TempDir(), "a.out"), []string{"-fplugin=" + so}, src)
	tab, err := debugklasy.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	recs := map[string]int{}
	for i := range tab.Accesses {
		if r := &tab.Accesses[i]; rec(r) {
			recs[r.Function.Name+" "+r.Member]++
		}
	}
	img, err := elfimage.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer img.Close()
	res, err := Infer(img, opt)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for i := range res.Accesses {
		if a := &res.Accesses[i]; acc(a) {
			got[a.Func+" "+a.Member] = a.BitTest
		}
	}
	return recs, got
}

// TestPluginMissesMergedCompares shows the plugin's second blind spot,
// counted as the first (Score.BitTests): adjacent members compared with
// constants in one condition (c->family == 6 && c->model == 1), which
// GCC's front end merges into one masked compare at -O2, have no record
// in .debug_klasy; a member compared alone has one. Inference finds
// both members of the merged compare and marks them tests.
func TestPluginMissesMergedCompares(t *testing.T) {
	recs, got := pluginAndInferred(t, "adjacent.c",
		func(r *debugklasy.Access) bool { return r.Struct == "cpuinfo" }, Options{},
		func(a *Access) bool { return a.Struct == "cpuinfo" })
	for _, k := range []string{"is_model family", "is_model model", "is_model_p family", "is_model_p model"} {
		if recs[k] != 0 {
			t.Errorf("%s: the plugin records the merged compare now (%d): Access.BitTest of several members may go", k, recs[k])
		}
	}
	if recs["family_of family"] == 0 {
		t.Errorf("the plugin's record of a compare alone is missing: %v", recs)
	}
	for k, want := range map[string]bool{"is_model family": true, "is_model model": true, "is_model_p family": true, "is_model_p model": true, "family_of family": false} {
		if bt, ok := got[k]; !ok || bt != want {
			t.Errorf("%s: inferred %v, BitTest %v; want BitTest %v", k, ok, bt, want)
		}
	}
}
