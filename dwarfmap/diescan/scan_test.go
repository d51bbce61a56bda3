package diescan

import (
	"debug/dwarf"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/klasy/klasy/dwarfmap/elfimage"
	"github.com/klasy/klasy/internal/testenv"
)

// compile builds testdata/a.c and b.c with gcc and flags (only a.c with
// -c) and opens the result.
func compile(t *testing.T, flags ...string) *elfimage.Image {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out")
	args := append(flags, "-g", "-fno-asynchronous-unwind-tables", "-o", out, "testdata/a.c")
	if slices.Contains(flags, "-c") {
		// One unit, relocatable, like a .ko.
	} else {
		args = append(args, "testdata/b.c", "-nostdlib", "-Wl,-e,main", "-Wl,--unresolved-symbols=ignore-all")
	}
	testenv.GCC(t, args...)
	img, err := elfimage.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { img.Close() })
	return img
}

// units lists [start, end) of each unit in info, from the unit lengths.
func units(t testing.TB, info []byte) [][2]uint64 {
	var out [][2]uint64
	for off := uint64(0); off+4 <= uint64(len(info)); {
		n := uint64(binary.LittleEndian.Uint32(info[off:]))
		if n >= 0xfffffff0 {
			t.Fatalf("64-bit DWARF in the test input")
		}
		out = append(out, [2]uint64{off, off + 4 + n})
		off += 4 + n
	}
	return out
}

// TestMatchesDebugDwarf scans every DIE of the test input, descending
// into every subtree, and checks each one the scanner decodes against
// debug/dwarf's reading of it.
func TestMatchesDebugDwarf(t *testing.T) {
	for _, flags := range [][]string{
		{"-O2", "-gdwarf-5"}, {"-O0", "-gdwarf-5"}, {"-O2", "-gdwarf-4"}, {"-O0", "-gdwarf-4"},
		{"-O2", "-gdwarf-5", "-c"}, {"-O2", "-gdwarf-4", "-c"}, {"-O2", "-gdwarf-5", "-gz"},
	} {
		t.Run(strings.Join(flags, " "), func(t *testing.T) {
			img := compile(t, flags...)
			d, err := img.DWARF()
			if err != nil {
				t.Fatal(err)
			}
			secs := NewSections(img.Section)
			cache := Abbrevs{}
			seen := map[dwarf.Tag]int{}
			for _, u := range units(t, secs.Info) {
				s, err := NewUnit(secs, u[0], u[1], cache)
				if err != nil {
					t.Fatal(err)
				}
				if v := s.Version(); fmt.Sprintf("-gdwarf-%d", v) != flags[1] {
					t.Errorf("unit at %#x: version %d with %s", u[0], v, flags[1])
				}
				var die DIE
				if !s.UnitDIE(&die) {
					t.Fatalf("unit at %#x: no unit DIE: %v", u[0], s.Err())
				}
				check(t, d, s, &die)
				seen[die.Tag]++
				for depth := 1; depth > 0; {
					if !s.Next(&die) {
						if s.Err() != nil {
							t.Fatalf("DIE at %#x: %v", die.Off, s.Err())
						}
						depth--
						continue
					}
					if wanted(die.Tag) {
						check(t, d, s, &die)
						seen[die.Tag]++
					} else {
						checkSibling(t, d, &die)
					}
					if die.Children {
						depth++
					}
				}
			}
			for _, tag := range []dwarf.Tag{dwarf.TagCompileUnit, dwarf.TagSubprogram, dwarf.TagInlinedSubroutine, dwarf.TagStructType, dwarf.TagUnionType, dwarf.TagTypedef} {
				if seen[tag] == 0 && (tag != dwarf.TagInlinedSubroutine || flags[0] == "-O2") {
					t.Errorf("no %v DIE scanned: %v", tag, seen)
				}
			}
		})
	}
}

