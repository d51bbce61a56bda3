package xflow

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/klasy/klasy/aspect"
)

// FuzzTranslate: every aspect klasy check accepts translates without
// error into an aspect klasy check accepts again.
func FuzzTranslate(f *testing.F) {
	for _, pat := range []string{"../aspect/testdata/figures/*.klasy", "../examples/*.klasy", "testdata/in/*.klasy"} {
		m, _ := filepath.Glob(pat)
		for _, p := range m {
			if src, err := os.ReadFile(p); err == nil {
				f.Add(src)
			}
		}
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		file, diags := aspect.Load("fuzz.klasy", src)
		if file == nil || len(diags) > 0 {
			return
		}
		out, err := Translate(file)
		if err != nil {
			t.Fatalf("valid aspect does not translate: %v\n%s", err, src)
		}
		var b bytes.Buffer
		if err := aspect.Format(&b, out); err != nil {
			t.Fatal(err)
		}
		if _, diags := aspect.Load("translated.klasy", b.Bytes()); len(diags) > 0 {
			t.Fatalf("translation is invalid: %v\ninput:\n%s\ntranslation:\n%s", diags, src, b.String())
		}
	})
}
