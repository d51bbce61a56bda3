package debugklasy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/klasy/klasy/pattern"
)

// unitBuilder writes a version-1 unit the way the plugin does, so the
// parser can be tested without a compiler (the plugin's own output is
// tested in gcc-patches/plugintest).
type unitBuilder struct {
	version      int
	funcs, recs  []byte
	nfunc, nrec  int
	strtab       []byte
	strs         map[string]uint64
	cu, producer string
}

func newUnit() *unitBuilder {
	return &unitBuilder{version: Version, strtab: []byte{0}, strs: map[string]uint64{}, cu: "a.c", producer: "test"}
}

func (u *unitBuilder) str(s string) uint64 {
	if s == "" {
		return 0
	}
	if o, ok := u.strs[s]; ok {
		return o
	}
	o := uint64(len(u.strtab))
	u.strtab = append(append(u.strtab, s...), 0)
	u.strs[s] = o
	return o
}

func (u *unitBuilder) function(name, file string, line int, static bool) {
	s := 0
	if static {
		s = 1
	}
	u.funcs = binary.AppendUvarint(u.funcs, u.str(name))
	u.funcs = binary.AppendUvarint(u.funcs, u.str(file))
	u.funcs = binary.AppendUvarint(u.funcs, uint64(line))
	u.funcs = binary.AppendUvarint(u.funcs, uint64(s))
	u.nfunc++
}

func (u *unitBuilder) record(fn int, a Access, flags uint64) {
	r := u.recs
	r = binary.AppendUvarint(r, uint64(fn))
	r = binary.AppendUvarint(r, u.str(a.Struct))
	r = binary.AppendUvarint(r, u.str(a.Member))
	r = binary.AppendUvarint(r, flags)
	r = binary.AppendUvarint(r, uint64(a.Mode))
	r = binary.AppendUvarint(r, a.BitOffset)
	r = binary.AppendUvarint(r, a.BitSize)
	r = binary.AppendUvarint(r, u.str(a.File))
	r = binary.AppendUvarint(r, uint64(a.Line))
	r = binary.AppendUvarint(r, uint64(a.Col))
	r = binary.AppendUvarint(r, uint64(a.StmtLine))
	r = binary.AppendUvarint(r, u.str(a.SpellFile))
	r = binary.AppendUvarint(r, uint64(a.SpellLine))
	r = binary.AppendUvarint(r, uint64(a.SpellCol))
	r = binary.AppendUvarint(r, uint64(a.Base.Kind))
	r = binary.AppendUvarint(r, u.str(a.Base.Var))
	r = binary.AppendUvarint(r, u.str(a.Base.Expr))
	r = appendSleb(r, a.Base.Offset)
	r = binary.AppendUvarint(r, u.str(a.Base.Reason))
	if flags&flagAnonType != 0 {
		r = binary.AppendUvarint(r, u.str(a.DeclFile))
		r = binary.AppendUvarint(r, uint64(a.DeclLine))
	}
	u.recs = r
	u.nrec++
}

func appendSleb(b []byte, v int64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		done := (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0)
		if !done {
			c |= 0x80
		}
		b = append(b, c)
		if done {
			return b
		}
	}
}

func (u *unitBuilder) bytes() []byte {
	cu, prod := u.str(u.cu), u.str(u.producer)
	le := binary.LittleEndian
	h := make([]byte, 32)
	copy(h, magic)
	le.PutUint16(h[4:], uint16(u.version))
	le.PutUint16(h[6:], 32)
	le.PutUint32(h[8:], uint32(32+len(u.funcs)+len(u.recs)+len(u.strtab)))
	le.PutUint32(h[12:], uint32(u.nfunc))
	le.PutUint32(h[16:], uint32(u.nrec))
	le.PutUint32(h[20:], uint32(len(u.strtab)))
	le.PutUint32(h[24:], uint32(cu))
	le.PutUint32(h[28:], uint32(prod))
	out := append(h, u.funcs...)
	out = append(out, u.recs...)
	return append(out, u.strtab...)
}

// sample is a unit with a header inline function and a container_of base.
func sample(cu string) []byte {
	u := newUnit()
	u.cu = cu
	u.function("skb_headlen", "include/linux/skbuff.h", 2421, true)
	u.function("f", cu, 10, false)
	u.record(0, Access{Struct: "sk_buff", Member: "len", BitOffset: 896, BitSize: 32, File: "include/linux/skbuff.h", Line: 2423, Col: 12,
		Base: Base{Kind: Param, Var: "skb", Expr: "skb"}}, 0)
	u.record(1, Access{Struct: "task", Member: "ax", Mode: ReadWrite, File: cu, Line: 12, Col: 3, StmtLine: 11,
		Base: Base{Kind: Param, Var: "in", Expr: "(char *)in - 40", Offset: -40}}, flagViaAnon|flagContainerOf)
	u.record(1, Access{Member: "k", Mode: Write, File: cu, Line: 13, DeclFile: cu, DeclLine: 5,
		Base: Base{Kind: Unsupported, Expr: "?", Reason: "conditional expression"}}, flagAnonType)
	return u.bytes()
}

