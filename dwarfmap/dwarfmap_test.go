package dwarfmap

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/klasy/klasy/dwarfmap/dwtype"
	"github.com/klasy/klasy/internal/testenv"
	"github.com/klasy/klasy/pattern"
)

// The fixtures are compiled the way the kernel compiles C (DWARF 5,
// -fno-asynchronous-unwind-tables so the CFA comes from .debug_frame), at
// -O2 and -O0, linked into a small executable (one address space, like
// vmlinux) and also left as a relocatable object (like a .ko).
type fixture struct {
	opt  string // "-O2" or "-O0", and other gcc flags: "-O2 -gdwarf-4", "-O2 -gz"
	link bool
}

func (f fixture) String() string {
	name := strings.ReplaceAll(strings.ReplaceAll(f.opt, " ", ""), "=", "")
	if f.link {
		return name + "-exe"
	}
	return name + "-obj"
}

var (
	buildMu  sync.Mutex
	buildDir string
	built    = map[fixture]string{}
)

func needTools(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"gcc", "objdump", "readelf"} {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.Need(t, "binutils", fmt.Errorf("%s not found: apt install gcc binutils", tool))
		}
	}
}

// compile builds testdata/fixture.c once per fixture kind.
func compile(t *testing.T, f fixture) string {
	t.Helper()
	needTools(t)
	buildMu.Lock()
	defer buildMu.Unlock()
	if p, ok := built[f]; ok {
		return p
	}
	if buildDir == "" {
		d, err := os.MkdirTemp("", "dwarfmap-test-")
		if err != nil {
			t.Fatal(err)
		}
		buildDir = d
	}
	src, err := filepath.Abs("testdata/fixture.c")
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(buildDir, "fixture"+f.String())
	args := append(strings.Fields(f.opt), "-g", "-fno-asynchronous-unwind-tables")
	if !strings.Contains(f.opt, "-gdwarf-") {
		args = append(args, "-gdwarf-5")
	}
	if f.link {
		args = append(args, "-nostdlib", "-Wl,--build-id", "-Wl,-e,main", "-Wl,--unresolved-symbols=ignore-all", "-o", out, src)
	} else {
		args = append(args, "-c", "-o", out, src)
	}
	testenv.GCC(t, args...)
	built[f] = out
	return out
}

func TestMain(m *testing.M) {
	if mode := os.Getenv("DWARFMAP_BENCH_HELPER"); mode != "" {
		runHelper(mode, os.Getenv("DWARFMAP_BENCH_IMAGE"), os.Getenv("DWARFMAP_BENCH_CACHE"))
		os.Exit(0)
	}
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// DWARF 5 as the kernel builds it, DWARF 4 (.debug_loc, .debug_ranges,
// DW_OP_GNU_entry_value) and zlib-compressed debug sections (-gz).
var allFixtures = []fixture{{"-O2", true}, {"-O0", true}, {"-O2", false}, {"-O0", false},
	{"-O2 -gdwarf-4", true}, {"-O2 -gdwarf-4", false}, {"-O2 -gz", true}, {"-O2 -gz", false}}

func index(t *testing.T, f fixture) *Index {
	t.Helper()
	x, _, err := Load(compile(t, f), Options{NoCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Close() })
	return x
}

// marker returns the line of testdata/fixture.c holding "MARK:name".
func marker(t *testing.T, name string) int {
	t.Helper()
	return markerIn(t, "fixture.c", name)
}

// markerIn returns the line of testdata/file holding "MARK:name".
func markerIn(t *testing.T, file, name string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, "MARK:"+name+" ") {
			return i + 1
		}
	}
	t.Fatalf("no MARK:%s in %s", name, file)
	return 0
}

type objdumpRow struct {
	file string
	line int // -1 for end of sequence
	addr uint64
	stmt bool
}

// objdumpRows runs objdump --dwarf=decodedline and returns its rows.
func objdumpRows(t *testing.T, bin string) []objdumpRow {
	t.Helper()
	out, err := exec.Command("objdump", "--dwarf=decodedline", bin).Output()
	if err != nil {
		t.Fatalf("objdump: %v", err)
	}
	var rows []objdumpRow
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		// objdump prints address zero (common in a .o) as "0".
		if len(f) < 3 || !strings.HasPrefix(f[2], "0x") && f[2] != "0" {
			continue
		}
		r := objdumpRow{file: f[0], line: -1, stmt: f[len(f)-1] == "x"}
		if f[1] != "-" {
			if r.line, err = strconv.Atoi(f[1]); err != nil {
				continue
			}
		}
		if r.addr, err = strconv.ParseUint(strings.TrimPrefix(f[2], "0x"), 16, 64); err != nil {
			t.Fatalf("objdump row %q: %v", sc.Text(), err)
		}
		rows = append(rows, r)
	}
	return rows
}

