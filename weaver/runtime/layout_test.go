package runtime_test

import (
	"debug/dwarf"
	"debug/elf"
	"io/fs"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/klasy/klasy/weaver/records"
	"github.com/klasy/klasy/weaver/runtime"
)

// structType finds the struct called name in d.
func structType(t *testing.T, d *dwarf.Data, name string) *dwarf.StructType {
	t.Helper()
	r := d.Reader()
	for {
		e, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		if e == nil {
			t.Fatalf("no struct %s in the DWARF", name)
		}
		if e.Tag != dwarf.TagStructType || e.Val(dwarf.AttrName) != name || e.Val(dwarf.AttrByteSize) == nil {
			continue
		}
		typ, err := d.Type(e.Offset)
		if err != nil {
			t.Fatal(err)
		}
		return typ.(*dwarf.StructType)
	}
}

// TestRecordLayout builds the runtime with kbuild against the Debian
// kernel's headers (as the lab loads it) and checks struct klasy_record,
// as GCC laid it out, against the offsets weaver/records decodes.
func TestRecordLayout(t *testing.T) {
	k := debianKernel(t)
	dir := buildRuntime(t, k)
	f, err := elf.Open(filepath.Join(dir, runtime.ModuleName+".ko"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d, err := f.DWARF()
	if err != nil {
		t.Fatal(err)
	}

	rec := structType(t, d, "klasy_record")
	if rec.ByteSize != records.HeaderSize {
		t.Errorf("sizeof(struct klasy_record) = %d, records.HeaderSize = %d", rec.ByteSize, records.HeaderSize)
	}
	want := records.Fields()
	if len(rec.Field) != len(want) {
		t.Errorf("struct klasy_record has %d members, records decodes %d", len(rec.Field), len(want))
	}
	for i, m := range rec.Field {
		if i >= len(want) {
			break
		}
		w := want[i]
		size := m.Type.Size()
		if w.Size == 0 { // the flexible array
			size = 0
			if a, ok := m.Type.(*dwarf.ArrayType); !ok || a.Type.Size() != 8 {
				t.Errorf("member %s is %s, want an array of u64", m.Name, m.Type)
			}
		}
		if m.Name != w.Name || m.ByteOffset != int64(w.Offset) || size != int64(w.Size) {
			t.Errorf("member %d: %s at %d, %d bytes; records decodes %s at %d, %d bytes",
				i, m.Name, m.ByteOffset, size, w.Name, w.Offset, w.Size)
		}
	}

	hit := structType(t, d, "klasy_hit")
	for _, m := range hit.Field {
		if m.Name != "vals" {
			continue
		}
		a, ok := m.Type.(*dwarf.ArrayType)
		if !ok || a.Count != records.MaxValues {
			t.Errorf("struct klasy_hit's vals is %s, want %d values (records.MaxValues)", m.Type, records.MaxValues)
		}
	}
}

// TestHeaderConstants checks the constants Go restates from the C
// sources against them.
func TestHeaderConstants(t *testing.T) {
	src := func(name string) string {
		b, err := fs.ReadFile(runtime.Sources, name)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	h, c := src(runtime.Header), src("klasy_core.c")
	for _, tt := range []struct {
		text, macro string
		want        int
	}{
		{h, "KLASY_ABI_VERSION", runtime.ABIVersion},
		{h, "KLASY_MAX_VALUES", records.MaxValues},
		{c, "KLASY_BUFFER_KB_MIN", runtime.BufferKBMin},
		{c, "KLASY_BUFFER_KB_MAX", runtime.BufferKBMax},
	} {
		m := regexp.MustCompile(`(?m)^#define ` + tt.macro + `\s+\(?(\d+)(?: \* (\d+)\))?`).FindStringSubmatch(tt.text)
		if m == nil {
			t.Errorf("no #define %s", tt.macro)
			continue
		}
		v, _ := strconv.Atoi(m[1])
		if m[2] != "" {
			f, _ := strconv.Atoi(m[2])
			v *= f
		}
		if v != tt.want {
			t.Errorf("%s is %d in C, %d in Go", tt.macro, v, tt.want)
		}
	}
}
