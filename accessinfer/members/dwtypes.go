package members

import (
	"debug/dwarf"
	"sort"
	"unsafe"

	"github.com/klasy/klasy/dwarfmap/diescan"
)

// Kind is what a type is, as far as tracking needs to know.
type Kind uint8

const (
	Other  Kind = iota // base types, enums, functions, void
	Ptr                // elem is the pointee (0: void)
	Struct             // members
	Union              // members, all at offset 0
	Array              // elem, count
)

// Type is a DWARF type with typedefs and qualifiers stripped.
type Type struct {
	off  dwarf.Offset // of the stripped DIE
	Kind Kind
	anon bool // no tag (name is a typedef's, or "")
	// unread: members still to be read from the DIE at off.
	unread bool
	// noSkip: the members are not in the order of their offsets
	// (bitEnd).
	noSkip bool
	Name   string // struct/union tag, or the typedef naming an anonymous one (as the plugin names it)
	Size   int64
	Elem   dwarf.Offset // pointee or element type (unstripped); 0 for void
	id     uint32       // ID's answer: in Elem's padding
	count  int64        // array elements; 0 when unknown (flexible)
	// memberList is read when first asked for (Types.mems, never this
	// field): most struct types read, the pointees of locals and
	// globals read to tell whether they can type an access, are never
	// walked.
	memberList []Member
	// bitEnd[i], for a struct of many members in the order of their
	// offsets, is the byte where the bitfields among its first i
	// members end at the latest (walk's skip); nil until walk first
	// needs it. (The fields are in this order so that a Type stays
	// 96 bytes.)
	bitEnd []int64
}

// Member is a member of a struct or union.
type Member struct {
	Name    string // "" for an anonymous member
	off     int64  // byte offset (of the storage unit for a bitfield)
	bitOff  int64  // bit offset from the start of the struct
	BitSize int64  // 0 unless a bitfield
	Type    dwarf.Offset
	// size is the member type's size once span has looked it up
	// (sized says so); the types are a worker's own.
	size  int64
	sized bool
}

// Key identifies a type across compilation units, which each have
// their own copy of struct sk_buff: the tag and size for a named
// struct or union, else the DIE offset.
func (t *Type) Key() Key {
	if t == nil {
		return Key{}
	}
	if t.Name != "" && (t.Kind == Struct || t.Kind == Union) {
		return Key{name: t.Name, size: t.Size, kind: t.Kind}
	}
	return Key{off: t.off, kind: t.Kind}
}

// NumMembers is how many members a struct or union has.
func (ts *Types) NumMembers(t *Type) int { return len(ts.mems(t)) }

// Key is a type's identity across units (see Type.Key).
type Key struct {
	name string
	size int64
	kind Kind
	off  dwarf.Offset
}

// Types reads and caches the types of one image's DWARF (not safe for
// concurrent use: each worker has its own). It reads the type DIEs with
// diescan, not debug/dwarf, whose entries allocated a field slice per
// DIE: a quarter of inference's allocations on a vmlinux.
type Types struct {
	secs    *diescan.Sections
	units   [][2]uint64 // [start, end) of each unit in .debug_info
	unit    map[uint64]*diescan.Unit
	cur     *diescan.Unit
	abbrevs diescan.Abbrevs
	cache   map[dwarf.Offset]*Type
	names   NameCache
	// recent holds cache's entries last asked for, by offset modulo
	// its size: most lookups find their type there without hashing
	// into the large map. A worker reads ~90,000 types of a vmlinux: at
	// 4,096 entries a third of inference's Get calls went on to the map.
	recent [1 << 17]struct {
		off dwarf.Offset
		t   *Type
	}
	mbuf []Member // members' buffer
	// all[id] is the type of that ID (all[0]: nil).
	all []*Type
}

// NewTypes reads types from the sections secs, whose units are units
// (dwscan.Units).
func NewTypes(secs *diescan.Sections, units [][2]uint64) *Types {
	return &Types{secs: secs, units: units, unit: map[uint64]*diescan.Unit{}, abbrevs: diescan.Abbrevs{},
		cache: map[dwarf.Offset]*Type{}, all: []*Type{nil}}
}