// TestLineRowsMatchObjdump checks every row of the line table against
// binutils' decoding of the same object.
func TestLineRowsMatchObjdump(t *testing.T) {
	for _, f := range allFixtures {
		t.Run(f.String(), func(t *testing.T) {
			x := index(t, f)
			want := objdumpRows(t, compile(t, f))
			got := x.Rows()
			if len(want) == 0 {
				t.Fatal("objdump printed no rows")
			}
			if len(got) != len(want) {
				t.Errorf("%d rows, objdump has %d", len(got), len(want))
			}
			for i := 0; i < min(len(got), len(want)); i++ {
				g, w := got[i], want[i]
				gl := int(g.Line)
				if g.Flags&RowEndSequence != 0 {
					gl = -1
				}
				gs := g.Flags&RowStmt != 0 && gl != -1
				addr := g.Addr
				if img := x.Image(); img.Rel {
					// objdump prints a .o's addresses as section
					// offsets; elfimage has laid the sections out.
					if _, off, ok := img.SectionAt(addr); ok {
						addr = off
					} else if _, off, ok := img.SectionAt(addr - 1); ok {
						addr = off + 1 // the end of a sequence at a section's end
					}
				}
				if path.Base(x.File(g.File)) != w.file || gl != w.line || addr != w.addr || gs != w.stmt {
					t.Errorf("row %d: got %s:%d %#x stmt=%v, objdump %s:%d %#x stmt=%v",
						i, path.Base(x.File(g.File)), gl, g.Addr, gs, w.file, w.line, w.addr, w.stmt)
				}
			}
		})
	}
}

// readelfFuncs returns FUNC symbols (name -> [start, end)) from readelf -sW.
func readelfFuncs(t *testing.T, bin string) map[string][2]uint64 {
	t.Helper()
	out, err := exec.Command("readelf", "-sW", bin).Output()
	if err != nil {
		t.Fatalf("readelf: %v", err)
	}
	m := map[string][2]uint64{}
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		if len(f) < 8 || f[3] != "FUNC" || f[6] == "UND" {
			continue
		}
		a, err1 := strconv.ParseUint(f[1], 16, 64)
		n, err2 := strconv.ParseUint(f[2], 0, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		m[f[7]] = [2]uint64{a, a + n}
	}
	return m
}

// TestFunctionRangesMatchReadelf checks that each function's ranges are
// exactly its symbol and its .cold symbol, as readelf lists them.
func TestFunctionRangesMatchReadelf(t *testing.T) {
	for _, f := range []fixture{{"-O2", true}, {"-O0", true}, {"-O2 -gdwarf-4", true}, {"-O2 -gz", true}} {
		t.Run(f.String(), func(t *testing.T) {
			x := index(t, f)
			syms := readelfFuncs(t, compile(t, f))
			funcs := x.AllFuncs()
			if len(funcs) == 0 {
				t.Fatal("no functions indexed")
			}
			seen := map[string]bool{}
			for _, fn := range funcs {
				seen[fn.Name] = true
				var want [][2]uint64
				if r, ok := syms[fn.Name]; ok {
					want = append(want, r)
				}
				if r, ok := syms[fn.Name+".cold"]; ok {
					want = append(want, r)
				}
				slices.SortFunc(want, func(a, b [2]uint64) int { return int(a[0]>>1) - int(b[0]>>1) })
				if !slices.Equal(fn.Ranges, want) {
					t.Errorf("%s: ranges %x, readelf symbols %x", fn.Name, fn.Ranges, want)
				}
				if r, ok := syms[fn.Name]; ok && fn.Entry != r[0] {
					t.Errorf("%s: entry %#x, symbol at %#x", fn.Name, fn.Entry, r[0])
				}
			}
			for name := range syms {
				if !strings.HasSuffix(name, ".cold") && !seen[name] {
					t.Errorf("readelf has function %s, index does not", name)
				}
			}
			if strings.HasPrefix(f.opt, "-O2") {
				if p := x.Funcs("process"); len(p) != 1 || len(p[0].Ranges) != 2 {
					t.Errorf("process at -O2: want a hot and a .cold range, got %+v", p)
				}
				if h := x.Funcs("helper"); len(h) != 1 || h[0].External {
					t.Errorf("helper is static: got %+v", h)
				}
				if p := x.Funcs("process"); len(p) == 1 && !p[0].External {
					t.Errorf("process is global: got %+v", p)
				}
			}
		})
	}
}

