package diescan

import (
	"debug/dwarf"
)

// TypeDIE is the decoded subset of a type's DIE (or a member's, a
// subrange's) that a reader of struct layouts needs. The constants are
// those debug/dwarf gives as int64 (class constant): a member location
// that is an expression or, before DWARF 4, a data4/data8 location list
// pointer is not one.
type TypeDIE struct {
	Off      uint64
	Tag      dwarf.Tag
	Children bool
	Name     []byte
	Type     uint64 // DW_AT_type, 0 if none
	Sibling  uint64
	ByteSize int64

	MemberLoc, BitSize, DataBitOffset, BitOffset, Count, UpperBound int64
	HasByteSize, HasMemberLoc, HasBitSize, HasDataBitOffset         bool
	HasBitOffset, HasCount, HasUpperBound                           bool
}

// constant reports whether form f holds a constant of class constant,
// for an attribute that may (ptr) be a section offset in DWARF 2 and 3.
func (s *Unit) constant(f form, ptr bool) bool {
	switch f {
	case formData1, formData2, formSdata, formUdata, formImplicitConst:
		return true
	case formData4, formData8:
		return !ptr || s.ver >= 4
	}
	return false
}

// NextType reads the next DIE into d, as a type's, without the
// allocations of debug/dwarf's entries. Like Next it returns false at a
// null entry and on an error (see Err).
func (s *Unit) NextType(d *TypeDIE) bool {
	r := &s.r
	*d = TypeDIE{Off: uint64(r.Offset())}
	a := s.abbrevOf(d.Off)
	if a == nil {
		return false
	}
	d.Tag, d.Children = a.tag, a.children
	for _, at := range a.attrs {
		switch at.attr {
		case dwarf.AttrSibling, dwarf.AttrName, dwarf.AttrType, dwarf.AttrByteSize, dwarf.AttrDataMemberLoc,
			dwarf.AttrBitSize, dwarf.AttrDataBitOffset, dwarf.AttrBitOffset, dwarf.AttrCount, dwarf.AttrUpperBound:
		default:
			if s.fixed && at.size >= 0 {
				s.r.Skip(uint64(at.size))
			} else {
				s.skipAttr(at.form)
			}
			continue
		}
		f := at.form
		v := s.readAttr(f, at.ic)
		if f == formIndirect {
			continue // not in type DIEs GCC writes; left unread as absent
		}
		// Values of another class (a reference, an expression) read
		// as absent, as debug/dwarf's do not assert to int64.
		c := s.constant(f, false)
		n := int64(v.u)
		if !c {
			n = 0
		}
		switch at.attr {
		case dwarf.AttrSibling:
			d.Sibling = s.ref(f, v.u)
		case dwarf.AttrName:
			if v.isStr {
				d.Name = v.b
			}
		case dwarf.AttrType:
			d.Type = s.ref(f, v.u)
		case dwarf.AttrByteSize:
			d.ByteSize, d.HasByteSize = n, c
		case dwarf.AttrDataMemberLoc:
			if s.constant(f, true) {
				d.MemberLoc, d.HasMemberLoc = int64(v.u), true
			}
		case dwarf.AttrBitSize:
			d.BitSize, d.HasBitSize = n, c
		case dwarf.AttrDataBitOffset:
			d.DataBitOffset, d.HasDataBitOffset = n, c
		case dwarf.AttrBitOffset:
			d.BitOffset, d.HasBitOffset = n, c
		case dwarf.AttrCount:
			d.Count, d.HasCount = n, c
		case dwarf.AttrUpperBound:
			d.UpperBound, d.HasUpperBound = n, c
		}
	}
	return r.Err() == nil
}

// SkipTypeChildren moves past the children of d, just read: by its
// sibling if it has a usable one, else DIE by DIE.
func (s *Unit) SkipTypeChildren(d *TypeDIE) {
	if !d.Children {
		return
	}
	if d.Sibling > d.Off && d.Sibling <= s.end {
		s.Seek(d.Sibling)
		return
	}
	var c TypeDIE
	for s.NextType(&c) {
		s.SkipTypeChildren(&c)
	}
}