// ID numbers t among the types ts has read (0: nil): a tracked value
// holds the number, not the pointer, so that copying it needs no write
// barrier and the collector has nothing in it to scan.
func (t *Type) ID() uint32 {
	if t == nil {
		return 0
	}
	return t.id
}

// ByID is the type of ID id (nil for 0).
func (ts *Types) ByID(id uint32) *Type { return ts.all[id] }

// Abbrevs is the cache of abbreviation tables, for a scanner of the same
// goroutine to share.
func (ts *Types) Abbrevs() diescan.Abbrevs { return ts.abbrevs }

// seek positions ts.cur at the DIE at off; false if no unit holds it.
func (ts *Types) seek(off dwarf.Offset) bool {
	o := uint64(off)
	if ts.cur == nil || o < ts.cur.Start() || o >= ts.cur.End() {
		i := sort.Search(len(ts.units), func(i int) bool { return ts.units[i][1] > o })
		if i == len(ts.units) || o < ts.units[i][0] {
			return false
		}
		u := ts.unit[ts.units[i][0]]
		if u == nil {
			var err error
			u, err = diescan.NewUnit(ts.secs, ts.units[i][0], ts.units[i][1], ts.abbrevs)
			if err != nil {
				return false
			}
			// The unit DIE's bases (DWARF 5) apply to its strings.
			var d diescan.DIE
			u.UnitDIE(&d)
			ts.unit[ts.units[i][0]] = u
		}
		ts.cur = u
	}
	ts.cur.Seek(o)
	return true
}

// Get returns the type at off with typedefs and qualifiers stripped;
// nil for void or what cannot be read.
func (ts *Types) Get(off dwarf.Offset) *Type {
	if off == 0 {
		return nil
	}
	r := &ts.recent[uint32(off)%uint32(len(ts.recent))]
	if r.off == off {
		return r.t
	}
	t, ok := ts.cache[off]
	if !ok {
		t = ts.read(off, "", 0)
		ts.cache[off] = t
	}
	r.off, r.t = off, t
	return t
}

func (ts *Types) read(off dwarf.Offset, typedef string, depth int) *Type {
	if depth > 16 || !ts.seek(off) {
		return nil
	}
	var e diescan.TypeDIE
	if !ts.cur.NextType(&e) && (e.Tag != 0 || ts.cur.Err() != nil) {
		return nil
	}
	next := dwarf.Offset(e.Type)
	switch e.Tag {
	case dwarf.TagTypedef:
		// The typedef nearest the type names it, as the plugin names
		// it: atomic_long_t is a typedef of atomic64_t, the typedef of
		// an anonymous struct, whose accesses are atomic64_t's.
		if len(e.Name) > 0 {
			typedef = ts.str(e.Name)
		}
		fallthrough
	case dwarf.TagConstType, dwarf.TagVolatileType, dwarf.TagRestrictType, dwarf.TagAtomicType:
		if next == 0 {
			return nil
		}
		if t, ok := ts.cache[next]; ok && (t == nil || !t.anon || t.Name != "") {
			return t
		}
		t := ts.read(next, typedef, depth+1)
		ts.cache[next] = t
		if r := &ts.recent[uint32(next)%uint32(len(ts.recent))]; r.off == next {
			r.t = t
		}
		return t
	}
	t := &Type{off: off, id: uint32(len(ts.all))}
	ts.all = append(ts.all, t)
	t.Size = e.ByteSize
	switch e.Tag {
	case dwarf.TagPointerType:
		t.Kind, t.Elem, t.Size = Ptr, next, 8
	case dwarf.TagStructType, dwarf.TagClassType, dwarf.TagUnionType:
		t.Kind = Struct
		if e.Tag == dwarf.TagUnionType {
			t.Kind = Union
		}
		t.Name = ts.str(e.Name)
		if t.Name == "" {
			t.anon, t.Name = true, typedef
		}
		t.unread = e.Children
	case dwarf.TagArrayType:
		t.Kind, t.Elem = Array, next
		n := int64(1)
		known := false
		if e.Children {
			var c diescan.TypeDIE
			for ts.cur.NextType(&c) {
				if c.Tag == dwarf.TagSubrangeType {
					if c.HasCount {
						n, known = n*c.Count, true
					} else if c.HasUpperBound {
						n, known = n*(c.UpperBound+1), true
					} else {
						known = false
						n = 0
					}
				}
				ts.cur.SkipTypeChildren(&c)
			}
		}
		if known {
			t.count = n
		}
		if t.Size == 0 && known {
			if el := ts.Get(next); el != nil {
				t.Size = n * el.Size
			}
		}
	default:
		t.Kind = Other
	}
	return t
}

