package weaver

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/klasy/klasy/aspect"
	"github.com/klasy/klasy/dwarfmap"
	"github.com/klasy/klasy/internal/cachedir"
	"github.com/klasy/klasy/internal/testenv"
	"github.com/klasy/klasy/kbuild"
	"github.com/klasy/klasy/weaver/runtime"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from what the code makes now (read the diff)")

// goldenAspects are resolved against Debian's vmlinux and generated.
var goldenAspects = []string{"testdata/pread.klasy", "testdata/mshow.klasy", "testdata/openat.klasy", "../examples/setattr_exec.klasy", "testdata/agg.klasy", "../examples/read_latency.klasy",
	"testdata/lseek.klasy", "testdata/nullify.klasy", "../examples/delayed_ack.klasy", "testdata/line.klasy", "testdata/block.klasy"}

func debianIndex(t *testing.T) *dwarfmap.Index {
	t.Helper()
	p := filepath.Join(cachedir.Root(), "debian", "current", "vmlinux")
	if _, err := os.Stat(p); err != nil {
		testenv.Need(t, "debian-kernel", fmt.Errorf("no Debian debug vmlinux at %s: run make debian-kernel", p))
	}
	testenv.Need(t, "debian-kernel", nil)
	x, _, err := dwarfmap.Load(p, dwarfmap.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Close() })
	return x
}

func loadAspect(t *testing.T, path string) *aspect.File {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, diags := aspect.Load(path, src)
	if len(diags) > 0 {
		t.Fatal(diags)
	}
	return f
}

func checkGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./weaver -run %s -update, then read it)", err, t.Name())
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from what the code makes now (rerun with -update and read the diff):\n%s", path, got)
	}
}