// TestInlinedCopies checks the inlined copies of scale against readelf's
// count of DW_TAG_inlined_subroutine and the call lines in the source.
func TestInlinedCopies(t *testing.T) {
	f := fixture{"-O2", true}
	x := index(t, f)
	out, err := exec.Command("readelf", "--debug-dump=info", compile(t, f)).Output()
	if err != nil {
		t.Fatal(err)
	}
	n := strings.Count(string(out), "DW_TAG_inlined_subroutine")
	got := x.Inlines("scale")
	if len(got) != n || n != 2 {
		t.Fatalf("%d inlined copies of scale, readelf shows %d DW_TAG_inlined_subroutine, source has 2", len(got), n)
	}
	call := marker(t, "helper_calls")
	for _, in := range got {
		if in.Caller != "helper" || in.CallLine != call || path.Base(in.CallFile) != "fixture.c" || len(in.Ranges) == 0 {
			t.Errorf("inlined copy %+v: want caller helper, call line %d", in, call)
		}
	}
	for _, pat := range []string{"sca%", "sca*", "%cal%"} {
		fs := x.MatchFuncs(pattern.MustCompile(pat, pattern.CommandLine))
		if len(fs) != 1 || !fs[0].InlineOnly || fs[0].Inlined != 2 {
			t.Errorf("MatchFuncs(%s) = %+v, want scale inline only with 2 copies", pat, fs)
		}
	}
}

func TestStructLayout(t *testing.T) {
	for _, f := range []fixture{{"-O2", true}, {"-O0", false}} {
		t.Run(f.String(), func(t *testing.T) {
			x := index(t, f)
			l, err := x.Struct("struct packet")
			if err != nil {
				t.Fatal(err)
			}
			// Hand-checked against the x86-64 ABI (and pahole).
			want := []dwtype.Member{
				{Name: "len", Type: "unsigned int", Offset: 0, Size: 4},
				{Name: "", Type: "union {...}", Offset: 8, Size: 8},
				{Name: "addr", Type: "long unsigned int", Offset: 8, Size: 8, Depth: 1},
				{Name: "", Type: "struct {...}", Offset: 8, Size: 4, Depth: 1},
				{Name: "port", Type: "short unsigned int", Offset: 8, Size: 2, Depth: 2},
				{Name: "proto", Type: "short unsigned int", Offset: 10, Size: 2, Depth: 2},
				{Name: "flag_a", Type: "unsigned char", Offset: 16, Size: 1, BitOffset: 0, BitSize: 1},
				{Name: "flag_b", Type: "unsigned char", Offset: 16, Size: 1, BitOffset: 1, BitSize: 3},
				{Name: "kind", Type: "unsigned char", Offset: 17, Size: 1},
				{Name: "data", Type: "int[4]", Offset: 20, Size: 16},
				{Name: "done", Type: "void (*)(struct packet *)", Offset: 40, Size: 8},
			}
			if l.Size != 48 || l.Kind != "struct" || !slices.Equal(l.Members, want) {
				var b bytes.Buffer
				l.Print(&b)
				t.Errorf("layout of struct packet:\n%s\ngot  %+v\nwant %+v", b.String(), l.Members, want)
			}
			if _, err := x.Struct("nosuch"); err == nil {
				t.Error("Struct(nosuch) did not fail")
			}
			// typedef struct {...} lock_t: asked for by its typedef name.
			lt, err := x.Struct("lock_t")
			if err != nil || lt.Size != 4 || lt.Typedef != "struct {...}" || len(lt.Members) != 1 || lt.Members[0].Name != "locked" {
				t.Errorf("lock_t: %+v, %v", lt, err)
			}
			if _, err := x.Struct("not_a_struct"); err == nil || !strings.Contains(err.Error(), "typedef of int") {
				t.Errorf("not_a_struct: %v", err)
			}
			if _, err := x.Struct("struct lock_t"); err == nil {
				t.Error("struct lock_t (a typedef name, not a tag) did not fail")
			}
		})
	}
}

