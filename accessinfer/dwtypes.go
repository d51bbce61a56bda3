package accessinfer

import (
	"debug/dwarf"
)

// Kind is what a type is, as far as tracking needs to know.
type Kind uint8

const (
	Other  Kind = iota // base types, enums, functions, void
	Ptr                 // elem is the pointee (0: void)
	Struct              // members
	Union               // members, all at offset 0
	Array               // elem, count
)

// Type is a DWARF type with typedefs and qualifiers stripped.
type Type struct {
	off     dwarf.Offset // of the stripped DIE
	kind    Kind
	name    string // struct/union tag, or the typedef naming an anonymous one (as the plugin names it)
	anon    bool   // no tag (name is a typedef's, or "")
	size    int64
	elem    dwarf.Offset // pointee or element type (unstripped); 0 for void
	count   int64        // array elements; 0 when unknown (flexible)
	members []Member
}

// Member is a member of a struct or union.
type Member struct {
	name    string // "" for an anonymous member
	off     int64  // byte offset (of the storage unit for a bitfield)
	bitOff  int64  // bit offset from the start of the struct
	bitSize int64  // 0 unless a bitfield
	typ     dwarf.Offset
	// size is the member type's size once span has looked it up
	// (sized says so); the types are a worker's own.
	size  int64
	sized bool
}

// Key identifies a type across compilation units, which each have
// their own copy of struct sk_buff: the tag and size for a named
// struct or union, else the DIE offset.
func (t *Type) key() Key {
	if t == nil {
		return Key{}
	}
	if t.name != "" && (t.kind == Struct || t.kind == Union) {
		return Key{name: t.name, size: t.size, kind: t.kind}
	}
	return Key{off: t.off, kind: t.kind}
}

// Key is a type's identity across units (see Type.key).
type Key struct {
	name string
	size int64
	kind Kind
	off  dwarf.Offset
}

// Types reads and caches the types of one dwarf.Data (not safe for
// concurrent use: each worker has its own).
type Types struct {
	d     *dwarf.Data
	r     *dwarf.Reader
	cache map[dwarf.Offset]*Type
}

func NewTypes(d *dwarf.Data) *Types {
	return &Types{d: d, r: d.Reader(), cache: map[dwarf.Offset]*Type{}}
}

// get returns the type at off with typedefs and qualifiers stripped;
// nil for void or what cannot be read.
func (ts *Types) get(off dwarf.Offset) *Type {
	if off == 0 {
		return nil
	}
	if t, ok := ts.cache[off]; ok {
		return t
	}
	t := ts.read(off, "", 0)
	ts.cache[off] = t
	return t
}

func (ts *Types) read(off dwarf.Offset, typedef string, depth int) *Type {
	if depth > 16 {
		return nil
	}
	ts.r.Seek(off)
	e, err := ts.r.Next()
	if err != nil || e == nil {
		return nil
	}
	next, _ := e.Val(dwarf.AttrType).(dwarf.Offset)
	switch e.Tag {
	case dwarf.TagTypedef:
		// The typedef nearest the type names it, as the plugin names
		// it: atomic_long_t is a typedef of atomic64_t, the typedef of
		// an anonymous struct, whose accesses are atomic64_t's.
		if n, _ := e.Val(dwarf.AttrName).(string); n != "" {
			typedef = n
		}
		fallthrough
	case dwarf.TagConstType, dwarf.TagVolatileType, dwarf.TagRestrictType, dwarf.TagAtomicType:
		if next == 0 {
			return nil
		}
		if t, ok := ts.cache[next]; ok && (t == nil || !t.anon || t.name != "") {
			return t
		}
		t := ts.read(next, typedef, depth+1)
		ts.cache[next] = t
		return t
	}
	t := &Type{off: off}
	t.size, _ = e.Val(dwarf.AttrByteSize).(int64)
	switch e.Tag {
	case dwarf.TagPointerType:
		t.kind, t.elem, t.size = Ptr, next, 8
	case dwarf.TagStructType, dwarf.TagClassType, dwarf.TagUnionType:
		t.kind = Struct
		if e.Tag == dwarf.TagUnionType {
			t.kind = Union
		}
		t.name, _ = e.Val(dwarf.AttrName).(string)
		if t.name == "" {
			t.anon, t.name = true, typedef
		}
		if e.Children {
			t.members = ts.members(t.size)
		}
	case dwarf.TagArrayType:
		t.kind, t.elem = Array, next
		n := int64(1)
		known := false
		if e.Children {
			for {
				c, err := ts.r.Next()
				if err != nil || c == nil || c.Tag == 0 {
					break
				}
				if c.Tag == dwarf.TagSubrangeType {
					if cnt, ok := c.Val(dwarf.AttrCount).(int64); ok {
						n, known = n*cnt, true
					} else if ub, ok := c.Val(dwarf.AttrUpperBound).(int64); ok {
						n, known = n*(ub+1), true
					} else {
						known = false
						n = 0
					}
				}
				if c.Children {
					ts.r.SkipChildren()
				}
			}
		}
		if known {
			t.count = n
		}
		if t.size == 0 && known {
			if el := ts.get(next); el != nil {
				t.size = n * el.size
			}
		}
	default:
		t.kind = Other
	}
	return t
}

// members reads the member DIEs following a struct's DIE.
func (ts *Types) members(size int64) []Member {
	var ms []Member
	for {
		c, err := ts.r.Next()
		if err != nil || c == nil || c.Tag == 0 {
			break
		}
		if c.Tag == dwarf.TagMember {
			m := Member{}
			m.name, _ = c.Val(dwarf.AttrName).(string)
			m.typ, _ = c.Val(dwarf.AttrType).(dwarf.Offset)
			m.off, _ = c.Val(dwarf.AttrDataMemberLoc).(int64)
			m.bitOff = m.off * 8
			if bs, ok := c.Val(dwarf.AttrBitSize).(int64); ok {
				m.bitSize = bs
				if dbo, ok := c.Val(dwarf.AttrDataBitOffset).(int64); ok {
					m.bitOff = dbo // DWARF 4+: from the start of the struct
				} else if bo, ok := c.Val(dwarf.AttrBitOffset).(int64); ok {
					// DWARF 2/3: from the most significant bit of the
					// storage unit of DW_AT_byte_size at the member location.
					unit, _ := c.Val(dwarf.AttrByteSize).(int64)
					m.bitOff = m.off*8 + unit*8 - bo - bs
				}
				m.off = m.bitOff / 8
			}
			ms = append(ms, m)
		}
		if c.Children {
			ts.r.SkipChildren()
		}
	}
	return ms
}

// span is a member's bytes [lo, hi) from the start of its container.
func (ts *Types) span(m *Member) (lo, hi int64) {
	if m.bitSize > 0 {
		return m.bitOff / 8, (m.bitOff + m.bitSize + 7) / 8
	}
	if !m.sized {
		if t := ts.get(m.typ); t != nil {
			m.size = t.size
		}
		m.sized = true
	}
	return m.off, m.off + m.size
}

// strip returns the stripped type of a member or variable type offset.
func (ts *Types) strip(off dwarf.Offset) *Type { return ts.get(off) }

// pointee is the type a pointer type points to (nil: not a pointer, or
// void *).
func (ts *Types) pointee(t *Type) *Type {
	if t == nil || t.kind != Ptr {
		return nil
	}
	return ts.get(t.elem)
}

// Useful reports whether a pointer to t is worth tracking: accesses
// through it may name members, or load pointers that do.
func Useful(t *Type) bool {
	return t != nil && (t.kind == Struct || t.kind == Union || t.kind == Ptr || t.kind == Array)
}
