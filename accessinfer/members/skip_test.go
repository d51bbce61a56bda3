package members

import (
	"debug/dwarf"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klasy/klasy/dwarfmap/diescan"
	"github.com/klasy/klasy/dwarfmap/elfimage"
	"github.com/klasy/klasy/internal/testenv"
)

// wide is a struct of more members than walk passes over one by one,
// with bitfields (one run of them crossing a byte), a nested struct,
// an anonymous union, arrays and padding.
const wide = `
struct in { int a; short b; char c; };
struct wide {
	long m0; int m1; char m2; char m3; short m4;
	unsigned f0:3, f1:7, f2:12, f3:10;
	int m5; struct in m6; char m7[5]; long m8;
	unsigned g0:1, g1:1; unsigned char g2;
	union { int u0; short u1[2]; };
	int m9, m10, m11, m12; void *m13; unsigned long long h0:40, h1:24;
	struct in m14[3]; char m15; long m16;
};
struct wide w;
`

// TestWalkSkip checks that walk finds the same members of a wide
// struct at every offset, size and mask when it starts at the member
// skip finds (binary search) as when it passes over every member
// before it.
func TestWalkSkip(t *testing.T) {
	dir := t.TempDir()
	src, obj := filepath.Join(dir, "w.c"), filepath.Join(dir, "w.o")
	if err := os.WriteFile(src, []byte(wide), 0o644); err != nil {
		t.Fatal(err)
	}
	testenv.GCC(t, "-O2", "-g", "-c", "-o", obj, src)
	img, err := elfimage.Open(obj)
	if err != nil {
		t.Fatal(err)
	}
	defer img.Close()
	d, err := img.DWARF()
	if err != nil {
		t.Fatal(err)
	}
	var off dwarf.Offset
	var cus [][2]uint64
	r := d.Reader()
	for {
		e, err := r.Next()
		if err != nil || e == nil {
			break
		}
		if e.Tag == dwarf.TagCompileUnit {
			cus = append(cus, [2]uint64{0, 4 + uint64(binary.LittleEndian.Uint32(img.Section(".debug_info")))})
		}
		if e.Tag == dwarf.TagStructType && e.Val(dwarf.AttrName) == "wide" {
			off = e.Offset
		}
	}
	if off == 0 || len(cus) != 1 {
		t.Fatalf("struct wide at %#x, %d units", off, len(cus))
	}
	secs := diescan.NewSections(img.Section)
	fast, slow := NewTypes(secs, cus), NewTypes(secs, cus)
	ft, st := fast.Get(off), slow.Get(off)
	if ft == nil || len(fast.mems(ft)) < 16 {
		t.Fatalf("struct wide: %v", ft)
	}
	st.noSkip = true
	show := func(cs []Chain) string {
		var b strings.Builder
		for _, c := range cs {
			for _, h := range c {
				fmt.Fprintf(&b, "%s.%s@%d:%d ", h.Container.Name, h.Member.Name, h.BitOff, h.BitSize)
			}
			b.WriteString("; ")
		}
		return b.String()
	}
	skipped, found := 0, 0
	for o := int64(0); o < ft.Size; o++ {
		if fast.skip(ft, fast.mems(ft), o) > 0 {
			skipped++
		}
		for _, n := range []int64{1, 2, 4, 8} {
			for _, bits := range []Bits{{}, {OK: true, Base: o * 8, Mask: 0x18}, {OK: true, Base: o * 8, Mask: 1 << 7}} {
				for _, load := range []bool{false, true} {
					a := Use{Off: o, N: n, Bits: bits, Load: load, Declared: true}
					got, want := show(fast.ObjectAccess(ft, a)), show(slow.ObjectAccess(st, a))
					if got != want {
						t.Errorf("offset %d size %d bits %+v load %v: %q, passing over every member %q", o, n, bits, load, got, want)
					}
					if got != "" {
						found++
					}
				}
			}
		}
	}
	if skipped < int(ft.Size)/2 || found == 0 {
		t.Errorf("%d of %d offsets skipped members, %d accesses found", skipped, ft.Size, found)
	}
}