// varAt finds variable name in vs.
func varAt(t *testing.T, vs []Var, name, scope string) Var {
	t.Helper()
	for _, v := range vs {
		if v.Name == name && (scope == "" || v.Scope == scope) {
			return v
		}
	}
	t.Fatalf("no variable %s (scope %q) in %+v", name, scope, vs)
	return Var{}
}

// TestVariableLocations checks locations hand-read from readelf
// --debug-dump=info,loc of the fixture compiled by gcc 12.
func TestVariableLocations(t *testing.T) {
	for _, opt := range []string{"-O2", "-O2 -gdwarf-4", "-O2 -gz"} {
		t.Run(opt, func(t *testing.T) { testVarsO2(t, fixture{opt, true}) })
	}
	t.Run("-O0", func(t *testing.T) {
		x := index(t, fixture{"-O0", true})
		vs, err := x.VarsAtLine("process", marker(t, "sink_call"))
		if err != nil {
			t.Fatal(err)
		}
		// At -O0 everything lives in the frame: gcc's frame base is
		// DW_OP_call_frame_cfa, with rbp-based CFA after the prologue.
		for _, name := range []string{"p", "n", "buf", "total", "i"} {
			v := varAt(t, vs, name, "process")
			if !v.Available || !strings.HasPrefix(v.Location, "stack CFA-") || !strings.Contains(v.Location, "[rbp") {
				t.Errorf("%s at -O0: %q, want a CFA-relative stack slot, rbp-based here", name, v.Location)
			}
		}
	})
}

// testVarsO2 checks the -O2 fixture: DWARF 5 location lists
// (.debug_loclists, DW_OP_entry_value) or DWARF 4 ones (.debug_loc,
// DW_OP_GNU_entry_value) must say the same.
func testVarsO2(t *testing.T, f fixture) {
	{
		x := index(t, f)
		entry := x.Funcs("process")[0].Entry
		vs, err := x.VarsAt(entry)
		if err != nil {
			t.Fatal(err)
		}
		type check struct{ name, kind, typ, loc string }
		for _, c := range []check{
			{"p", "param", "struct packet *", "register rdi"},    // ABI: first argument
			{"n", "param", "int", "register rsi"},                // second argument
			{"buf", "local", "int[4]", "stack CFA-48 ([rsp-40]"}, // escapes to sink(): a stack slot
			{"total", "local", "int", "constant 0"},              // not yet stored anywhere
			{"i", "local", "int", "optimized out"},
		} {
			v := varAt(t, vs, c.name, "process")
			if v.Kind != c.kind || v.Type != c.typ || !strings.HasPrefix(v.Location, c.loc) {
				t.Errorf("at process entry %s: got %s %q %q, want %s %q %q", c.name, v.Kind, v.Type, v.Location, c.kind, c.typ, c.loc)
			}
		}
		// p and n come from location lists: after the loop p has moved to
		// a callee-saved register and n survives only as an entry value.
		ret, err := x.VarsAtLine("process", marker(t, "return"))
		if err != nil {
			t.Fatal(err)
		}
		if v := varAt(t, ret, "p", ""); v.Location != "register rbp" {
			t.Errorf("p at the return line: %q, want register rbp (from its location list)", v.Location)
		}
		if v := varAt(t, ret, "n", ""); v.Available || !strings.Contains(v.Location, "DW_OP_entry_value") || !strings.Contains(v.Expr, "entry_value(DW_OP_reg4(rsi))") {
			t.Errorf("n at the return line: %+v, want an unavailable entry value of rsi", v)
		}
		// step is declared in the loop's lexical block: in scope (depth
		// 1) in the loop, optimized out before helper() returns it.
		loop, err := x.VarsAtLine("process", marker(t, "loop_body"))
		if err != nil {
			t.Fatal(err)
		}
		if v := varAt(t, loop, "step", ""); v.Depth != 1 || v.Location != "optimized out" || v.Available {
			t.Errorf("step in the loop: %+v", v)
		}
		// readelf --debug-dump=loc: total is lit0 until the loop, then r8.
		if v := varAt(t, loop, "total", ""); v.Location != "register r8" {
			t.Errorf("total in the loop: %q, want register r8", v.Location)
		}
		// Parameters of the two inlined copies of scale(v, factor).
		h := x.Funcs("helper")[0].Entry
		for i, in := range x.Inlines("scale") {
			vs, err := x.VarsAt(in.Ranges[0][0])
			if err != nil {
				t.Fatal(err)
			}
			_ = h
			v := varAt(t, vs, "v", "inline scale")
			f := varAt(t, vs, "factor", "inline scale")
			want := map[int64]bool{3: true, 5: true}
			if v.Kind != "param" || v.Location != "register rdi" {
				t.Errorf("copy %d: v = %+v, want param in register rdi", i, v)
			}
			n, _ := strconv.ParseInt(strings.TrimPrefix(f.Location, "constant "), 10, 64)
			if !want[n] {
				t.Errorf("copy %d: factor = %q, want constant 3 or 5", i, f.Location)
			}
		}
	}
}