func TestParse(t *testing.T) {
	// Two units as ld -r leaves them, with alignment padding between.
	data := append(sample("a.c"), 0, 0, 0)
	data = append(data, sample("b.c")...)
	units, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(units) != 2 || units[0].Name != "a.c" || units[1].Name != "b.c" || units[0].Producer != "test" {
		t.Fatalf("units: %+v", units)
	}
	a := units[0].Accesses
	if len(a) != 3 {
		t.Fatalf("%d accesses, want 3", len(a))
	}
	if a[0].Function.Name != "skb_headlen" || !a[0].Function.Static || a[0].Struct != "sk_buff" || a[0].BitOffset != 896 {
		t.Errorf("first access: %+v", a[0])
	}
	if !a[1].ViaAnon || !a[1].Base.ContainerOf || a[1].Base.Offset != -40 || a[1].Mode != ReadWrite || a[1].StmtLine != 11 {
		t.Errorf("container_of access: %+v", a[1])
	}
	if !a[2].AnonType || a[2].DeclLine != 5 || a[2].StructName() != "(anonymous at a.c:5)" || a[2].Base.Reason != "conditional expression" {
		t.Errorf("anonymous access: %+v", a[2])
	}

	tab := NewTable(units)
	// skb_headlen is the same header code in both units: listed once.
	if tab.Records != 6 || len(tab.Accesses) != 5 {
		t.Errorf("records %d, distinct %d; want 6, 5", tab.Records, len(tab.Accesses))
	}
}

// TestCleanPaths: kbuild compiles some files through "dir/../header.h";
// the table names them as .debug_line readers do (path.Clean), and the
// copies of a header inline function reached through different paths merge.
func TestCleanPaths(t *testing.T) {
	unit := func(cu, hdr string) []byte {
		u := newUnit()
		u.cu = cu
		u.function("x86_pmu_has_lbr", hdr, 10, true)
		u.record(0, Access{Struct: "x86_pmu", Member: "lbr_nr", File: hdr, Line: 12, SpellFile: "src/arch/x86/events/./perf_event.h", SpellLine: 3,
			DeclFile: "src/include/./linux/perf_event.h", DeclLine: 5}, flagAnonType)
		return u.bytes()
	}
	data := append(unit("src/arch/x86/events/intel/./core.c", "src/arch/x86/events/intel/../perf_event.h"),
		unit("src/arch/x86/events/amd/core.c", "src/arch/x86/events/amd/../perf_event.h")...)
	units, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if units[0].Name != "src/arch/x86/events/intel/core.c" {
		t.Errorf("unit name %q, want it cleaned", units[0].Name)
	}
	tab := NewTable(units)
	if len(tab.Accesses) != 1 {
		t.Fatalf("%d accesses, want the two copies merged: %+v", len(tab.Accesses), tab.Accesses)
	}
	a := tab.Accesses[0]
	const h = "src/arch/x86/events/perf_event.h"
	if a.File != h || a.Function.File != h || a.SpellFile != h || a.DeclFile != "src/include/linux/perf_event.h" {
		t.Errorf("paths not cleaned: file %q function file %q spelling %q declared %q", a.File, a.Function.File, a.SpellFile, a.DeclFile)
	}
}

func TestParseErrors(t *testing.T) {
	good := sample("a.c")
	newer := append([]byte(nil), good...)
	binary.LittleEndian.PutUint16(newer[4:], Version+1)
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"bad magic", []byte("XXXX\x01\x00 \x00"), "bad magic"},
		{"truncated header", good[:20], "header size"},
		{"truncated unit", good[:len(good)-3], "does not fit"},
		{"bad mode", func() []byte {
			u := newUnit()
			u.function("f", "a.c", 1, false)
			u.record(0, Access{Mode: 9}, 0)
			return u.bytes()
		}(), "unknown mode 9"},
		{"bad function index", func() []byte {
			u := newUnit()
			u.record(3, Access{}, 0)
			return u.bytes()
		}(), "function index 3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(tt.data)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want %q", err, tt.want)
			}
		})
	}
	t.Run("other version", func(t *testing.T) {
		_, err := Parse(newer)
		var ve *VersionError
		if !errors.As(err, &ve) || ve.Got != Version+1 || ve.Want != Version {
			t.Fatalf("err = %v, want a VersionError", err)
		}
		if !strings.Contains(err.Error(), "version 2 is newer than the version 1") {
			t.Errorf("message does not name both versions: %v", err)
		}
	})
}

