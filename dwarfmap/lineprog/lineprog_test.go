package lineprog

import (
	"debug/dwarf"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klasy/klasy/dwarfmap/table"
	"github.com/klasy/klasy/internal/testenv"
	"github.com/klasy/klasy/lab"
)

// compareAll decodes every unit's line table of f with debug/dwarf's
// LineReader and Decode, and reads its header with a Header (one for
// all units, as a scan reuses it), and fails t where they differ.
func compareAll(t *testing.T, f *elf.File) (units, rows int) {
	t.Helper()
	d, err := f.DWARF()
	if err != nil {
		t.Fatal(err)
	}
	sec := func(name string) []byte {
		s := f.Section(name)
		if s == nil {
			return nil
		}
		b, err := s.Data()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	s := Sections{Line: sec(".debug_line"), Str: sec(".debug_str"), LineStr: sec(".debug_line_str")}
	r := d.Reader()
	names := NewNames() // shared by the units, as a build's worker shares it
	var h Header
	for {
		cu, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		if cu == nil {
			break
		}
		if cu.Tag != dwarf.TagCompileUnit {
			r.SkipChildren()
			continue
		}
		u := Unit{StmtList: -1, AddrSize: r.AddressSize()}
		if off, ok := cu.Val(dwarf.AttrStmtList).(int64); ok {
			u.StmtList = off
		}
		u.CompDir, _ = cu.Val(dwarf.AttrCompDir).(string)
		checkHeader(t, d, cu, s, u, &h)
		wantFiles, wantRows := readerRows(t, d, cu)
		files, got, err := Decode(s, u, nil, names)
		if err != nil {
			t.Fatalf("unit at %#x: %v", cu.Offset, err)
		}
		if fmt.Sprint(files) != fmt.Sprint(wantFiles) {
			t.Fatalf("unit at %#x: files\n%q, debug/dwarf's\n%q", cu.Offset, files, wantFiles)
		}
		if len(got) != len(wantRows) {
			t.Fatalf("unit at %#x: %d rows, debug/dwarf %d", cu.Offset, len(got), len(wantRows))
		}
		for i := range got {
			if got[i] != wantRows[i] {
				t.Fatalf("unit at %#x: row %d: %+v, debug/dwarf %+v", cu.Offset, i, got[i], wantRows[i])
			}
		}
		units, rows = units+1, rows+len(got)
		r.SkipChildren()
	}
	return units, rows
}

// checkHeader fails t unless h reads u's header where debug/dwarf's
// LineReader does, and names its files as LineFile.Name does.
func checkHeader(t *testing.T, d *dwarf.Data, cu *dwarf.Entry, s Sections, u Unit, h *Header) {
	t.Helper()
	lr, lrErr := d.LineReader(cu)
	if err := h.Read(s, u); (err != nil) != (lrErr != nil) {
		t.Fatalf("unit at %#x: Header.Read: %v, debug/dwarf: %v", cu.Offset, err, lrErr)
	}
	var want []string
	if lr != nil {
		for _, f := range lr.Files() {
			name := ""
			if f != nil {
				name = f.Name
			}
			want = append(want, name)
		}
	}
	got := make([]string, h.Files())
	for i := range got {
		got[i] = h.File(i)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) || h.File(len(got)) != "" || h.File(-1) != "" {
		t.Fatalf("unit at %#x: header's files\n%q, debug/dwarf's\n%q", cu.Offset, got, want)
	}
}

// readerRows is what dwarfmap's index build made of debug/dwarf's
// LineReader before Decode replaced it.
func readerRows(t *testing.T, d *dwarf.Data, cu *dwarf.Entry) ([]string, []table.Row) {
	lr, err := d.LineReader(cu)
	if err != nil {
		t.Fatal(err)
	}
	if lr == nil {
		return nil, nil
	}
	var files []string
	local := map[*dwarf.LineFile]uint32{}
	fileIdx := func(f *dwarf.LineFile) uint32 {
		i, ok := local[f]
		if !ok {
			i = uint32(len(files))
			name := ""
			if f != nil {
				name = path.Clean(f.Name)
			}
			files = append(files, name)
			local[f] = i
		}
		return i
	}
	for _, f := range lr.Files() {
		fileIdx(f)
	}
	var rows []table.Row
	var le dwarf.LineEntry
	for {
		if err := lr.Next(&le); err != nil {
			if errors.Is(err, io.EOF) {
				return files, rows
			}
			t.Fatal(err)
		}
		var fl uint16
		for _, b := range []struct {
			on   bool
			flag uint16
		}{{le.IsStmt, table.RowStmt}, {le.EndSequence, table.RowEndSequence}, {le.PrologueEnd, table.RowPrologueEnd},
			{le.EpilogueBegin, table.RowEpilogueBegin}, {le.BasicBlock, table.RowBasicBlock}} {
			if b.on {
				fl |= b.flag
			}
		}
		rows = append(rows, table.Row{Addr: le.Address, File: fileIdx(le.File), Line: uint32(le.Line),
			Discriminator: uint32(le.Discriminator), Column: uint16(min(le.Column, 0xffff)), Flags: fl})
	}
}

// TestDecodeAsDebugDwarf compiles dwarfmap's fixture with each DWARF
// version gcc emits and checks Decode against debug/dwarf on every unit.
func TestDecodeAsDebugDwarf(t *testing.T) {
	// "2 -gstrict-dwarf": no DWARF 3+ extensions in a DWARF 2 unit.
	for _, v := range []string{"2", "2 -gstrict-dwarf", "3", "4", "5"} {
		t.Run("dwarf"+v, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "fixture")
			args := append(strings.Fields("-O2 -g -gdwarf-"+v), "-nostdlib", "-Wl,-e,main", "-Wl,--unresolved-symbols=ignore-all",
				"-o", out, "../testdata/fixture.c", "../testdata/strong.c")
			testenv.GCC(t, args...)
			f, err := elf.Open(out)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if units, rows := compareAll(t, f); units < 2 || rows < 20 {
				t.Fatalf("%d units, %d rows: the fixture should have more", units, rows)
			}
		})
	}
}

