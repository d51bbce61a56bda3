package aspect

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klasy/klasy/internal/golden"
)

// TestCheckGolden pins what `klasy check` prints for each invalid aspect
// under testdata (the figures as the PDF extraction printed them, and
// inputs written to fail): every diagnostic, in order. The other aspects
// must check without one; xflow's goldens pin their translations.
func TestCheckGolden(t *testing.T) {
	inputs, err := filepath.Glob("testdata/*/*.klasy")
	if err != nil {
		t.Fatal(err)
	}
	more, err := filepath.Glob("testdata/figures/as_extracted/*.klasy")
	if err != nil {
		t.Fatal(err)
	}
	inputs = append(inputs, more...)
	if len(inputs) < 10 {
		t.Fatalf("%d aspects under testdata", len(inputs))
	}
	for _, in := range inputs {
		// Named from the repository root, as klasy check run there
		// prints them.
		name := "aspect/" + filepath.ToSlash(in)
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			_, diags := Load(name, src)
			if !strings.Contains(in, "/invalid/") && !strings.Contains(in, "/as_extracted/") {
				if len(diags) > 0 {
					t.Errorf("klasy check rejects a valid aspect:\n%v", diags)
				}
				return
			}
			if len(diags) == 0 {
				t.Fatal("klasy check accepts an invalid aspect")
			}
			var b strings.Builder
			for _, d := range diags {
				b.WriteString(d.String() + "\n")
			}
			golden.Check(t, filepath.Join("testdata", "golden", strings.TrimSuffix(strings.ReplaceAll(strings.TrimPrefix(filepath.ToSlash(in), "testdata/"), "/", "__"), ".klasy")+".golden"), b.String())
		})
	}
}
