package weaver

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/klasy/klasy/aspect"
	"github.com/klasy/klasy/internal/golden"
	"github.com/klasy/klasy/internal/testenv"
	"github.com/klasy/klasy/kbuild"
	"github.com/klasy/klasy/lab"
	"github.com/klasy/klasy/weaver/gen"
	"github.com/klasy/klasy/weaver/internal/weavertest"
	"github.com/klasy/klasy/weaver/joinpoint"
	"github.com/klasy/klasy/weaver/resolve"
	"github.com/klasy/klasy/weaver/runtime"
)

const flowOrderAspect = `<aspect>
  <advice>
    <pointcut>access(sk_buff.len) AND target(skb) AND xflow(f, skb, id)</pointcut>
    <before>STORE_DATA(id);</before>
  </advice>
  <xflow name="f">
    <start><pointcut>access(sk_buff.len) AND within_function(send)</pointcut></start>
    <quit><pointcut>access(sk_buff.len) AND within_function(drop)</pointcut></quit>
  </xflow>
  <advice>
    <pointcut>access(sk_buff.len) AND target(skb)</pointcut>
    <before>STORE_DATA(skb);</before>
  </advice>
</aspect>
`

// TestTranslateFlowsFirst: an aspect with a flow weaves as its
// translation, whose start and quit advice come first, so at a hook
// shared with user advice they run before it; advice with xflow(...)
// runs for flow members only and sets its hit's flow; advice without it
// is kept as written.
func TestTranslateFlowsFirst(t *testing.T) {
	f, diags := aspect.Load("order.klasy", []byte(flowOrderAspect))
	if len(diags) > 0 {
		t.Fatal(diags)
	}
	out, flows, err := Translate(f)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(flows, []string{"f"}) {
		t.Errorf("flows %v, want [f]", flows)
	}
	var bodies []string
	for _, a := range out.Advice {
		bodies = append(bodies, strings.Join(strings.Fields(a.Body.S), " "))
	}
	want := []string{"register_flowid(f,", "remove_flowid(f,", "get_flowid(f, skb)", "STORE_DATA(skb);"}
	if len(bodies) != len(want) {
		t.Fatalf("translation has %d advice, want %d: %q", len(bodies), len(want), bodies)
	}
	for i, w := range want {
		if !strings.Contains(bodies[i], w) {
			t.Errorf("advice %d is %q, want it to contain %q", i+1, bodies[i], w)
		}
	}
	if !strings.Contains(bodies[2], "KLASY_SET_FLOW(id);") {
		t.Errorf("xflow-bound advice does not set its hit's flow: %q", bodies[2])
	}
	if out.Advice[3] != f.Advice[1] {
		t.Errorf("advice without xflow(...) was rewritten")
	}
	// Positions: the rules' code at the rule, the wrapped advice's at
	// its body, in the user's file.
	for i, line := range map[int]int{0: 7, 1: 8, 2: 4} {
		if p := out.Position(out.Advice[i].Body.Offset(0)); p.Line != line || p.Filename != "order.klasy" {
			t.Errorf("advice %d's code is at %v, want order.klasy line %d", i+1, p, line)
		}
	}

	// One hook where start, the xflow advice and the plain advice meet:
	// the flow's advice is called first, then the user's in file order.
	var jps []*joinpoint.JoinPoint
	for _, n := range []int{4, 3, 1} {
		jps = append(jps, &joinpoint.JoinPoint{Advice: n, Kind: joinpoint.Kprobe, Addr: 0x1000, Function: "send", File: "f.c", Line: 1,
			Args: []joinpoint.Arg{{Param: "skb", Var: "skb"}}})
	}
	hooks := joinpoint.Hooks(jps)
	if len(hooks) != 1 {
		t.Fatalf("%d hooks, want 1", len(hooks))
	}
	var order []int
	for _, jp := range hooks[0].Points {
		order = append(order, jp.Advice)
	}
	if !slices.Equal(order, []int{1, 3, 4}) {
		t.Errorf("advice at the hook run in order %v, want [1 3 4]", order)
	}
}