// checkSibling compares the one value Next keeps of a DIE it does not
// decode, its DW_AT_sibling (a caller skips its children by it), with
// debug/dwarf's.
func checkSibling(t *testing.T, d *dwarf.Data, die *DIE) {
	t.Helper()
	r := d.Reader()
	r.Seek(dwarf.Offset(die.Off))
	e, err := r.Next()
	if err != nil || e == nil {
		t.Fatalf("debug/dwarf has no DIE at %#x: %v", die.Off, err)
	}
	want, _ := e.Val(dwarf.AttrSibling).(dwarf.Offset)
	if die.Sibling != uint64(want) {
		t.Errorf("%v at %#x: sibling %#x, debug/dwarf %#x", e.Tag, e.Offset, die.Sibling, want)
	}
}

// check compares the DIE the scanner read with debug/dwarf's.
func check(t *testing.T, d *dwarf.Data, s *Unit, die *DIE) {
	t.Helper()
	r := d.Reader()
	r.Seek(dwarf.Offset(die.Off))
	e, err := r.Next()
	if err != nil || e == nil || e.Offset != dwarf.Offset(die.Off) {
		t.Fatalf("debug/dwarf has no DIE at %#x: %v", die.Off, err)
	}
	where := fmt.Sprintf("%v at %#x", e.Tag, e.Offset)
	if die.Tag != e.Tag || die.Children != e.Children {
		t.Errorf("%s: scanned as %v, children %v", where, die.Tag, die.Children)
	}
	str := func(a dwarf.Attr) string { v, _ := e.Val(a).(string); return v }
	num := func(a dwarf.Attr, none int64) int64 {
		if v, ok := e.Val(a).(int64); ok {
			return v
		}
		return none
	}
	ref := func(a dwarf.Attr) uint64 { v, _ := e.Val(a).(dwarf.Offset); return uint64(v) }
	flag := func(a dwarf.Attr) bool { v, _ := e.Val(a).(bool); return v }
	low, hasLow := e.Val(dwarf.AttrLowpc).(uint64)
	entry, hasEntry := e.Val(dwarf.AttrEntrypc).(uint64)
	got := fmt.Sprintf("name %q dir %q low %v/%#x entry %v/%#x origin %#x spec %#x type %#x sibling %#x external %v decl %v inline %d decl %d:%d call %d:%d size %d",
		die.Name, die.CompDir, die.HasLow, die.Low, die.HasEntryPC, die.EntryPC, die.Origin, die.Spec, die.Type, die.Sibling,
		die.External, die.Decl, die.Inline, die.DeclFile, die.DeclLine, die.CallFile, die.CallLine, die.ByteSize)
	want := fmt.Sprintf("name %q dir %q low %v/%#x entry %v/%#x origin %#x spec %#x type %#x sibling %#x external %v decl %v inline %d decl %d:%d call %d:%d size %d",
		str(dwarf.AttrName), str(dwarf.AttrCompDir), hasLow, low, hasEntry, entry, ref(dwarf.AttrAbstractOrigin), ref(dwarf.AttrSpecification), ref(dwarf.AttrType), ref(dwarf.AttrSibling),
		flag(dwarf.AttrExternal), flag(dwarf.AttrDeclaration), num(dwarf.AttrInline, 0), num(dwarf.AttrDeclFile, -1), num(dwarf.AttrDeclLine, 0),
		num(dwarf.AttrCallFile, -1), num(dwarf.AttrCallLine, 0), num(dwarf.AttrByteSize, 0))
	if got != want {
		t.Errorf("%s:\n got %s\nwant %s", where, got, want)
	}
	switch e.Tag {
	case dwarf.TagCompileUnit, dwarf.TagSubprogram, dwarf.TagInlinedSubroutine:
		gr, err1 := s.Ranges(die)
		wr, err2 := d.Ranges(e)
		if err1 != nil || err2 != nil || !slices.Equal(gr, wr) {
			t.Errorf("%s: ranges %x (%v), debug/dwarf %x (%v)", where, gr, err1, wr, err2)
		}
	}
}