func TestLinesQueries(t *testing.T) {
	x := index(t, fixture{"-O2", true})
	ls, err := x.Lines(LineSpec{Func: "process"})
	if err != nil {
		t.Fatal(err)
	}
	cold := marker(t, "cold_call")
	var sawCold bool
	for _, l := range ls {
		if l.Function != "process" || path.Base(l.File) != "fixture.c" || len(l.Addrs) == 0 {
			t.Errorf("bad line %+v", l)
		}
		if l.Line == cold {
			sawCold = true
			p := x.Funcs("process")[0]
			if l.Addrs[0] >= p.Entry {
				t.Errorf("line %d (the fail() call) should be in the .cold part below the entry: %x", cold, l.Addrs)
			}
		}
	}
	if !sawCold {
		t.Errorf("process lines lack the .cold line %d: %+v", cold, ls)
	}
	byFile, err := x.Lines(LineSpec{File: "fixture.c", Line: marker(t, "sink_call")})
	if err != nil || len(byFile) != 1 || byFile[0].Function != "process" {
		t.Errorf("fixture.c:sink_call = %+v, %v", byFile, err)
	}
	if _, err := x.Lines(LineSpec{File: "nosuch.c"}); err == nil {
		t.Error("lines of a missing file did not fail")
	}
	// The second line of a statement split over two lines has no code of
	// its own (the dissertation's example): the lines around it, in one
	// basic block, stand in for it.
	cont := marker(t, "continued")
	fb, err := x.Lines(LineSpec{File: "fixture.c", Line: cont})
	if err != nil {
		t.Fatalf("fixture.c:%d: %v", cont, err)
	}
	if len(fb) != 2 || fb[0].Line != cont-1 || fb[1].Line != cont+1 || fb[0].Fallback != "before" || fb[1].Fallback != "after" ||
		fb[0].FallbackFor != cont || fb[1].FallbackFor != cont {
		t.Fatalf("fixture.c:%d: want lines %d (before) and %d (after) standing in, got %+v", cont, cont-1, cont+1, fb)
	}
	if ok, _ := x.SameBlock(fb[0].Addrs[0], fb[1].Addrs[0]); !ok {
		t.Errorf("fallback lines %+v are not in one basic block", fb)
	}
	// Variables at such a line are read where the line before it runs.
	vs, err := x.VarsAtLine("process", cont)
	if err != nil || len(vs) == 0 || vs[0].FallbackFor != cont || vs[0].Line != cont-1 || vs[0].Addr != fb[0].Addrs[0] {
		t.Errorf("vars at process:%d: %+v, %v", cont, vs, err)
	}
	// Lines with code of their own are returned as they are.
	if ls, err := x.Lines(LineSpec{Func: "process", Line: cont - 1}); err != nil || len(ls) != 1 || ls[0].FallbackFor != 0 {
		t.Errorf("process:%d = %+v, %v", cont-1, ls, err)
	}
}

// The lines of a function are its own body, as perf probe -L shows it:
// code inlined from a callee defined in the same file (scale, above
// helper in fixture.c) does not come first under the callee's line
// numbers; asked for, it follows the function's own lines, marked.
func TestLinesOfFunctionWithInlinedCallees(t *testing.T) {
	x := index(t, fixture{"-O2", true})
	calls, body := marker(t, "helper_calls"), marker(t, "scale_body")
	helper := x.Funcs("helper")[0]
	own, err := x.Lines(LineSpec{Func: "helper"})
	if err != nil {
		t.Fatal(err)
	}
	var sawCall bool
	for _, l := range own {
		if l.Line < helper.Line || l.Inlined != "" {
			t.Errorf("helper's own lines include %+v (helper starts at line %d)", l, helper.Line)
		}
		sawCall = sawCall || l.Line == calls
	}
	if !sawCall {
		t.Errorf("helper's lines lack the calls of scale at line %d: %+v", calls, own)
	}
	all, err := x.Lines(LineSpec{Func: "helper", Inlined: true})
	if err != nil {
		t.Fatal(err)
	}
	var sawBody bool
	for i, l := range all {
		if i < len(own) && (l.Inlined != "" || l.Line != own[i].Line) {
			t.Errorf("line %d with inlined callees: %+v, want helper's own line %+v first", i, l, own[i])
		}
		if l.Line == body {
			sawBody = true
			if l.Inlined != "scale" || l.Function != "helper" {
				t.Errorf("line %d of scale inlined into helper: %+v", body, l)
			}
		}
	}
	if !sawBody || len(all) <= len(own) {
		t.Errorf("with inlined callees, no line of scale's body (%d): %+v", body, all)
	}
	// A line of an inlined callee asked for by number is still found.
	if ls, err := x.Lines(LineSpec{Func: "helper", Line: body}); err != nil || len(ls) == 0 || ls[0].Inlined != "scale" {
		t.Errorf("helper:%d = %+v, %v", body, ls, err)
	}
}

