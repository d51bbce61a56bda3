package resolve

import (
	"testing"

	"github.com/klasy/klasy/weaver/ctxvalue"
	"github.com/klasy/klasy/weaver/internal/weavertest"
	"github.com/klasy/klasy/weaver/joinpoint"
)

// TestResolveInferredDebian resolves the dissertation's access examples
// against Debian's vmlinux, built without the plugin: every join point
// is an exact hook on an instruction whose accesses were inferred, in
// the function the pointcut names, with target(x) bound to the base
// register plus the offset of the struct the member is in, which the
// kernel's own DWARF gives (sched_info inside task_struct).
func TestResolveInferredDebian(t *testing.T) {
	x := weavertest.DebianIndex(t)
	b, err := x.NewBatch()
	if err != nil {
		t.Fatal(err)
	}
	memberOff := func(st, m string) int64 {
		l, err := b.Struct(st)
		if err != nil || l == nil {
			t.Fatalf("struct %s: %v", st, err)
		}
		for _, mm := range l.Members {
			if mm.Name == m {
				return mm.Offset
			}
		}
		t.Fatalf("struct %s has no member %s", st, m)
		return 0
	}
	for _, tt := range []struct {
		aspect, host, access string
		targetOff            int64
	}{
		{"../../examples/inode_trace.klasy", "setattr_prepare", "inode.i_uid", 0},
		{"../../examples/process_switch.klasy", "__schedule", "sched_info.last_arrival", memberOff("task_struct", "sched_info")},
	} {
		jps, err := Resolve(weavertest.LoadAspect(t, tt.aspect), x, ResolveOptions{})
		if err != nil {
			t.Fatalf("%s: %v", tt.aspect, err)
		}
		if len(jps) == 0 {
			t.Fatalf("%s: no join points", tt.aspect)
		}
		for _, jp := range jps {
			where := tt.aspect + ": " + jp.Where()
			if jp.Skipped != "" || !jp.Exact || jp.Kind != joinpoint.Kprobe || jp.Access == nil || !jp.Access.Inferred {
				t.Errorf("%s: %+v, want an exact kprobe on an inferred access", where, jp)
				continue
			}
			if got := jp.Access.Struct + "." + jp.Access.Member; got != tt.access {
				t.Errorf("%s: access %s, want %s", where, got, tt.access)
			}
			if fn := jp.InlinedIn; fn != tt.host && jp.Function != tt.host {
				t.Errorf("%s: in %s, want %s", where, fn, tt.host)
			}
			if err := x.CheckInstruction(jp.Addr); err != nil {
				t.Errorf("%s: %v", where, err)
			}
			v := jp.Args[0].Value
			if v == nil || !jp.Args[0].ByValue || v.Ops[0].Kind != ctxvalue.PushReg || tgtOff(v) != tt.targetOff {
				t.Errorf("%s: target %v, want a register plus %d", where, v, tt.targetOff)
			}
		}
	}
}

// tgtOff is the constant a register-plus-constant program adds.
func tgtOff(v *ctxvalue.Value) int64 {
	var k int64
	for _, op := range v.Ops[1:] {
		if op.Kind == ctxvalue.AddConst {
			k += op.Arg
		}
	}
	return k
}
