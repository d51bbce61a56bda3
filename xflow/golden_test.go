package xflow

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/klasy/klasy/aspect"
	"github.com/klasy/klasy/internal/golden"
)

// goldenInputs are the aspects whose translation is kept as a golden
// file: the dissertation's figures, the Linux 6.1 examples and this
// package's own cases. The diagnostics of invalid aspects are pinned by
// package aspect (TestCheckGolden).
func goldenInputs(t *testing.T) []string {
	var files []string
	for _, pat := range []string{
		"../aspect/testdata/figures/*.klasy",
		"../examples/*.klasy",
		"../aspect/testdata/valid/*.klasy",
		"testdata/in/*.klasy",
	} {
		m, err := filepath.Glob(pat)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) == 0 {
		t.Fatal("no golden inputs found")
	}
	return files
}

// repoPath names a file relative to the repository root, as a user
// running klasy from there would see it.
func repoPath(p string) string {
	p = filepath.ToSlash(p)
	if strings.HasPrefix(p, "../") {
		return p[3:]
	}
	return "xflow/" + p
}

// checkAndTranslate is what `klasy check` and `klasy translate` print;
// the aspect must check without diagnostics.
func checkAndTranslate(name string, src []byte) (string, *aspect.File, error) {
	var b bytes.Buffer
	b.WriteString("== klasy check\n")
	f, diags := aspect.Load(name, src)
	if len(diags) > 0 {
		return "", nil, fmt.Errorf("klasy check rejects it:\n%v", diags)
	}
	b.WriteString("ok\n== klasy translate\n")
	out, err := Translate(f)
	if err != nil {
		return "", nil, err
	}
	if err := aspect.Format(&b, out); err != nil {
		return "", nil, err
	}
	return b.String(), out, nil
}

func TestGolden(t *testing.T) {
	for _, in := range goldenInputs(t) {
		name := repoPath(in)
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			got, out, err := checkAndTranslate(name, src)
			if err != nil {
				t.Fatal(err)
			}
			golden.Check(t, filepath.Join("testdata", "golden", strings.TrimSuffix(strings.ReplaceAll(name, "/", "__"), ".klasy")+".golden"), got)
			roundTrip(t, name, out)
		})
	}
}

// roundTrip checks that a translation is itself a valid aspect, that it
// needs no further translation and that printing is a fixed point.
func roundTrip(t *testing.T, name string, out *aspect.File) {
	var first bytes.Buffer
	out.Comment = ""
	if err := aspect.Format(&first, out); err != nil {
		t.Fatal(err)
	}
	again, diags := aspect.Load(name+".translated", first.Bytes())
	if len(diags) > 0 {
		t.Fatalf("klasy check rejects the translation:\n%v\n%s", diags, first.String())
	}
	if len(again.Flows) != 0 {
		t.Errorf("translation still has %d xflow definitions", len(again.Flows))
	}
	twice, err := Translate(again)
	if err != nil {
		t.Fatal(err)
	}
	var second bytes.Buffer
	if err := aspect.Format(&second, twice); err != nil {
		t.Fatal(err)
	}
	if first.String() != second.String() {
		t.Errorf("translating the translation changed it:\n%s\n---\n%s", first.String(), second.String())
	}
}

// The dissertation's translations (Figures 5.12-5.20, transcribed as
// *.translated.c) are compared by meaning: the same pointcut once
// generated names are numbered, and the same flow runtime calls on the
// same flow and objects, in the same order.
func TestFigureTranslations(t *testing.T) {
	tests := []struct {
		figure string // reference translation
		input  string // aspect it translates
		advice int    // index of the advice in our translation; -1 = last
	}{
		{"fig5_12", "fig5_9", 0},
		{"fig5_13", "fig5_9", 1},
		{"fig5_14", "fig5_8", 0},
		{"fig5_15", "fig5_11", 0},
		{"fig5_16", "fig5_11", 1},
		{"fig5_17", "fig5_9", 2},
		{"fig5_18", "fig5_2", -1},
		{"fig5_20", "fig5_19", -1},
	}
	dir := "../aspect/testdata/figures"
	for _, tt := range tests {
		t.Run(tt.figure, func(t *testing.T) {
			ref := loadReference(t, filepath.Join(dir, tt.figure+".translated.c"))
			src, err := os.ReadFile(filepath.Join(dir, tt.input+".klasy"))
			if err != nil {
				t.Skipf("input not transcribed yet: %v", err)
			}
			f, diags := aspect.Load(tt.input, src)
			if len(diags) > 0 {
				t.Fatal(diags)
			}
			out, err := Translate(f)
			if err != nil {
				t.Fatal(err)
			}
			i := tt.advice
			if i < 0 {
				i = len(out.Advice) - 1
			}
			got := out.Advice[i]
			if g, w := normalize(got.Pointcut.Expr.String()), normalize(ref.Pointcut.Expr.String()); g != w {
				t.Errorf("pointcut\n got %s\nwant %s", g, w)
			}
			if g, w := calls(got.Body.S), calls(ref.Body.S); g != w {
				t.Errorf("runtime calls\n got %s\nwant %s", g, w)
			}
			if got.When != ref.When {
				t.Errorf("advice is %s, figure has %s", got.When, ref.When)
			}
		})
	}
}

