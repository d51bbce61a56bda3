package score

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klasy/klasy/accessinfer"
	"github.com/klasy/klasy/debugklasy"
	"github.com/klasy/klasy/dwarfmap"
	"github.com/klasy/klasy/dwarfmap/elfimage"
	"github.com/klasy/klasy/internal/testenv"
)

// measure infers the accesses of a plugin-built image and compares them
// with its .debug_klasy.
func measure(t testing.TB, path string, structs []string) []Score {
	t.Helper()
	x, _, err := dwarfmap.Load(path, dwarfmap.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	img, err := elfimage.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer img.Close()
	res, err := accessinfer.Infer(img, accessinfer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tab, err := debugklasy.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	b, err := x.NewBatch()
	if err != nil {
		t.Fatal(err)
	}
	return Compare(b, res, tab, structs, "")
}

// buildWithPlugin compiles accessinfer's fixture src (with main.c)
// with gcc -O2 -g and the klasy plugin, as accessinfer's own tests
// build them (infer_test.go's build), or skips without gcc or the
// plugin.
func buildWithPlugin(t testing.TB, src string) string {
	t.Helper()
	so, err := filepath.Abs("../../gcc-patches/klasy.so")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(so); err != nil {
		testenv.Need(t, "plugin", fmt.Errorf("gcc-patches/klasy.so not built: run make plugin"))
	}
	out := filepath.Join(t.TempDir(), "a.out")
	args := []string{"-O2", "-g", "-no-pie", "-fno-pie", "-Wall", "-Wno-unused-function", "-o", out, "-fplugin=" + so}
	for _, s := range []string{src, "main.c"} {
		args = append(args, filepath.Join("..", "testdata", s))
	}
	testenv.GCC(t, args...)
	return out
}

// TestAgainstPlugin builds the fixtures with the plugin and measures
// inference against its records, as the kernel benchmark does.
func TestAgainstPlugin(t *testing.T) {
	t.Setenv("KLASY_CACHE", t.TempDir())
	exe := buildWithPlugin(t, "basic.c")
	scores := measure(t, exe, []string{"skb", "sock", "counters"})
	var b strings.Builder
	PrintScores(&b, scores)
	t.Logf("\n%s", b.String())
	tot := scores[len(scores)-1]
	for _, s := range scores {
		for _, e := range s.UnconfirmedExamples {
			t.Logf("unconfirmed: %s", e)
		}
		for _, e := range s.MissedRecordExamples {
			t.Logf("missed: %s", e)
		}
	}
	// The fixture's one store the plugin does not record: the
	// initializer of a struct on the stack (stack_struct).
	if tot.Inferred-tot.Confirmed > 1 {
		t.Errorf("%d inferred accesses the plugin does not record", tot.Inferred-tot.Confirmed)
	}
	if tot.Recall < 0.85 {
		t.Errorf("recall %.2f, want >= 0.85", tot.Recall)
	}
}

// TestPluginMissesISRA shows where the plugin puts a load that GCC's
// IPA-SRA moved into the callers of a clone (testdata/isra.c: fl_work
// reads f->inode, fl_work.isra.0 takes the value, fl_work0 and
// fl_work1 load it): in fl_work, through its parameter, at fl_work's
// line, where no instruction loads it. Score counts the callers' loads
// as confirmed (ByISRA).
func TestPluginMissesISRA(t *testing.T) {
	t.Setenv("KLASY_CACHE", t.TempDir())
	exe := buildWithPlugin(t, "isra.c")
	tab, err := debugklasy.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	recs := map[string]int{}
	for i := range tab.Accesses {
		if r := &tab.Accesses[i]; r.Struct == "fl" {
			recs[r.Function.Name+" "+r.Member+" "+r.Base.Kind.String()]++
		}
	}
	if recs["fl_work inode param"] == 0 || recs["fl_work0 inode param"]+recs["fl_work1 inode param"] != 0 {
		t.Errorf("the plugin's records of fl.inode are not in fl_work alone now: %v", recs)
	}
	scores := measure(t, exe, []string{"fl"})
	s := scores[0]
	for _, e := range s.UnconfirmedExamples {
		t.Logf("unconfirmed: %s", e)
	}
	// fl_work0's and fl_work1's loads of f->inode, fl_priv's f->priv.
	if s.Inferred != 3 || s.Confirmed != 3 || s.ByISRA != 2 {
		t.Errorf("inferred %d, confirmed %d, by IPA-SRA %d; want 3, 3, 2", s.Inferred, s.Confirmed, s.ByISRA)
	}
}

// TestHelperBaseConfirmed: in testdata/helperbase.c the scheduler moves
// fl_ino's load of f->inode among the instructions of the line before
// start_write's call, where its own row is lost; the plugin records
// ino.mode at start_write's line through "fl_ino(f)", and f->inode in
// fl_ino through its parameter. Score confirms the load, and the store
// through fl_cb(f), a helper taking f->cb's address (qdisc_skb_cb).
func TestHelperBaseConfirmed(t *testing.T) {
	t.Setenv("KLASY_CACHE", t.TempDir())
	exe := buildWithPlugin(t, "helperbase.c")
	s := measure(t, exe, []string{"fl2"})[0]
	for _, e := range s.UnconfirmedExamples {
		t.Logf("unconfirmed: %s", e)
	}
	// f->mode, f->inode (moved), f->priv, fl_cb(f)->b.
	if s.Inferred != 4 || s.Confirmed != 4 || s.ByHelper != 2 {
		t.Errorf("inferred %d, confirmed %d, by helper %d; want 4, 4, 2", s.Inferred, s.Confirmed, s.ByHelper)
	}
}

// TestBitfieldValueTest: testdata/bitvalue.c's !!p->ready, a bitfield
// tested against zero, compiles to a shift and a mask on the loaded
// unit: inference cannot mark the load a test, the plugin records no
// access (its blind spot for bitfield tests), and the source names the
// member at the load's line. Score counts it confirmed by the source.
func TestBitfieldValueTest(t *testing.T) {
	t.Setenv("KLASY_CACHE", t.TempDir())
	exe := buildWithPlugin(t, "bitvalue.c")
	tab, err := debugklasy.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	for i := range tab.Accesses {
		if r := &tab.Accesses[i]; r.Member == "ready" {
			t.Errorf("the plugin records !!p->ready now (%s:%d): the source need not confirm it", r.File, r.Line)
		}
	}
	x, _, err := dwarfmap.Load(exe, dwarfmap.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	img, err := elfimage.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer img.Close()
	res, err := accessinfer.Infer(img, accessinfer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := x.NewBatch()
	if err != nil {
		t.Fatal(err)
	}
	// The fixture's file names are relative to this directory.
	s := Compare(b, res, tab, []string{"bv"}, ".")[0]
	for _, e := range s.UnconfirmedExamples {
		t.Logf("unconfirmed: %s", e)
	}
	if s.Inferred != 2 || s.Confirmed != 1 || s.SourceConfirmed != 1 {
		t.Errorf("inferred %d, confirmed %d, by the source %d; want 2, 1, 1", s.Inferred, s.Confirmed, s.SourceConfirmed)
	}
}
