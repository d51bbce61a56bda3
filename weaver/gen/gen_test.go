package gen

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/klasy/klasy/aspect"
	"github.com/klasy/klasy/internal/cachedir"
	"github.com/klasy/klasy/internal/golden"
	"github.com/klasy/klasy/kbuild"
	"github.com/klasy/klasy/weaver/internal/weavertest"
	"github.com/klasy/klasy/weaver/joinpoint"
	"github.com/klasy/klasy/weaver/resolve"
	"github.com/klasy/klasy/weaver/runtime"
)

// TestGenerateGolden keeps the advice modules of the test aspects in
// testdata/gen/*.c, and builds them against Debian's headers with the
// runtime's symbols: the generated C must compile without a warning.
func TestGenerateGolden(t *testing.T) {
	x := weavertest.DebianIndex(t)
	var mods []*Module
	for _, p := range weavertest.GoldenAspects {
		f := weavertest.LoadAspect(t, p)
		jps, err := resolve.Resolve(f, x, resolve.ResolveOptions{})
		if err != nil {
			t.Fatal(err)
		}
		joinpoint.SortJoinPoints(jps)
		m, err := Generate(f, jps, GenOptions{Path: filepath.Base(p), RefAddr: x.Funcs(KASLRRef)[0].Entry})
		if err != nil {
			t.Fatal(err)
		}
		golden.Check(t, filepath.Join("testdata", "gen", m.Name+".c"), string(m.Files[m.Name+".c"]))
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
	jps := []*joinpoint.JoinPoint{{Advice: 1, Kind: joinpoint.Kprobe, Addr: 0x1000, Function: "f", File: "f.c", Line: 1, Args: []joinpoint.Arg{{Param: "ap", Var: "a"}}}}
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
