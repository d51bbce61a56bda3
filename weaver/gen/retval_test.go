package gen

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klasy/klasy/aspect"
	"github.com/klasy/klasy/internal/cachedir"
	"github.com/klasy/klasy/kbuild"
	"github.com/klasy/klasy/weaver/internal/weavertest"
	"github.com/klasy/klasy/weaver/joinpoint"
	"github.com/klasy/klasy/weaver/resolve"
	"github.com/klasy/klasy/weaver/runtime"
)

// TestRetvalHasTheFunctionsType: a function returning int or _Bool
// leaves the upper half of rax unspecified, so the kretprobe handler
// casts the return value to the function's type before it widens it,
// and $retval$ has that type when every hook of the advice returns it
// (so that $retval$ < 0 holds for -EINVAL). Advice after functions of
// two types keeps an unsigned long, still sign-extended per hook; long
// and pointers need no cast. The module builds without a warning.
func TestRetvalHasTheFunctionsType(t *testing.T) {
	x := weavertest.DebianIndex(t)
	src := `<aspect>
  <advice>
    <pointcut>execution(vfs_fsync)</pointcut>
    <after>if ($retval$ &lt; 0) STORE_DATA($retval$);</after>
  </advice>
  <advice>
    <pointcut>execution(vfs_fsync) OR execution(ksys_lseek) OR execution(capable)</pointcut>
    <after>STORE_DATA($retval$);</after>
  </advice>
  <advice>
    <pointcut>execution(capable)</pointcut>
    <after>STORE_DATA($retval$);</after>
  </advice>
</aspect>
`
	f, diags := aspect.Load("retval.klasy", []byte(src))
	if len(diags) > 0 {
		t.Fatal(diags)
	}
	jps, err := resolve.Resolve(f, x, resolve.ResolveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	joinpoint.SortJoinPoints(jps)
	// The functions' return types, as dwarfmap.Return.C spells them.
	want := map[string]string{"vfs_fsync": "int", "ksys_lseek": "long int", "capable": "_Bool"}
	for _, jp := range jps {
		if jp.Kind != joinpoint.Kretprobe || jp.Skipped != "" {
			continue
		}
		fis := x.Funcs(jp.Function)
		if len(fis) == 0 {
			t.Fatalf("no function %s", jp.Function)
		}
		ret, err := x.ReturnType(fis[0])
		if err != nil {
			t.Fatal(err)
		}
		if ret.C != want[jp.Function] {
			t.Fatalf("%s returns %q, the test expects %q", jp.Function, ret.C, want[jp.Function])
		}
		jp.Returns = ret.C
	}
	m, err := Generate(f, jps, GenOptions{Path: "retval.klasy", RefAddr: x.Funcs(KASLRRef)[0].Entry})
	if err != nil {
		t.Fatal(err)
	}
	c := string(m.Files[m.Name+".c"])
	for _, w := range []string{
		"static void klasy_advice_1(struct klasy_hit *__klasy_hit, unsigned long __klasy_pc, int __klasy_retval)",
		"static void klasy_advice_2(struct klasy_hit *__klasy_hit, unsigned long __klasy_pc, unsigned long __klasy_retval)",
		"static void klasy_advice_3(struct klasy_hit *__klasy_hit, unsigned long __klasy_pc, _Bool __klasy_retval)",
	} {
		if !strings.Contains(c, w) {
			t.Errorf("generated C has no\n\t%s", w)
		}
	}
	// Each kretprobe handler passes its function's value, cast if narrow.
	casts := map[string]string{
		"vfs_fsync":  "(unsigned long)(int)regs_return_value(regs)",
		"capable":    "(unsigned long)(_Bool)regs_return_value(regs)",
		"ksys_lseek": "klasy_advice_2(hit, pc, regs_return_value(regs)",
	}
	for fn, w := range casts {
		h := handlerOf(t, c, fn)
		if !strings.Contains(h, w) {
			t.Errorf("the kretprobe handler of %s does not pass %s:\n%s", fn, w, h)
		}
	}
	if t.Failed() {
		return
	}
	headers := filepath.Join(cachedir.Root(), "debian", "current", "headers")
	ctx := context.Background()
	rt, err := kbuild.Build(ctx, headers, runtime.Sources, kbuild.Options{})
	if err != nil {
		t.Fatalf("building the runtime: %v", err)
	}
	if err := buildGenerated(ctx, headers, rt, m); err != nil {
		t.Fatalf("%+v", err)
	}
}

// handlerOf is the code of the kretprobe hook at function fn in c, from
// its "/* hook N: kretprobe FN at" comment to the next hook's.
func handlerOf(t *testing.T, c, fn string) string {
	t.Helper()
	for _, part := range strings.Split(c, "/* hook ")[1:] {
		if _, rest, ok := strings.Cut(part, ": kretprobe "); ok && strings.HasPrefix(rest, fn+" at ") {
			return part
		}
	}
	t.Fatalf("no kretprobe hook at %s in\n%s", fn, c)
	return ""
}