func FuzzParse(f *testing.F) {
	f.Add(sample("a.c"))
	f.Add(append(sample("a.c"), sample("b.c")...))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		units, err := Parse(data)
		if err == nil {
			NewTable(units) // must not panic either
		}
	})
}

func TestSites(t *testing.T) {
	u := newUnit()
	u.function("f", "a.c", 1, false)
	u.function("g", "a.c", 20, true)
	for _, a := range []Access{
		{Struct: "sk_buff", Member: "len", File: "a.c", Line: 5, Col: 3},
		{Struct: "sk_buff", Member: "data_len", File: "a.c", Line: 5, Col: 12},
		{Struct: "sk_buff", Member: "len", File: "a.c", Line: 7, StmtLine: 6},
		{Struct: "inode", Member: "i_uid", File: "a.c", Line: 7},
	} {
		u.record(0, a, 0)
	}
	u.record(1, Access{Struct: "sk_buff", Member: "len", File: "a.c", Line: 22}, 0)
	units, err := Parse(u.bytes())
	if err != nil {
		t.Fatal(err)
	}
	tab := NewTable(units)
	// The pointcut's % and the command line's * select the same.
	for _, pat := range []struct {
		s      string
		syntax pattern.Syntax
	}{{"sk_buff.%", pattern.Pointcut}, {"sk_buff.*", pattern.CommandLine}, {"sk_%.%len", pattern.CommandLine}} {
		p, err := pattern.CompileMember(pat.s, pat.syntax)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, s := range tab.Sites(p) {
			got = append(got, fmt.Sprintf("%s:%d(%d) %s %d", s.File, s.Line, s.StmtLine, s.Function.Name, len(s.Accesses)))
		}
		want := []string{"a.c:5(0) f 2", "a.c:7(6) f 1", "a.c:22(0) g 1"}
		if strings.Join(got, ", ") != strings.Join(want, ", ") {
			t.Errorf("%s: sites %q, want %q", pat.s, got, want)
		}
	}
	// An anonymous struct without a typedef has no name: only a struct
	// part of wildcards selects its members.
	u = newUnit()
	u.function("f", "a.c", 1, false)
	u.record(0, Access{Member: "k", File: "a.c", Line: 3, DeclFile: "a.c", DeclLine: 2}, flagAnonType)
	if units, err = Parse(u.bytes()); err != nil {
		t.Fatal(err)
	}
	for pat, want := range map[string]int{"%.k": 1, "*.k": 1, "a%.k": 0} {
		if got := len(NewTable(units).Query(pattern.MustCompileMember(pat, pattern.CommandLine))); got != want {
			t.Errorf("%s selects %d accesses of an anonymous struct, want %d", pat, got, want)
		}
	}
}

// TestTableOrder checks the table is sorted by file, line, column, struct
// and member, ties kept in section order, against a plain stable sort.
func TestTableOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	u := Unit{Functions: []Function{{Name: "f"}, {Name: "g"}}}
	for i := 0; i < 2000; i++ {
		u.Accesses = append(u.Accesses, Access{
			File: []string{"a.c", "b.h", "include/c.h"}[rng.IntN(3)], Line: rng.IntN(20), Col: rng.IntN(3),
			Struct: []string{"sk_buff", "sock"}[rng.IntN(2)], Member: []string{"len", "data"}[rng.IntN(2)],
			Function: u.Functions[rng.IntN(2)], Mode: Mode(rng.IntN(4)),
		})
	}
	tab := NewTable([]Unit{u})
	// The reference: first copies in section order, then a stable sort.
	var want []Access
	seen := map[Access]bool{}
	for _, a := range u.Accesses {
		if !seen[a] {
			seen[a] = true
			want = append(want, a)
		}
	}
	sort.SliceStable(want, func(i, j int) bool {
		a, b := want[i], want[j]
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		if a.Col != b.Col {
			return a.Col < b.Col
		}
		if a.Struct != b.Struct {
			return a.Struct < b.Struct
		}
		return a.Member < b.Member
	})
	if !slices.Equal(tab.Accesses, want) {
		t.Errorf("table order differs from a stable sort of the distinct accesses (%d vs %d)", len(tab.Accesses), len(want))
	}
}
