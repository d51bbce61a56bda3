package accessinfer

import (
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