// str returns a name as a string (names.Str).
func (ts *Types) str(b []byte) string { return ts.names.Str(b) }

// NameCache turns DIE names, slices of .debug_str (whose strings the
// linker merged: every unit's copy of a struct names its members with
// the same bytes) or .debug_info, into strings: one string for the
// names found in it by where they start, in a table indexed by a hash
// of that, the name last there kept. No map: looking names up in one
// holding every name cost more than making the strings.
type NameCache struct {
	slots [1 << 14]struct {
		at uintptr
		s  string
	}
}

// Str returns b as a string.
func (c *NameCache) Str(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	at := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	e := &c.slots[(uint64(at)*0x9e3779b97f4a7c15)>>(64-14)]
	if e.at != at || len(e.s) != len(b) {
		e.at, e.s = at, string(b)
	}
	return e.s
}

// mems returns the members of t, read from its DIE the first time.
func (ts *Types) mems(t *Type) []Member {
	if !t.unread {
		return t.memberList
	}
	t.unread = false
	var e diescan.TypeDIE
	if ts.seek(t.off) && ts.cur.NextType(&e) && e.Children {
		t.memberList = ts.members()
	}
	return t.memberList
}

// members reads the member DIEs following a struct's DIE.
func (ts *Types) members() []Member {
	ms := ts.mbuf[:0]
	defer func() {
		// Grown in ts's buffer, copied out once: a vmlinux has a copy
		// of each struct per unit that uses it.
		ts.mbuf = ms
	}()
	var c diescan.TypeDIE
	for ts.cur.NextType(&c) {
		if c.Tag == dwarf.TagMember {
			m := Member{}
			m.Name = ts.str(c.Name)
			m.Type = dwarf.Offset(c.Type)
			m.off = c.MemberLoc
			m.bitOff = m.off * 8
			if c.HasBitSize {
				bs := c.BitSize
				m.BitSize = bs
				if c.HasDataBitOffset {
					m.bitOff = c.DataBitOffset // DWARF 4+: from the start of the struct
				} else if c.HasBitOffset {
					// DWARF 2/3: from the most significant bit of the
					// storage unit of DW_AT_byte_size at the member location.
					unit := c.ByteSize
					m.bitOff = m.off*8 + unit*8 - c.BitOffset - bs
				}
				m.off = m.bitOff / 8
			}
			ms = append(ms, m)
		}
		ts.cur.SkipTypeChildren(&c)
	}
	if len(ms) == 0 {
		return nil
	}
	return append([]Member(nil), ms...)
}

// span is a member's bytes [lo, hi) from the start of its container.
func (ts *Types) span(m *Member) (lo, hi int64) {
	if m.BitSize > 0 {
		return m.bitOff / 8, (m.bitOff + m.BitSize + 7) / 8
	}
	if !m.sized {
		if t := ts.Get(m.Type); t != nil {
			m.size = t.Size
		}
		m.sized = true
	}
	return m.off, m.off + m.size
}

// strip returns the stripped type of a member or variable type offset.
func (ts *Types) strip(off dwarf.Offset) *Type { return ts.Get(off) }

// Pointee is the type a pointer type points to (nil: not a pointer, or
// void *).
func (ts *Types) Pointee(t *Type) *Type {
	if t == nil || t.Kind != Ptr {
		return nil
	}
	return ts.Get(t.Elem)
}

// Useful reports whether a pointer to t is worth tracking: accesses
// through it may name members, or load pointers that do.
func Useful(t *Type) bool {
	return t != nil && (t.Kind == Struct || t.Kind == Union || t.Kind == Ptr || t.Kind == Array)
}