func TestMalformed(t *testing.T) {
	img := compile(t, "-O2", "-gdwarf-5")
	secs := NewSections(img.Section)
	u := units(t, secs.Info)[0]
	for _, tt := range []struct {
		name       string
		start, end uint64
		damage     func(info []byte)
	}{
		{"outside .debug_info", u[0], uint64(len(secs.Info)) + 1, nil},
		{"empty", u[0], u[0], nil},
		{"version 9", u[0], u[1], func(b []byte) { b[u[0]+4] = 9 }},
		{"cut short", u[0], u[0] + 6, nil},
	} {
		s2 := *secs
		if tt.damage != nil {
			s2.Info = slices.Clone(secs.Info)
			tt.damage(s2.Info)
		}
		if _, err := NewUnit(&s2, tt.start, tt.end, Abbrevs{}); err == nil {
			t.Errorf("%s: no error", tt.name)
		}
	}
	// A DIE whose abbreviation code is not in the table stops the scan.
	s2 := *secs
	s2.Info = slices.Clone(secs.Info)
	s, err := NewUnit(&s2, u[0], u[1], Abbrevs{})
	if err != nil {
		t.Fatal(err)
	}
	s2.Info[s.first] = 0x7f
	var die DIE
	if s.UnitDIE(&die) || s.Err() == nil || !strings.Contains(s.Err().Error(), "abbreviation code 127") {
		t.Errorf("bad abbreviation code: %v", s.Err())
	}
}

// TestVariablesMatchDebugDwarf checks, with WantVariables, the
// locations of every variable and parameter (an expression or a
// location list) and the frame bases of functions against debug/dwarf,
// as accessinfer's scan reads them.
func TestVariablesMatchDebugDwarf(t *testing.T) {
	for _, flags := range [][]string{{"-O2", "-gdwarf-5"}, {"-O2", "-gdwarf-4"}, {"-O0", "-gdwarf-5"}} {
		t.Run(strings.Join(flags, " "), func(t *testing.T) {
			img := compile(t, flags...)
			d, err := img.DWARF()
			if err != nil {
				t.Fatal(err)
			}
			secs := NewSections(img.Section)
			seen := map[string]int{}
			for _, u := range units(t, secs.Info) {
				s, err := NewUnit(secs, u[0], u[1], Abbrevs{})
				if err != nil {
					t.Fatal(err)
				}
				s.WantVariables()
				var die DIE
				if !s.UnitDIE(&die) {
					t.Fatalf("unit at %#x: no unit DIE: %v", u[0], s.Err())
				}
				for depth := 1; depth > 0; {
					if !s.Next(&die) {
						if s.Err() != nil {
							t.Fatalf("DIE at %#x: %v", die.Off, s.Err())
						}
						depth--
						continue
					}
					if die.Children {
						depth++
					}
					r := d.Reader()
					r.Seek(dwarf.Offset(die.Off))
					e, err := r.Next()
					if err != nil || e == nil {
						t.Fatalf("debug/dwarf has no DIE at %#x: %v", die.Off, err)
					}
					where := fmt.Sprintf("%v at %#x", e.Tag, e.Offset)
					switch e.Tag {
					case dwarf.TagVariable, dwarf.TagFormalParameter:
						got, want := "none", "none"
						switch {
						case die.Loc != nil:
							got = fmt.Sprintf("expr %x", die.Loc)
						case die.HasLocList:
							got = fmt.Sprintf("list %v %#x", die.LocListx, die.LocList)
						}
						if f := e.AttrField(dwarf.AttrLocation); f != nil {
							switch f.Class {
							case dwarf.ClassExprLoc, dwarf.ClassBlock:
								want = fmt.Sprintf("expr %x", f.Val)
								seen["expr"]++
							case dwarf.ClassLocListPtr:
								want = fmt.Sprintf("list false %#x", f.Val)
								seen["list"]++
							case dwarf.ClassLocList:
								want = fmt.Sprintf("list true %#x", f.Val)
								seen["list"]++
							}
						}
						if got != want {
							t.Errorf("%s: location %s, debug/dwarf %s", where, got, want)
						}
					case dwarf.TagSubprogram:
						fb, _ := e.Val(dwarf.AttrFrameBase).([]byte)
						if !slices.Equal(fb, die.FrameBase) {
							t.Errorf("%s: frame base %x, debug/dwarf %x", where, die.FrameBase, fb)
						}
					case dwarf.TagLexDwarfBlock:
						gr, err1 := s.Ranges(&die)
						wr, err2 := d.Ranges(e)
						if err1 != nil || err2 != nil || !slices.Equal(gr, wr) {
							t.Errorf("%s: ranges %x (%v), debug/dwarf %x (%v)", where, gr, err1, wr, err2)
						}
						seen["block"]++
					}
				}
			}
			if seen["expr"] == 0 || (flags[0] == "-O2" && seen["list"] == 0) {
				t.Errorf("locations read: %v", seen)
			}
		})
	}
}

