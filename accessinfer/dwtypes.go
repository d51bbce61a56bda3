package accessinfer

import (
	"debug/dwarf"
)

// tkind is what a type is, as far as tracking needs to know.
type tkind uint8

const (
	tOther  tkind = iota // base types, enums, functions, void
	tPtr                 // elem is the pointee (0: void)
	tStruct              // members
	tUnion               // members, all at offset 0
	tArray               // elem, count
)

// ctype is a DWARF type with typedefs and qualifiers stripped.
type ctype struct {
	off     dwarf.Offset // of the stripped DIE
	kind    tkind
	name    string // struct/union tag, or the typedef naming an anonymous one (as the plugin names it)
	anon    bool   // no tag (name is a typedef's, or "")
	size    int64
	elem    dwarf.Offset // pointee or element type (unstripped); 0 for void
	count   int64        // array elements; 0 when unknown (flexible)
	members []cmember
}

// cmember is a member of a struct or union.
type cmember struct {
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

// key identifies a type across compilation units, which each have
// their own copy of struct sk_buff: the tag and size for a named
// struct or union, else the DIE offset.
func (t *ctype) key() typeKey {
	if t == nil {
		return typeKey{}
	}
	if t.name != "" && (t.kind == tStruct || t.kind == tUnion) {
		return typeKey{name: t.name, size: t.size, kind: t.kind}
	}
	return typeKey{off: t.off, kind: t.kind}
}

type typeKey struct {
	name string
	size int64
	kind tkind
	off  dwarf.Offset
}

// types reads and caches types of one dwarf.Data (not safe for
// concurrent use: each worker has its own).
type types struct {
	d     *dwarf.Data
	r     *dwarf.Reader
	cache map[dwarf.Offset]*ctype
}

func newTypes(d *dwarf.Data) *types {
	return &types{d: d, r: d.Reader(), cache: map[dwarf.Offset]*ctype{}}
}

// get returns the type at off with typedefs and qualifiers stripped;
// nil for void or what cannot be read.
func (ts *types) get(off dwarf.Offset) *ctype {
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

func (ts *types) read(off dwarf.Offset, typedef string, depth int) *ctype {
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
	t := &ctype{off: off}
	t.size, _ = e.Val(dwarf.AttrByteSize).(int64)
	switch e.Tag {
	case dwarf.TagPointerType:
		t.kind, t.elem, t.size = tPtr, next, 8
	case dwarf.TagStructType, dwarf.TagClassType, dwarf.TagUnionType:
		t.kind = tStruct
		if e.Tag == dwarf.TagUnionType {
			t.kind = tUnion
		}
		t.name, _ = e.Val(dwarf.AttrName).(string)
		if t.name == "" {
			t.anon, t.name = true, typedef
		}
		if e.Children {
			t.members = ts.members(t.size)
		}
	case dwarf.TagArrayType:
		t.kind, t.elem = tArray, next
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
		t.kind = tOther
	}
	return t
}

// members reads the member DIEs following a struct's DIE.
func (ts *types) members(size int64) []cmember {
	var ms []cmember
	for {
		c, err := ts.r.Next()
		if err != nil || c == nil || c.Tag == 0 {
			break
		}
		if c.Tag == dwarf.TagMember {
			m := cmember{}
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
func (ts *types) span(m *cmember) (lo, hi int64) {
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
func (ts *types) strip(off dwarf.Offset) *ctype { return ts.get(off) }

// pointee is the type a pointer type points to (nil: not a pointer, or
// void *).
func (ts *types) pointee(t *ctype) *ctype {
	if t == nil || t.kind != tPtr {
		return nil
	}
	return ts.get(t.elem)
}

// useful reports whether a pointer to t is worth tracking: accesses
// through it may name members, or load pointers that do.
func useful(t *ctype) bool {
	return t != nil && (t.kind == tStruct || t.kind == tUnion || t.kind == tPtr || t.kind == tArray)
}
