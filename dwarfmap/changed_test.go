package dwarfmap

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/klasy/klasy/internal/mmapfile"
)

// wantChanged fails t unless err says that the file p changed while it
// was read.
func wantChanged(t *testing.T, what string, err error, p string) {
	t.Helper()
	var ce *mmapfile.ChangedError
	if !errors.As(err, &ce) || err.Error() != p+" changed while it was read" {
		t.Errorf("%s: %v, want %q", what, err, p+" changed while it was read")
	}
}

// copyFile copies src to dir/name.
func copyFile(t *testing.T, src, dir, name string) string {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// The queries that read the image (variables, layouts, basic blocks)
// or the index file, each truncated under an index loaded from the
// cache, say which file changed.
func TestQueriesFileChanged(t *testing.T) {
	src := compile(t, fixture{"-O2", true})
	dir, cache := t.TempDir(), t.TempDir()
	p := copyFile(t, src, dir, "image")
	x, _, _ := loadInto(t, p, cache)
	entry := x.Funcs("process")[0].Entry
	x.Close()
	cont := marker(t, "continued")

	x, info, _ := loadInto(t, p, cache)
	defer x.Close()
	if !info.FromCache {
		t.Fatal("not loaded from the cache")
	}
	if err := os.Truncate(p, 0); err != nil {
		t.Fatal(err)
	}
	_, err := x.VarsAt(entry)
	wantChanged(t, "VarsAt", err, p)
	_, err = x.VarsAtLine("process", cont)
	wantChanged(t, "VarsAtLine", err, p)
	_, err = x.Struct("packet")
	wantChanged(t, "Struct", err, p)
	_, err = x.BasicBlock(entry)
	wantChanged(t, "BasicBlock", err, p)
	// A line without code: the nearest-line rule decodes basic blocks.
	_, err = x.Lines(LineSpec{File: "fixture.c", Line: cont})
	wantChanged(t, "Lines (nearest line)", err, p)

	// The index file truncated in place (writers rename; a cp over it
	// would not): the first query to read a section faults. (Cut at a
	// page boundary instead, the checks may first find zeros at the end
	// of the page left, and rebuild the index.)
	y, info, _ := loadInto(t, src, cache)
	y.Close()
	y, info, _ = loadInto(t, src, cache)
	defer y.Close()
	if !info.FromCache {
		t.Fatal("not loaded from the cache")
	}
	if err := os.Truncate(info.CachePath, 0); err != nil {
		t.Fatal(err)
	}
	_, err = y.Lines(LineSpec{Func: "process"})
	wantChanged(t, "Lines, index truncated", err, info.CachePath)
	_, err = y.ParseAddr("process+1")
	wantChanged(t, "ParseAddr, index truncated", err, info.CachePath)
}