// TestSkip checks that PeekTag, Peek and Skip, from every DIE of the
// test input, give the tag (and children, and whether it has a
// location) debug/dwarf reads there and land where debug/dwarf reads
// the DIE after it and its children.
func TestSkip(t *testing.T) {
	for _, flags := range [][]string{{"-O2", "-gdwarf-5"}, {"-O2", "-gdwarf-4"}, {"-O0", "-gdwarf-2"}} {
		t.Run(strings.Join(flags, " "), func(t *testing.T) {
			img := compile(t, flags...)
			d, err := img.DWARF()
			if err != nil {
				t.Fatal(err)
			}
			secs := NewSections(img.Section)
			cache := Abbrevs{}
			n, withLoc := 0, 0
			for _, u := range units(t, secs.Info) {
				s, err := NewUnit(secs, u[0], u[1], cache)
				if err != nil {
					t.Fatal(err)
				}
				var die DIE
				if !s.UnitDIE(&die) {
					t.Fatalf("unit at %#x: no unit DIE: %v", u[0], s.Err())
				}
				r := d.Reader()
				r.Seek(dwarf.Offset(die.Off))
				for {
					e, err := r.Next()
					if err != nil {
						t.Fatal(err)
					}
					if e == nil {
						break
					}
					if e.Tag == 0 {
						continue // debug/dwarf gives null entries no offset
					}
					if uint64(e.Offset) >= u[1] {
						break
					}
					s.Seek(uint64(e.Offset))
					if tag := s.PeekTag(); tag != e.Tag {
						t.Fatalf("DIE at %#x: PeekTag %v, debug/dwarf %v", e.Offset, tag, e.Tag)
					}
					want := Peek{Tag: e.Tag, Children: e.Children, Location: e.AttrField(dwarf.AttrLocation) != nil}
					if p := s.Peek(); p != want {
						t.Fatalf("DIE at %#x: Peek %+v, debug/dwarf %+v", e.Offset, p, want)
					}
					if want.Location {
						withLoc++
					}
					if !s.Skip() || s.Err() != nil {
						t.Fatalf("DIE at %#x (%v): Skip failed: %v", e.Offset, e.Tag, s.Err())
					}
					after := d.Reader()
					after.Seek(e.Offset)
					after.Next()
					after.SkipChildren()
					next, err := after.Next()
					switch {
					case err != nil || next == nil || uint64(s.r.Offset()) >= u[1]:
					case next.Tag == 0:
						if tag := s.PeekTag(); tag != 0 {
							t.Fatalf("DIE at %#x (%v): Skip to %#x, a %v, debug/dwarf's next is a null entry", e.Offset, e.Tag, s.r.Offset(), tag)
						}
					case uint64(next.Offset) != uint64(s.r.Offset()):
						t.Fatalf("DIE at %#x (%v): Skip to %#x, debug/dwarf's next DIE at %#x", e.Offset, e.Tag, s.r.Offset(), next.Offset)
					}
					n++
				}
			}
			if n < 50 || withLoc == 0 {
				t.Errorf("only %d DIEs skipped, %d with a location", n, withLoc)
			}
		})
	}
}
