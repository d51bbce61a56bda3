package dwscan

import (
	"debug/dwarf"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klasy/klasy/dwarfmap/elfimage"
	"github.com/klasy/klasy/internal/testenv"
	"github.com/klasy/klasy/lab"
)

// checkFiles compares the file names fileTable gives every unit of img
// with debug/dwarf's LineReader's, and returns how many units it read
// itself (the others: debug/dwarf's, the scan's fallback).
func checkFiles(t *testing.T, img *elfimage.Image) (read, units int) {
	t.Helper()
	d, err := img.DWARF()
	if err != nil {
		t.Fatal(err)
	}
	var ft fileTable
	r := d.Reader()
	for {
		cu, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		if cu == nil {
			return read, units
		}
		r.SkipChildren()
		if cu.Tag != dwarf.TagCompileUnit {
			continue
		}
		units++
		stmt, ok := cu.Val(dwarf.AttrStmtList).(int64)
		compDir, _ := cu.Val(dwarf.AttrCompDir).(string)
		if !ok || !ft.read(img.Section(".debug_line"), img.Section(".debug_str"), img.Section(".debug_line_str"), uint64(stmt), compDir) {
			continue
		}
		read++
		lr, err := d.LineReader(cu)
		if err != nil || lr == nil {
			t.Fatalf("unit at %#x: fileTable read a table debug/dwarf refuses: %v", cu.Offset, err)
		}
		files := lr.Files()
		if len(files) != len(ft.names) {
			t.Fatalf("unit at %#x: %d files, debug/dwarf %d", cu.Offset, len(ft.names), len(files))
		}
		for i, f := range files {
			want := ""
			if f != nil {
				want = f.Name
			}
			if got := ft.name(i); got != want {
				t.Errorf("unit at %#x: file %d %q, debug/dwarf %q", cu.Offset, i, got, want)
			}
		}
	}
}

// TestFileNamesMatchDebugDwarf checks the call sites' file names the
// scan reads from the line tables' headers against debug/dwarf's, on
// fixtures built as DWARF 5, 4 and strict 2 from relative paths (names
// joined with their directories), and on the lab kernels when present.
func TestFileNamesMatchDebugDwarf(t *testing.T) {
	for _, flags := range [][]string{{"-gdwarf-5"}, {"-gdwarf-4"}, {"-gdwarf-2", "-gstrict-dwarf"}} {
		t.Run(strings.Join(flags, " "), func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "a.out")
			args := append([]string{"-O2", "-g", "-no-pie", "-fno-pie", "-o", out,
				"../testdata/basic.c", "../testdata/main.c"}, flags...)
			testenv.GCC(t, args...)
			img, err := elfimage.Open(out)
			if err != nil {
				t.Fatal(err)
			}
			defer img.Close()
			if read, units := checkFiles(t, img); read != units || units == 0 {
				t.Errorf("read %d of %d units' file tables", read, units)
			}
		})
	}
	for _, flavor := range []string{lab.Built, lab.Debian} {
		t.Run(flavor, func(t *testing.T) {
			if testing.Short() {
				t.Skip("-short: reads a whole kernel")
			}
			k, err := lab.FindKernel(flavor)
			testenv.Need(t, flavor+"-kernel", err)
			img, err := elfimage.Open(k.Vmlinux)
			if err != nil {
				t.Fatal(err)
			}
			defer img.Close()
			read, units := checkFiles(t, img)
			t.Logf("%s: read %d of %d units' file tables", flavor, read, units)
			if read != units {
				t.Errorf("read %d of %d units' file tables", read, units)
			}
		})
	}
}