// TestGenerateFlows: the module declares each flow, gets its table
// before the hooks go in and puts it after they are out (and on a
// failed registration).
func TestGenerateFlows(t *testing.T) {
	f, diags := aspect.Load("order.klasy", []byte(flowOrderAspect))
	if len(diags) > 0 {
		t.Fatal(diags)
	}
	out, flows, err := Translate(f)
	if err != nil {
		t.Fatal(err)
	}
	jps := []*joinpoint.JoinPoint{{Advice: 3, Kind: joinpoint.Kprobe, Addr: 0x1000, Function: "send", File: "f.c", Line: 1, Args: []joinpoint.Arg{{Param: "skb", Var: "skb"}}}}
	m, err := gen.Generate(out, jps, gen.GenOptions{Path: "order.klasy", RefAddr: 1, Flows: append(flows, "g")})
	if err != nil {
		t.Fatal(err)
	}
	c := string(m.Files[m.Name+".c"])
	at := func(s string) int {
		i := strings.Index(c, s)
		if i < 0 {
			t.Fatalf("no %q in the module:\n%s", s, c)
		}
		return i
	}
	if !(at("KLASY_DECLARE_FLOW(f);") < at("static void klasy_advice_3") &&
		at("err = KLASY_FLOW_GET(f);") < at("err = KLASY_FLOW_GET(g);") &&
		at("err = KLASY_FLOW_GET(g);") < at("err = klasy_register_aspect(") &&
		at("klasy_unregister_aspect(&klasy_aspect);\n\tKLASY_FLOW_PUT(g);\n\tKLASY_FLOW_PUT(f);") > 0) {
		t.Errorf("flows are not got before registering and put after unregistering:\n%s", c)
	}
	// A failed get of g puts f; a failed registration puts both.
	if !strings.Contains(c, "\tif (!err)\n\t\treturn 0;\n\tKLASY_FLOW_PUT(g);\nput1:\n\tKLASY_FLOW_PUT(f);\nput0:\n\treturn err;") {
		t.Errorf("the init's error path does not put what it got:\n%s", c)
	}
}

// TestGenerateFlowGolden resolves testdata/lanflow.klasy (the two-lab
// flow of examples/netflow_lan.klasy, its advice cut to udp_recvmsg) in
// the built lab kernel, keeps the module in testdata/gen and builds it
// against the lab kernel's build tree with the runtime's symbols.
func TestGenerateFlowGolden(t *testing.T) {
	x := weavertest.BuiltIndex(t)
	k, err := lab.FindKernel(lab.Built)
	testenv.Need(t, "lab-kernel", err)
	p := "testdata/lanflow.klasy"
	f, flows, err := Translate(weavertest.LoadAspect(t, p))
	if err != nil {
		t.Fatal(err)
	}
	jps, err := resolve.Resolve(f, x, resolve.ResolveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	joinpoint.SortJoinPoints(jps)
	for _, n := range []int{1, 2, 3, 4} {
		if !slices.ContainsFunc(jps, func(jp *joinpoint.JoinPoint) bool { return jp.Advice == n && jp.Skipped == "" }) {
			t.Errorf("advice %d of the translation has no join point", n)
		}
	}
	m, err := gen.Generate(f, jps, gen.GenOptions{Path: filepath.Base(p), RefAddr: x.Funcs(gen.KASLRRef)[0].Entry, Flows: flows})
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, filepath.Join("testdata", "gen", m.Name+".c"), string(m.Files[m.Name+".c"]))
	ctx := context.Background()
	rt, err := kbuild.Build(ctx, k.BuildDir, runtime.Sources, kbuild.Options{})
	if err != nil {
		t.Fatalf("building the runtime: %v", err)
	}
	hdr, _ := runtime.Sources.ReadFile(runtime.Header)
	files := fstest.MapFS{
		runtime.Header: {Data: hdr},
		m.Name + ".c":  {Data: m.Files[m.Name+".c"]},
		"Kbuild":       {Data: m.Files["Kbuild"]},
	}
	res, err := kbuild.Build(ctx, k.BuildDir, files, kbuild.Options{ExtraSymbols: [][]byte{rt.Symvers}})
	if err != nil {
		t.Fatalf("%+v", err)
	}
	for _, d := range res.Diagnostics {
		t.Errorf("generated C: %s", d)
	}
}