// TestDecodeVmlinux checks Decode and Header against debug/dwarf on
// every unit of the lab kernels' vmlinux.
func TestDecodeVmlinux(t *testing.T) {
	for _, flavor := range []string{lab.Built, lab.Debian} {
		t.Run(flavor, func(t *testing.T) {
			if testing.Short() {
				t.Skip("-short: reads a whole kernel")
			}
			k, err := lab.FindKernel(flavor)
			testenv.Need(t, flavor+"-kernel", err)
			f, err := elf.Open(k.Vmlinux)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			units, rows := compareAll(t, f)
			t.Logf("%d units, %d rows as debug/dwarf decodes them", units, rows)
		})
	}
}

// TestDecodeTruncated checks that a line table cut short is an error,
// wherever it is cut.
func TestDecodeTruncated(t *testing.T) {
	// A DWARF 4 table: one file, a set_address, a row and an
	// end_sequence.
	prog := []byte{0, 9, lneSetAddress, 0x10, 0, 0, 0, 0, 0, 0, 0, lnsCopy, 0, 1, lneEndSequence}
	hdr := []byte{1, 1, 1, 0xfb, 14, 13, 0, 1, 1, 1, 1, 0, 0, 0, 1, 0, 0, 1, // min_inst .. opcode lengths
		0,                         // no directories
		'a', '.', 'c', 0, 0, 0, 0, // a.c, dir 0, mtime, length
		0}
	body := append([]byte{4, 0}, le32(uint32(len(hdr)))...)
	body = append(append(body, hdr...), prog...)
	line := append(le32(uint32(len(body))), body...)
	u := Unit{StmtList: 0, CompDir: "/src", AddrSize: 8}
	files, rows, err := Decode(Sections{Line: line}, u, nil, nil)
	if err != nil || fmt.Sprint(files) != "[ /src/a.c]" || len(rows) != 2 || rows[0].Addr != 0x10 || rows[1].Flags&table.RowEndSequence == 0 {
		t.Fatalf("whole table: files %q, rows %+v, %v", files, rows, err)
	}
	var h Header
	if err := h.Read(Sections{Line: line}, u); err != nil || h.Files() != 2 || h.File(0) != "" || h.File(1) != "/src/a.c" {
		t.Fatalf("whole header: %d files (%q), %v", h.Files(), h.File(1), err)
	}
	for n := 1; n < len(line); n++ { // (0 bytes: no .debug_line, no table)
		short := append([]byte(nil), line[:n]...)
		if _, _, err := Decode(Sections{Line: short}, u, nil, nil); err == nil {
			t.Errorf("cut to %d of %d bytes: no error", n, len(line))
		}
		// The table's length covers its program: a Header refuses
		// any cut too, and names no file after it.
		if err := h.Read(Sections{Line: short}, u); err == nil || h.Files() != 0 || h.File(1) != "" {
			t.Errorf("header cut to %d of %d bytes: %d files, %v", n, len(line), h.Files(), err)
		}
	}
}

func le32(v uint32) []byte { return []byte{byte(v), byte(v >> 8), byte(v >> 16), byte(v >> 24)} }