func TestBasicBlocks(t *testing.T) {
	x := index(t, fixture{"-O2", true})
	p := x.Funcs("process")[0]
	b, err := x.BasicBlock(p.Entry)
	if err != nil {
		t.Fatal(err)
	}
	if b.Start != p.Entry || b.End <= b.Start || b.Func != "process" {
		t.Errorf("entry block %+v", b)
	}
	// The loop head is a branch target, so a block starts at the first
	// address of the loop body line.
	loop, err := x.Lines(LineSpec{Func: "process", Line: marker(t, "loop_body")})
	if err != nil {
		t.Fatal(err)
	}
	lb, err := x.BasicBlock(loop[0].Addrs[0])
	if err != nil {
		t.Fatal(err)
	}
	if lb.Start == b.Start {
		t.Errorf("loop body %#x is in the entry block %+v", loop[0].Addrs[0], b)
	}
	if _, err := x.BasicBlock(1); err == nil {
		t.Error("BasicBlock outside any function did not fail")
	}
}

// TestParseAddr: FUNC+OFF must lie in FUNC's code. An offset past its
// end named another function's code, which a probe would hit and klasy
// answered for.
func TestParseAddr(t *testing.T) {
	x := index(t, fixture{"-O2", true})
	p := x.Funcs("process")[0]
	var hot [2]uint64
	for _, r := range p.Ranges {
		if p.Entry >= r[0] && p.Entry < r[1] {
			hot = r
		}
	}
	size := hot[1] - p.Entry
	next, ok := x.FuncAt(hot[1])
	if !ok {
		// Padding after process: the next function starts a little later.
		next, ok = x.FuncAt((hot[1] + 15) &^ 15)
	}
	past := fmt.Sprintf("past the end of process (size %#x)", size)
	type parseCase struct {
		in   string
		want uint64
		err  string // a part of the error; "" for success
	}
	cases := []parseCase{
		{"process", p.Entry, ""},
		{"process+0", p.Entry, ""},
		{fmt.Sprintf("process+%#x", size-1), hot[1] - 1, ""},
		{fmt.Sprintf("process+%d", size-1), hot[1] - 1, ""},
		{fmt.Sprintf("process+%#x", size), 0, fmt.Sprintf("process+%#x is ", size) + past},
		{"process+0x1234", 0, "process+0x1234 is " + past},
		{"process+0xffffffffffffffff", 0, past}, // wraps below the entry
		{fmt.Sprintf("%#x", p.Entry+3), p.Entry + 3, ""},
		{"nosuch+4", 0, `no function "nosuch" with code`},
		{"scale+0", 0, `no function "scale" with code`}, // inline only
		{"process+zz", 0, `bad offset in "process+zz"`},
	}
	if ok {
		cases = append(cases, parseCase{fmt.Sprintf("process+%#x", next.Entry-p.Entry), 0, past})
	}
	for _, r := range p.Ranges {
		if r[0] > p.Entry && r != hot { // a .cold part above the entry
			cases = append(cases, parseCase{fmt.Sprintf("process+%#x", r[0]-p.Entry), r[0], ""})
		}
	}
	for _, c := range cases {
		got, err := x.ParseAddr(c.in)
		if c.err == "" && (err != nil || got != c.want) {
			t.Errorf("ParseAddr(%s) = %#x, %v; want %#x", c.in, got, err, c.want)
		}
		if c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
			t.Errorf("ParseAddr(%s) = %#x, %v; want an error with %q", c.in, got, err, c.err)
		}
	}
}
