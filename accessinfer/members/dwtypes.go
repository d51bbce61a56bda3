package members

import (
	"debug/dwarf"
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
	off     dwarf.Offset // of the stripped DIE
	Kind    Kind
	Name    string // struct/union tag, or the typedef naming an anonymous one (as the plugin names it)
	anon    bool   // no tag (name is a typedef's, or "")
	Size    int64
	Elem    dwarf.Offset // pointee or element type (unstripped); 0 for void
	count   int64        // array elements; 0 when unknown (flexible)
	members []Member
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
func (t *Type) NumMembers() int { return len(t.members) }

// Key is a type's identity across units (see Type.Key).
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

// Get returns the type at off with typedefs and qualifiers stripped;
// nil for void or what cannot be read.
func (ts *Types) Get(off dwarf.Offset) *Type {
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
		if t, ok := ts.cache[next]; ok && (t == nil || !t.anon || t.Name != "") {
			return t
		}
		t := ts.read(next, typedef, depth+1)
		ts.cache[next] = t
		return t
	}
	t := &Type{off: off}
	t.Size, _ = e.Val(dwarf.AttrByteSize).(int64)
	switch e.Tag {
	case dwarf.TagPointerType:
		t.Kind, t.Elem, t.Size = Ptr, next, 8
	case dwarf.TagStructType, dwarf.TagClassType, dwarf.TagUnionType:
		t.Kind = Struct
		if e.Tag == dwarf.TagUnionType {
			t.Kind = Union
		}
		t.Name, _ = e.Val(dwarf.AttrName).(string)
		if t.Name == "" {
			t.anon, t.Name = true, typedef
		}
		if e.Children {
			t.members = ts.members(t.Size)
		}
	case dwarf.TagArrayType:
		t.Kind, t.Elem = Array, next
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
			m.Name, _ = c.Val(dwarf.AttrName).(string)
			m.Type, _ = c.Val(dwarf.AttrType).(dwarf.Offset)
			m.off, _ = c.Val(dwarf.AttrDataMemberLoc).(int64)
			m.bitOff = m.off * 8
			if bs, ok := c.Val(dwarf.AttrBitSize).(int64); ok {
				m.BitSize = bs
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
