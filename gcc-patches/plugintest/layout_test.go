package plugintest_test

import (
	"debug/dwarf"
	"debug/elf"
	"fmt"
	"testing"

	"github.com/klasy/klasy/debugklasy"
)

// layout is what the compiler's own DWARF says about each named struct or
// union member: tag -> member (anonymous members collapsed) -> the
// "offset/size" in bits of every definition with that tag.
type layout map[string]map[string]map[string]bool

func (l layout) add(tag, member string, off, size int64) {
	if l[tag] == nil {
		l[tag] = map[string]map[string]bool{}
	}
	if l[tag][member] == nil {
		l[tag][member] = map[string]bool{}
	}
	l[tag][member][fmt.Sprintf("%d/%d", off, max(size, 0))] = true
}

// fields adds the members of st, offset by base bits, under tag; the
// members of an anonymous member are the container's own.
func (l layout) fields(tag string, st *dwarf.StructType, base int64, depth int) {
	for _, f := range st.Field {
		off := base + f.ByteOffset*8
		size := f.Type.Size() * 8
		if f.BitSize != 0 {
			off, size = base+f.DataBitOffset, f.BitSize
		}
		if f.Name == "" {
			if inner, ok := dwarf.Type(f.Type).(*dwarf.StructType); ok && depth < 16 {
				l.fields(tag, inner, off, depth+1)
			}
			continue
		}
		l.add(tag, f.Name, off, size)
	}
}

func dwarfLayout(t *testing.T, obj string) layout {
	t.Helper()
	f, err := elf.Open(obj)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d, err := f.DWARF()
	if err != nil {
		t.Fatalf("%s: %v", obj, err)
	}
	l := layout{}
	r := d.Reader()
	for {
		e, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		if e == nil {
			return l
		}
		if e.Tag != dwarf.TagStructType && e.Tag != dwarf.TagUnionType {
			continue
		}
		if name, _ := e.Val(dwarf.AttrName).(string); name == "" || e.Val(dwarf.AttrDeclaration) != nil {
			continue
		}
		typ, err := d.Type(e.Offset)
		if err != nil {
			t.Fatalf("%s: type at %#x: %v", obj, e.Offset, err)
		}
		if st, ok := typ.(*dwarf.StructType); ok {
			l.fields(st.StructName, st, 0, 0)
		}
	}
}

// checkLayout compares the offset and size of every access to a tagged
// struct with the compiler's DWARF for the same object: the plugin and
// the debug info must agree on where each member is.
func checkLayout(t *testing.T, obj string, tab *debugklasy.Table) {
	t.Helper()
	l := dwarfLayout(t, obj)
	checked, bad := 0, 0
	for i := range tab.Accesses {
		a := &tab.Accesses[i]
		if a.AnonType || a.NoOffset {
			continue
		}
		want := l[a.Struct][a.Member]
		got := fmt.Sprintf("%d/%d", a.BitOffset, a.BitSize)
		if want[got] {
			checked++
			continue
		}
		if bad++; bad <= 10 {
			t.Errorf("%s:%d %s.%s: offset/size %s bits, DWARF says %v", a.File, a.Line, a.Struct, a.Member, got, want)
		}
	}
	if bad > 10 {
		t.Errorf("... %d accesses disagree with DWARF in all", bad)
	}
	if checked == 0 {
		t.Errorf("%s: no access checked against DWARF", obj)
	}
	t.Logf("%s: %d accesses agree with DWARF", obj, checked)
}
