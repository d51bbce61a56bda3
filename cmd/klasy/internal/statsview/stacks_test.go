package statsview

import (
	"bytes"
	"strings"
	"testing"

	"github.com/klasy/klasy/weaver/kstack"
	"github.com/klasy/klasy/weaver/records"
)

// kstackStats: COUNT_STACK's map with two stacks kept and one the
// kernel had no room for.
func kstackStats(t *testing.T) *records.Stats {
	t.Helper()
	st, err := records.ParseStats([]byte("stats abi=19 cpus=2\naspect id=1 name=kstack maps=1 room=1 unclaimed=0 failed=0\n" +
		"map index=0 kind=count name=stacks advice=1 file=kstack.klasy line=15 key=kstack keys=3 dropped=0\n" +
		"key k=1 n=3 v=1\nkey k=2 n=7 v=1\nkey k=3 n=1 v=1\n"))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

var testStacks = map[uint64][]kstack.Frame{
	1: {{Addr: 0xffffffff81000010, Func: "leaf", Offset: 5, File: "fs/open.c", Line: 1300}, {Addr: 0xffffffff81000100, Func: "entry", Offset: 99}},
	2: {{Addr: 0xffffffff81000020, Func: "inner", File: "fs/a.c", Line: 3, Inlined: true}, {Addr: 0xffffffff81000020, Func: "outer", Offset: 32, File: "fs/a.c", Line: 9}},
}

func fakeStacks(id uint64) ([]kstack.Frame, bool) {
	fs, ok := testStacks[id]
	return fs, ok
}

func TestPrintStacks(t *testing.T) {
	var out bytes.Buffer
	if err := Print(&out, &bytes.Buffer{}, "lab fake", kstackStats(t), "", false, fakeStacks); err != nil {
		t.Fatal(err)
	}
	want := `aspect kstack: 1 map

@stacks: COUNT per kernel stack (advice 1, kstack.klasy:15), 3 stacks
@stacks[
    inner fs/a.c:3 (inlined)
    outer+32 fs/a.c:9
]: 7
@stacks[
    leaf+5 fs/open.c:1300
    entry+99
]: 3
@stacks[
    [stack 0x3 not kept: the stack table was full]
]: 1
`
	if out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}
}

func TestFolded(t *testing.T) {
	var out bytes.Buffer
	if err := Folded(&out, "lab fake", kstackStats(t), "", fakeStacks); err != nil {
		t.Fatal(err)
	}
	want := "outer;inner 7\nentry;leaf 3\n[stack_0x3_not_kept:_the_stack_table_was_full] 1\n"
	if out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}
	err := Folded(&out, "lab fake", statsOf(t, "agg"), "", fakeStacks)
	if err == nil || !strings.Contains(err.Error(), "--folded prints maps of kernel stacks (COUNT_STACK, KEY_KSTACK), and lab fake has none") {
		t.Errorf("--folded without a COUNT_STACK map: %v", err)
	}
}

// A COUNT_BY key of a string and a kernel stack (KEY_KSTACK): bpftrace's
// @[comm, kstack], the stack's frames in the key, and --folded with the
// command as the root frame.
func TestStackInByKey(t *testing.T) {
	st, err := records.ParseStats([]byte("stats abi=19 cpus=2\naspect id=1 name=k maps=1 room=1 unclaimed=0 failed=0\n" +
		"map index=0 kind=count name=by_comm advice=1 file=k.klasy line=3 by=1 keys=2 dropped=0\n" +
		"tkey t=0x5 w=100000003,6464,300000008,1 n=4 v=0\n" +
		"tkey t=0x5 w=100000003,6464,300000008,3 n=2 v=0\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !st.HasStacks() {
		t.Fatal("a _BY key's stack not seen")
	}
	for _, v := range st.KStackValues() {
		fs, ok := fakeStacks(v.KStack)
		v.Frames, v.Unkept = fs, !ok
	}
	var out bytes.Buffer
	if err := Print(&out, &bytes.Buffer{}, "lab fake", st, "", false, nil); err != nil {
		t.Fatal(err)
	}
	want := "@by_comm[dd, \n    [stack 0x3 not kept: the stack table was full]\n]: 2\n" +
		"@by_comm[dd, \n    leaf+5 fs/open.c:1300\n    entry+99\n]: 4\n"
	if !strings.Contains(out.String(), want) {
		t.Errorf("got\n%s\nwant it to hold\n%s", out.String(), want)
	}
	out.Reset()
	if err := Folded(&out, "lab fake", st, "", nil); err != nil {
		t.Fatal(err)
	}
	if want := "dd;entry;leaf 4\ndd;[stack_0x3_not_kept:_the_stack_table_was_full] 2\n"; out.String() != want {
		t.Errorf("--folded:\n%s\nwant\n%s", out.String(), want)
	}
}

// TestStackTableNote: klasy stats says when the kernel's table of
// stacks was full or held another stack under a saved stack's id, and
// nothing when it kept every stack.
func TestStackTableNote(t *testing.T) {
	var b strings.Builder
	StackTableNote(&b, &records.Stacks{Room: 4096})
	if b.Len() != 0 {
		t.Errorf("a table that kept every stack: %q", b.String())
	}
	StackTableNote(&b, &records.Stacks{Room: 4096, Full: 2, Collisions: 1})
	for _, want := range []string{
		"klasy: 2 stack saves found the kernel's table of stacks full (4096 stacks): their frames were not kept\n",
		"klasy: 1 stack save had the id of another stack the table holds (a 64-bit hash collision): counted under that stack's frames\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("klasy stats lacks %q:\n%s", want, b.String())
		}
	}
}
