package tablebuild

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klasy/klasy/dwarfmap/elfimage"
	"github.com/klasy/klasy/internal/mmapfile"
	"github.com/klasy/klasy/internal/testenv"
)

// compileFixture links dwarfmap's testdata/fixture.c as dwarfmap's tests
// compile their -O2 executable fixture.
func compileFixture(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "fixture")
	args := []string{"-O2", "-g", "-fno-asynchronous-unwind-tables", "-gdwarf-5", "-nostdlib", "-Wl,--build-id",
		"-Wl,-e,main", "-Wl,--unresolved-symbols=ignore-all", "-o", out, "../testdata/fixture.c"}
	testenv.GCC(t, args...)
	return out
}

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

// An image truncated or written over while Build reads it: an error that
// says so, never a crash (the fault on the mapping) and never an index.
func TestBuildImageChanged(t *testing.T) {
	src := compileFixture(t)
	dir := t.TempDir()
	for _, c := range []struct {
		name   string
		change func(p string) error
	}{
		{"truncated", func(p string) error { return os.Truncate(p, 4096) }},
		{"written over", func(p string) error {
			f, err := os.OpenFile(p, os.O_WRONLY, 0)
			if err != nil {
				return err
			}
			defer f.Close()
			st, _ := f.Stat()
			_, err = f.WriteAt(bytes.Repeat([]byte{0xa5}, int(st.Size())-4096), 4096)
			return err
		}},
	} {
		p := copyFile(t, src, dir, c.name)
		img, err := elfimage.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.change(p); err != nil {
			t.Fatal(err)
		}
		x, err := Build(img, nil)
		wantChanged(t, "Build, image "+c.name, err, p)
		if x != nil {
			t.Errorf("Build, image %s: an index", c.name)
		}
		img.Close()
	}
}

// The fault can come in a worker goroutine of Build: here the image is
// cut right after .debug_abbrev, so that Build's own goroutine, which
// reads the unit headers and abbreviations, reads no lost page, and the
// worker decoding the one unit (.debug_line, .debug_str) does.
func TestBuildImageTruncatedUnderWorker(t *testing.T) {
	dir := t.TempDir()
	var src strings.Builder
	for i := range 600 {
		fmt.Fprintf(&src, "int function_number_%d(int x)\n{\n\tint y = x * %d;\n\tif (y > 3)\n\t\ty -= %d;\n\treturn y;\n}\n\n", i, i, i)
	}
	src.WriteString("int main(void)\n{\n\treturn 0;\n}\n")
	c := filepath.Join(dir, "big.c")
	if err := os.WriteFile(c, []byte(src.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "big")
	testenv.GCC(t, "-O2", "-g", "-gdwarf-5", "-nostdlib", "-Wl,-e,main", "-o", p, c)
	ef, err := elf.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	var cut uint64
	for _, n := range []string{".debug_info", ".debug_abbrev"} {
		s := ef.Section(n)
		cut = max(cut, s.Offset+s.Size)
	}
	page := uint64(os.Getpagesize())
	cut = (cut + page - 1) &^ (page - 1)
	if s := ef.Section(".debug_line"); s.Offset+s.Size <= cut+page {
		t.Fatalf("gcc laid the sections out otherwise: .debug_line ends at %#x, the cut is at %#x", s.Offset+s.Size, cut)
	}
	ef.Close()
	img, err := elfimage.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer img.Close()
	if err := os.Truncate(p, int64(cut)); err != nil {
		t.Fatal(err)
	}
	progress := 0
	_, err = Build(img, func(done, total int) { progress++ })
	wantChanged(t, "Build", err, p)
	if progress != 0 {
		t.Errorf("Build said progress %d times for the unit it failed on", progress)
	}
}
