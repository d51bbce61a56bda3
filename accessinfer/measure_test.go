package accessinfer

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/klasy/klasy/debugklasy"
	"github.com/klasy/klasy/dwarfmap"
	"github.com/klasy/klasy/dwarfmap/elfimage"
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
	res, err := Infer(img, Options{})
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
	return Compare(b, res, tab, structs)
}

// TestAgainstPlugin builds the fixtures with the plugin and measures
// inference against its records, as the kernel benchmark does.
func TestAgainstPlugin(t *testing.T) {
	so := plugin(t)
	t.Setenv("KLASY_CACHE", t.TempDir())
	exe := build(t, filepath.Join(t.TempDir(), "a.out"), []string{"-fplugin=" + so}, "basic.c")
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