func loadReference(t *testing.T, path string) *aspect.Advice {
	src, err := os.ReadFile(path)
	if err != nil {
		t.Skipf("reference not transcribed yet: %v", err)
	}
	// A reference is a lone <advice>; make it an aspect to parse it.
	s := string(src)
	i := strings.Index(s, "\n<advice>") // the comment may name <advice> too
	if i < 0 {
		t.Fatalf("%s: no <advice>", path)
	}
	f, diags := aspect.Parse(path, []byte("<aspect>"+s[i:]+"</aspect>"))
	if len(diags) > 0 || len(f.Advice) != 1 {
		t.Fatalf("%s: %v", path, diags)
	}
	return f.Advice[0]
}

var hidden = regexp.MustCompile(`\b(random_str\w*|__kx\w*)`)

// normalize numbers generated names in order of appearance.
func normalize(s string) string {
	seen := map[string]string{}
	return hidden.ReplaceAllStringFunc(s, func(h string) string {
		if n, ok := seen[h]; ok {
			return n
		}
		seen[h] = fmt.Sprintf("H%d", len(seen)+1)
		return seen[h]
	})
}

var runtimeCall = regexp.MustCompile(`\b(get_new_flowid|register_flowid|get_flowid|remove_flowid)\(\s*(\w*)\s*(?:,\s*(\w+))?`)

// calls lists the flow runtime calls of a body with their flow and
// object arguments (the ID argument differs only in naming).
func calls(body string) string {
	var out []string
	for _, m := range runtimeCall.FindAllStringSubmatch(normalize(body), -1) {
		out = append(out, m[1]+"("+strings.TrimSuffix(m[2]+","+m[3], ",")+")")
	}
	return strings.Join(out, " ")
}

func TestHiddenNamesAvoidInput(t *testing.T) {
	// The user already uses __kx and __kx1 somewhere: generated names
	// must pick a prefix that appears nowhere in the input.
	src := `<aspect>
  <xflow name="f">
    <quit><pointcut>access(sk_buff.%) AND within_function(__kx_f_quit1)</pointcut></quit>
  </xflow>
  <advice>
    <pointcut>access(sk_buff.len) AND target(__kx1) AND xflow(f, __kx1)</pointcut>
    <before>int __kx2_fid1 = 0;</before>
  </advice>
</aspect>
`
	f, diags := aspect.Load("h.klasy", []byte(src))
	if len(diags) > 0 {
		t.Fatal(diags)
	}
	out, err := Translate(f)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	aspect.Format(&b, out)
	for _, want := range []string{"target(__kx3_f_quit1)", "int __kx3_fid1 = get_flowid(f, __kx1);"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("translation lacks %q:\n%s", want, b.String())
		}
	}
	// Same input, same output.
	out2, _ := Translate(f)
	var b2 bytes.Buffer
	aspect.Format(&b2, out2)
	if b.String() != b2.String() {
		t.Error("translation is not deterministic")
	}
}

func TestFlowAdviceFirst(t *testing.T) {
	src := `<aspect>
  <advice>
    <pointcut>access(sk_buff.len) AND target(s) AND xflow(f, s, id)</pointcut>
    <before>use(id);</before>
  </advice>
  <xflow name="f">
    <start><pointcut>access(sk_buff.len)</pointcut></start>
  </xflow>
</aspect>
`
	f, diags := aspect.Load("o.klasy", []byte(src))
	if len(diags) > 0 {
		t.Fatal(diags)
	}
	out, err := Translate(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Advice) != 2 || !strings.Contains(out.Advice[0].Body.S, "get_new_flowid") || !strings.Contains(out.Advice[1].Body.S, "use(id)") {
		t.Fatalf("flow advice must come before user advice, got %+v", out.Advice)
	}
}

// TestNestingLimitTranslates: a rule pointcut as deep as klasy check
// allows, with an OR at the top, translates into an aspect klasy check
// accepts: the added designators must not nest it one level deeper.
func TestNestingLimitTranslates(t *testing.T) {
	deep := strings.Repeat("(", 99) + "access(sk_buff.data)" + strings.Repeat(")", 99)
	src := `<aspect>
  <xflow name="f">
    <start><pointcut>` + deep + ` OR access(sk_buff.len)</pointcut></start>
  </xflow>
</aspect>
`
	f, diags := aspect.Load("deep.klasy", []byte(src))
	if len(diags) > 0 {
		t.Fatal(diags)
	}
	out, err := Translate(f)
	if err != nil {
		t.Fatal(err)
	}
	roundTrip(t, "deep.klasy", out)
}