// formatJoinPoints prints join points one per line, as the golden table
// keeps them: advice timing kind address function [in caller] file:line,
// the basic block a block(...) hook counts when it is not at its start,
// then each argument's program, or why the join point is skipped.
func formatJoinPoints(jps []*JoinPoint) string {
	var b strings.Builder
	for _, jp := range jps {
		fmt.Fprintf(&b, "%d %s %s %#x %s", jp.Advice, jp.Timing, jp.Kind, jp.Addr, jp.Function)
		if jp.InlinedIn != "" {
			fmt.Fprintf(&b, " in %s", jp.InlinedIn)
		}
		fmt.Fprintf(&b, " %s:%d", jp.File, jp.Line)
		if jp.Block != 0 && jp.Block != jp.Addr {
			fmt.Fprintf(&b, " block=%#x", jp.Block)
		}
		for _, a := range jp.Args {
			fmt.Fprintf(&b, " %s=%s", a.Param, a.Value)
			if a.AtEntry {
				b.WriteString("@entry")
			}
		}
		if jp.Skipped != "" {
			fmt.Fprintf(&b, " SKIPPED: %s", jp.Skipped)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// TestResolveGolden keeps the join points of the test aspects in
// Debian's 6.1.0-56 vmlinux, with where every argument is read, in
// testdata/resolve.golden (one case per line, as x86asm's decode.txt).
func TestResolveGolden(t *testing.T) {
	x := debianIndex(t)
	var b strings.Builder
	for _, p := range goldenAspects {
		jps, err := Resolve(loadAspect(t, p), x, ResolveOptions{})
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		SortJoinPoints(jps)
		fmt.Fprintf(&b, "# %s\n%s", filepath.Base(p), formatJoinPoints(jps))
	}
	checkGolden(t, "testdata/resolve.golden", []byte(b.String()))
}

// TestResolveErrors: designators that select nothing, or that this
// weaver cannot weave, fail at their position in the aspect.
func TestResolveErrors(t *testing.T) {
	x := debianIndex(t)
	tests := []struct{ pc, want string }{
		{"execution(no_such_function_at_all)", "x.klasy:1:37: execution(no_such_function_at_all): no function is called no_such_function_at_all"},
		{"execution(m_show) AND within_file(fs/nosuch.c)", "x.klasy:1:37: execution(m_show): no body or inlined copy of m_show is selected by within_file(...)"},
		{"execution(ksys_pread64) AND within_function(nosuch)", "no body or inlined copy of ksys_pread64 is selected by within_function(...)"},
		{"execution(m_show) AND execution(ksys_read)", "is selected by"},
		{"access(sk_buff.len)", "access(sk_buff.len): " + filepath.Join(cachedir.Root(), "debian", "current", "vmlinux") + " has no .debug_klasy section: it was not built with the klasy plugin"},
		{"execution(m_show) AND within_file(fs/namespace.c@dom0)", "a domain (@dom0) needs a domains file"},
		// A line without code names the nearest lines with code.
		{"line(fs/namei.c:4174)", "x.klasy:1:27: line(fs/namei.c:4174): fs/namei.c:4174 has no code (the compiler merged or removed it, or it holds no statement); the nearest lines with code are 4173 above and 4176 below"},
		{"line(fs/nosuch.c:12)", "x.klasy:1:27: line(fs/nosuch.c:12): no source file is called fs/nosuch.c in the line tables of"},
		{"line(fs/namei.c:4176) AND within_function(path_openat)", "line(fs/namei.c:4176): its code is in do_mkdirat, none of them selected by within_function(...)"},
		{"line(fs/namei.c:4176) AND local_var(no_such_var, v)", "line(fs/namei.c:4176): no_such_var is in scope at none of its 1 copies of code"},
		{"block(no_such_function_at_all)", "x.klasy:1:27: block(no_such_function_at_all): no function is called no_such_function_at_all"},
		{"block(mode_strip_umask)", "block(mode_strip_umask): mode_strip_umask is only ever inlined"},
		{"block(do_mkdirat) AND within_file(fs/open.c)", "block(do_mkdirat): no out-of-line body of it is in the file within_file(...) names"},
	}
	for _, tt := range tests {
		src := "<aspect><advice><pointcut>" + tt.pc + "</pointcut><before>STORE_DATA(1);</before></advice></aspect>\n"
		f, diags := aspect.Load("x.klasy", []byte(src))
		if len(diags) > 0 {
			t.Fatalf("%s: %v", tt.pc, diags)
		}
		_, err := Resolve(f, x, ResolveOptions{})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want %q", tt.pc, err, tt.want)
		}
	}
}

// TestGenerateGolden keeps the advice modules of the test aspects in
// testdata/gen/*.c, and builds them against Debian's headers with the
// runtime's symbols: the generated C must compile without a warning.
func TestGenerateGolden(t *testing.T) {
	x := debianIndex(t)
	var mods []*Module
	for _, p := range goldenAspects {
		f := loadAspect(t, p)
		jps, err := Resolve(f, x, ResolveOptions{})
		if err != nil {
			t.Fatal(err)
		}
		SortJoinPoints(jps)
		m, err := Generate(f, jps, GenOptions{Path: filepath.Base(p), RefAddr: x.Funcs(KASLRRef)[0].Entry})
		if err != nil {
			t.Fatal(err)
		}
		checkGolden(t, filepath.Join("testdata", "gen", m.Name+".c"), m.Files[m.Name+".c"])
		mods = append(mods, m)
	}
	headers := filepath.Join(cachedir.Root(), "debian", "current", "headers")
	ctx := context.Background()
	rt, err := kbuild.Build(ctx, headers, runtime.Sources, kbuild.Options{})
	if err != nil {
		t.Fatalf("building the runtime: %v", err)
	}
	hdr, _ := runtime.Sources.ReadFile(runtime.Header)
	files := fstest.MapFS{runtime.Header: {Data: hdr}}
	var kb strings.Builder
	kb.WriteString("obj-m :=")
	for _, m := range mods {
		files[m.Name+".c"] = &fstest.MapFile{Data: m.Files[m.Name+".c"]}
		kb.WriteString(" " + m.Name + ".o")
	}
	kb.WriteString("\nccflags-y := -I$(src)\n")
	files["Kbuild"] = &fstest.MapFile{Data: []byte(kb.String())}
	res, err := kbuild.Build(ctx, headers, files, kbuild.Options{ExtraSymbols: [][]byte{rt.Symvers}})
	if err != nil {
		t.Fatalf("%+v", err)
	}
	for _, d := range res.Diagnostics {
		t.Errorf("generated C: %s", d)
	}
	if len(res.Modules) != len(mods) {
		t.Errorf("built %d modules of %d", len(res.Modules), len(mods))
	}
}

// TestPositionMapsBackThroughEscapes: a compiler diagnostic at a column
// of the generated C maps to the aspect's own line and column, past
// $pc$ (replaced by a longer name) and XML escapes (&lt; is one byte in
// C, four in the file).
func TestPositionMapsBackThroughEscapes(t *testing.T) {
	src := "<aspect>\n  <advice>\n    <pointcut>execution(f) AND argument(a, ap)</pointcut>\n" +
		"    <before>if (1 &lt; 2) STORE_DATA($pc$ + nosuch);\n" +
		"      STORE_DATA(2 &amp; other);</before>\n  </advice>\n</aspect>\n"
	f, diags := aspect.Load("p.klasy", []byte(src))
	if len(diags) > 0 {
		t.Fatal(diags)
	}
	jps := []*JoinPoint{{Advice: 1, Kind: Kprobe, Addr: 0x1000, Function: "f", File: "f.c", Line: 1, Args: []Arg{{Param: "ap", Var: "a"}}}}
	m, err := Generate(f, jps, GenOptions{Path: "p.klasy", RefAddr: 1})
	if err != nil {
		t.Fatal(err)
	}
	c := string(m.Files[m.Name+".c"])
	lines := strings.Split(c, "\n")
	for _, tt := range []struct {
		token      string
		line, col  int // in the aspect
		genLineTag string
	}{
		{"nosuch", 4, strings.Index(strings.Split(src, "\n")[3], "nosuch") + 1, "nosuch"},
		{"other", 5, strings.Index(strings.Split(src, "\n")[4], "other") + 1, "other"},
	} {
		var col int
		for _, l := range lines {
			if i := strings.Index(l, tt.token); i >= 0 && strings.Contains(l, "STORE_DATA") {
				col = i + 1
			}
		}
		if col == 0 {
			t.Fatalf("%s not in the generated C:\n%s", tt.token, c)
		}
		pos, ok := m.Position(tt.line, col)
		if !ok || pos.Line != tt.line || pos.Col != tt.col {
			t.Errorf("%s at generated column %d maps to %v, want %d:%d", tt.token, col, pos, tt.line, tt.col)
		}
	}
}
