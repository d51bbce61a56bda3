package diescan

import (
	"debug/dwarf"
	"fmt"
	"strings"
	"testing"
)

// TestTypeDIEsMatchDebugDwarf reads every DIE of the test input with
// NextType and checks the attributes a struct layout needs against
// debug/dwarf's reading: accessinfer's types were read with debug/dwarf
// and must come out the same.
func TestTypeDIEsMatchDebugDwarf(t *testing.T) {
	// What each variant must have read: DWARF 2's member locations are
	// expressions (not constants), -c compiles a.c alone, without b.c's
	// bitfields.
	all := []string{"member", "bitfield", "count or bound"}
	for _, c := range []struct {
		flags []string
		kinds []string
	}{
		{[]string{"-O2", "-gdwarf-5"}, all}, {[]string{"-O0", "-gdwarf-4"}, all},
		{[]string{"-O2", "-gdwarf-2", "-gstrict-dwarf"}, all[1:]}, {[]string{"-O2", "-gdwarf-5", "-c"}, []string{"member", "count or bound"}},
	} {
		flags := c.flags
		t.Run(strings.Join(flags, " "), func(t *testing.T) {
			img := compile(t, flags...)
			d, err := img.DWARF()
			if err != nil {
				t.Fatal(err)
			}
			secs := NewSections(img.Section)
			cache := Abbrevs{}
			seen := map[string]int{}
			for _, u := range units(t, secs.Info) {
				s, err := NewUnit(secs, u[0], u[1], cache)
				if err != nil {
					t.Fatal(err)
				}
				var ud DIE
				if !s.UnitDIE(&ud) {
					t.Fatalf("unit at %#x: no unit DIE: %v", u[0], s.Err())
				}
				s.Seek(ud.Off)
				var die TypeDIE
				if !s.NextType(&die) {
					t.Fatalf("unit at %#x: %v", u[0], s.Err())
				}
				checkType(t, d, &die, seen)
				for depth := 1; depth > 0; {
					if !s.NextType(&die) {
						if s.Err() != nil {
							t.Fatalf("DIE at %#x: %v", die.Off, s.Err())
						}
						depth--
						continue
					}
					checkType(t, d, &die, seen)
					if die.Children {
						depth++
					}
				}
			}
			for _, k := range c.kinds {
				if seen[k] == 0 {
					t.Errorf("no %s read: %v", k, seen)
				}
			}
		})
	}
}

func checkType(t *testing.T, d *dwarf.Data, die *TypeDIE, seen map[string]int) {
	t.Helper()
	r := d.Reader()
	r.Seek(dwarf.Offset(die.Off))
	e, err := r.Next()
	if err != nil || e == nil || e.Offset != dwarf.Offset(die.Off) {
		t.Fatalf("debug/dwarf has no DIE at %#x: %v", die.Off, err)
	}
	num := func(a dwarf.Attr) string {
		if v, ok := e.Val(a).(int64); ok {
			return fmt.Sprint(v)
		}
		return "-"
	}
	has := func(ok bool, v int64) string {
		if ok {
			return fmt.Sprint(v)
		}
		return "-"
	}
	name, _ := e.Val(dwarf.AttrName).(string)
	typ, _ := e.Val(dwarf.AttrType).(dwarf.Offset)
	sib, _ := e.Val(dwarf.AttrSibling).(dwarf.Offset)
	size, _ := e.Val(dwarf.AttrByteSize).(int64)
	const f = "%v children %v name %q type %#x sibling %#x size %d/%s loc %s bits %s data-bit %s bit %s count %s upper %s"
	want := fmt.Sprintf(f, e.Tag, e.Children, name, typ, sib, size, num(dwarf.AttrByteSize), num(dwarf.AttrDataMemberLoc),
		num(dwarf.AttrBitSize), num(dwarf.AttrDataBitOffset), num(dwarf.AttrBitOffset), num(dwarf.AttrCount), num(dwarf.AttrUpperBound))
	got := fmt.Sprintf(f, die.Tag, die.Children, die.Name, die.Type, die.Sibling, die.ByteSize, has(die.HasByteSize, die.ByteSize),
		has(die.HasMemberLoc, die.MemberLoc), has(die.HasBitSize, die.BitSize), has(die.HasDataBitOffset, die.DataBitOffset),
		has(die.HasBitOffset, die.BitOffset), has(die.HasCount, die.Count), has(die.HasUpperBound, die.UpperBound))
	if got != want {
		t.Errorf("DIE at %#x:\n got %s\nwant %s", die.Off, got, want)
	}
	switch {
	case die.HasBitSize:
		seen["bitfield"]++
	case die.HasMemberLoc:
		seen["member"]++
	case die.HasCount || die.HasUpperBound:
		seen["count or bound"]++
	}
}
