// Package diescan is a purpose-built DIE scanner for dwarfmap's index
// build. debug/dwarf's Reader decodes every attribute of every DIE into
// interface values (17.9 M DIEs and 4 GB of garbage for Debian's
// vmlinux, 4 s of CPU); the index needs a dozen attributes of a few tags:
// compile units, functions, inlined copies, structs, unions and typedefs
// (and, for accessinfer's scan, WantVariables: variables, parameters,
// lexical blocks and their locations).
// The scanner skips the other attributes by form, lets its caller jump
// over subtrees with DW_AT_sibling or step over a DIE it does not want
// without decoding it (PeekTag or Peek, Skip), and returns names as slices of
// the string sections. It reads DWARF 2 to 5, little-endian.
package diescan

import (
	"bytes"
	"debug/dwarf"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/klasy/klasy/internal/bytereader"
)

// ErrMalformed is returned (wrapped) for DWARF the scanner cannot read.
var ErrMalformed = errors.New("malformed DWARF")

// Sections are the DWARF sections the scanner reads (nil when absent).
type Sections struct {
	Info, Abbrev, Str, LineStr, StrOffsets, Addr, Ranges, Rnglists []byte
	shared                                                         *sharedAbbrevs
}

// sharedAbbrevs are the abbreviation tables parsed by the units of
// sections that share them (ShareAbbrevs).
type sharedAbbrevs struct {
	mu sync.Mutex
	m  map[uint64][]abbrev
}

// ShareAbbrevs has the units of s share across goroutines the
// abbreviation tables they parse: a table is parsed once however many
// goroutines read its units (a goroutine's own Abbrevs is still looked
// in first, without a lock). A scan of every unit with readers of types
// that seek into any unit parsed a third of a vmlinux's tables twice.
func (s *Sections) ShareAbbrevs() { s.shared = &sharedAbbrevs{m: map[uint64][]abbrev{}} }

// NewSections gets the sections by name (".debug_info") from section,
// as elfimage.Image.Section gives them.
func NewSections(section func(name string) []byte) *Sections {
	return &Sections{
		Info: section(".debug_info"), Abbrev: section(".debug_abbrev"),
		Str: section(".debug_str"), LineStr: section(".debug_line_str"),
		StrOffsets: section(".debug_str_offsets"), Addr: section(".debug_addr"),
		Ranges: section(".debug_ranges"), Rnglists: section(".debug_rnglists"),
	}
}

// Abbrevs caches abbreviation tables by their offset in .debug_abbrev,
// for the units that share them. It is not safe for concurrent use: give
// each goroutine its own.
type Abbrevs map[uint64][]abbrev

type attrSpec struct {
	attr dwarf.Attr
	// read: Next keeps the attribute's value (nextAttr); the others
	// (DW_AT_decl_column, DW_AT_GNU_locviews, ..., a third of a
	// variable's) are stepped over without decoding.
	read bool
	// size is fixedSize(form): in a unit of the sizes it assumes
	// (Unit.fixed) a value not kept is stepped over by it, without
	// skipAttr's switch.
	size int8
	form form
	ic   int64 // DW_FORM_implicit_const value
}

// nextAttr reports whether Next keeps the value of attribute a: the
// attributes Next's switch stores (one left out here is never read:
// TestMatchesDebugDwarf compares every field with debug/dwarf).
func nextAttr(a dwarf.Attr) bool {
	switch a {
	case dwarf.AttrSibling, dwarf.AttrName, dwarf.AttrLowpc, dwarf.AttrHighpc, dwarf.AttrEntrypc,
		dwarf.AttrRanges, dwarf.AttrAbstractOrigin, dwarf.AttrSpecification, dwarf.AttrExternal,
		dwarf.AttrDeclaration, dwarf.AttrInline, dwarf.AttrDeclFile, dwarf.AttrDeclLine,
		dwarf.AttrCallFile, dwarf.AttrCallLine, dwarf.AttrType, dwarf.AttrByteSize, dwarf.AttrCompDir,
		dwarf.AttrLocation, dwarf.AttrFrameBase, dwarf.AttrStrOffsetsBase, dwarf.AttrAddrBase,
		dwarf.AttrRnglistsBase:
		return true
	}
	return false
}

type abbrev struct {
	tag      dwarf.Tag
	children bool
	attrs    []attrSpec
	// For Skip, in a unit of 8-byte addresses and 4-byte offsets (the
	// sizes fixedSize assumes): size is the bytes of all the attributes
	// when each form has a fixed size, else -1; sib is where the value
	// of DW_AT_sibling starts when the attributes before it have fixed
	// sizes, else -1.
	size, sib int32
	// loc: the DIEs have a DW_AT_location (Peek).
	loc bool
	// sibAt is the index in attrs of the DW_AT_sibling at sib, when
	// sib >= 0: found without a search of the attributes.
	sibAt int32
}

// fixedSize is the size of a value of form f in a unit of DWARF 3 or
// later with 8-byte addresses and 4-byte offsets; -1 if it varies.
func fixedSize(f form) int32 {
	switch f {
	case formFlagPresent, formImplicitConst:
		return 0
	case formData1, formRef1, formFlag, formStrx1, formAddrx1:
		return 1
	case formData2, formRef2, formStrx2, formAddrx2:
		return 2
	case formStrx3, formAddrx3:
		return 3
	case formData4, formRef4, formStrx4, formAddrx4,
		formStrp, formLineStrp, formSecOffset, formGNURefAlt, formGNUStrpAlt, formRefAddr:
		return 4
	case formData8, formRef8, formRefSig8, formAddr:
		return 8
	case formData16:
		return 16
	}
	return -1
}

// add adds at, a's attribute i, to a's size, sib, sibAt and loc.
func (a *abbrev) add(at *attrSpec, i int) {
	if at.attr == dwarf.AttrLocation {
		a.loc = true
	}
	if at.attr == dwarf.AttrSibling && a.sib < 0 && a.size >= 0 {
		a.sib, a.sibAt = a.size, int32(i)
	}
	if at.size < 0 || a.size < 0 {
		a.size = -1
		return
	}
	a.size += int32(at.size)
}

// form is a DW_FORM_* code (debug/dwarf keeps its names private).
type form uint64

const (
	formAddr          form = 0x1
	formBlock2        form = 0x3
	formBlock4        form = 0x4
	formData2         form = 0x5
	formData4         form = 0x6
	formData8         form = 0x7
	formString        form = 0x8
	formBlock         form = 0x9
	formBlock1        form = 0xa
	formData1         form = 0xb
	formFlag          form = 0xc
	formSdata         form = 0xd
	formStrp          form = 0xe
	formUdata         form = 0xf
	formRefAddr       form = 0x10
	formRef1          form = 0x11
	formRef2          form = 0x12
	formRef4          form = 0x13
	formRef8          form = 0x14
	formRefUdata      form = 0x15
	formIndirect      form = 0x16
	formSecOffset     form = 0x17
	formExprloc       form = 0x18
	formFlagPresent   form = 0x19
	formStrx          form = 0x1a
	formAddrx         form = 0x1b
	formLineStrp      form = 0x1f
	formRefSig8       form = 0x20
	formLoclistx      form = 0x22
	formData16        form = 0x1e
	formImplicitConst form = 0x21
	formRnglistx      form = 0x23

	formStrx1        form = 0x25
	formStrx2        form = 0x26
	formStrx3        form = 0x27
	formStrx4        form = 0x28
	formAddrx1       form = 0x29
	formAddrx2       form = 0x2a
	formAddrx3       form = 0x2b
	formAddrx4       form = 0x2c
	formGNUAddrIndex form = 0x1f01
	formGNUStrIndex  form = 0x1f02
	formGNURefAlt    form = 0x1f20
	formGNUStrpAlt   form = 0x1f21
)

// abbrevScratch is where parseAbbrevs reads a table before it knows
// its size: its arrays, reused, stay in the caches, and the table's
// are made once at their size and copied into.
type abbrevScratch struct {
	attrs []attrSpec
	tab   []abbrev   // attrs nil: span says where they are in attrs
	span  [][2]int32 // of tab[code]
}

var abbrevScratches = sync.Pool{New: func() any { return new(abbrevScratch) }}

func parseAbbrevs(b []byte, off uint64) ([]abbrev, error) {
	if off >= uint64(len(b)) {
		return nil, fmt.Errorf("abbrev offset %#x outside .debug_abbrev: %w", off, ErrMalformed)
	}
	r := bytereader.New(b)
	r.Seek(int(off))
	// The attributes of all the table's abbreviations go in one slice
	// (span[code] is the code's part), not one grown per abbreviation:
	// a vmlinux has a table per unit, thousands of abbreviations each.
	sc := abbrevScratches.Get().(*abbrevScratch)
	defer abbrevScratches.Put(sc)
	all, tab, span := sc.attrs[:0], sc.tab[:0], sc.span[:0]
	defer func() { sc.attrs, sc.tab, sc.span = all, tab, span }()
	for {
		code := r.ULEB128()
		if code == 0 || r.Err() != nil {
			break
		}
		if code > 1<<20 {
			return nil, fmt.Errorf("abbrev code %d: %w", code, ErrMalformed)
		}
		a := abbrev{tag: dwarf.Tag(r.ULEB128()), sib: -1}
		a.children = r.U8() == 1 // DW_CHILDREN_yes
		lo := len(all)
		for {
			at, fm := dwarf.Attr(r.ULEB128()), form(r.ULEB128())
			if r.Err() != nil {
				return nil, fmt.Errorf("abbrev table at %#x: %w", off, ErrMalformed)
			}
			if at == 0 && fm == 0 {
				break
			}
			s := attrSpec{attr: at, form: fm, read: nextAttr(at), size: int8(fixedSize(fm))}
			if fm == formImplicitConst {
				s.ic = r.SLEB128()
			}
			a.add(&s, len(all)-lo)
			all = append(all, s)
		}
		for uint64(len(tab)) <= code {
			tab = append(tab, abbrev{sib: -1})
			span = append(span, [2]int32{})
		}
		tab[code] = a
		span[code] = [2]int32{int32(lo), int32(len(all))}
	}
	if r.Err() != nil {
		return nil, fmt.Errorf("abbrev table at %#x: %w", off, ErrMalformed)
	}
	out := slices.Clone(tab)
	attrs := slices.Clone(all)
	for code := range out {
		// nil for none, as appending to nil left it.
		if lo, hi := span[code][0], span[code][1]; hi > lo {
			out[code].attrs = attrs[lo:hi:hi]
		}
	}
	return out, nil
}

// Unit scans the DIEs of one unit.
type Unit struct {
	secs     *Sections
	end      uint64 // end of the unit in .debug_info
	first    uint64 // offset of the unit DIE
	start    uint64 // unit header offset in .debug_info
	ver      int
	addrSize int
	offSize  int // 4, or 8 for 64-bit DWARF
	strOffs  uint64
	addrBase uint64
	rngBase  uint64
	lowPC    uint64
	abbrevs  []abbrev
	r        bytereader.Reader
	vars     bool // WantVariables
	// fixed: the unit's addresses, offsets and version are those
	// fixedSize assumes, so the sizes it gives hold.
	fixed bool
}

// WantVariables has Next decode the DIEs of variables, parameters and
// lexical blocks too, and the attributes of locations (DIE.Loc).
func (s *Unit) WantVariables() { s.vars = true }

// Start and End are the unit's bytes in .debug_info.
func (s *Unit) Start() uint64 { return s.start }
func (s *Unit) End() uint64   { return s.end }

func varTag(t dwarf.Tag) bool {
	return t == dwarf.TagVariable || t == dwarf.TagFormalParameter || t == dwarf.TagLexDwarfBlock
}

// val is one attribute value: an integer, or bytes (strings, blocks).
type val struct {
	u     uint64
	b     []byte
	isStr bool
}

// readAttr reads the value of form f, resolving strings and (with
// resolveAddr) address indexes.
func (s *Unit) readAttr(f form, ic int64) (v val) {
	r := &s.r
	switch f {
	case formAddr:
		v.u = r.Uint(s.addrSize)
	case formData1, formRef1, formFlag, formStrx1, formAddrx1:
		v.u = uint64(r.U8())
	case formData2, formRef2, formStrx2, formAddrx2:
		v.u = uint64(r.U16())
	case formStrx3, formAddrx3:
		v.u = r.Uint(3)
	case formData4, formRef4, formStrx4, formAddrx4:
		v.u = uint64(r.U32())
	case formData8, formRef8, formRefSig8:
		v.u = r.U64()
	case formData16:
		r.Skip(16)
	case formSdata:
		v.u = uint64(r.SLEB128())
	case formUdata, formRefUdata, formStrx, formAddrx,
		formRnglistx, formLoclistx, formGNUAddrIndex, formGNUStrIndex:
		v.u = r.ULEB128()
	case formString:
		v.b, v.isStr = r.CString(), true
	case formStrp, formLineStrp, formSecOffset, formGNURefAlt, formGNUStrpAlt:
		v.u = r.Uint(s.offSize)
	case formRefAddr:
		if s.ver <= 2 {
			v.u = r.Uint(s.addrSize)
		} else {
			v.u = r.Uint(s.offSize)
		}
	case formBlock1:
		v.b = r.Bytes(uint64(r.U8()))
	case formBlock2:
		v.b = r.Bytes(uint64(r.U16()))
	case formBlock4:
		v.b = r.Bytes(uint64(r.U32()))
	case formBlock, formExprloc:
		v.b = r.Bytes(r.ULEB128())
	case formFlagPresent:
		v.u = 1
	case formImplicitConst:
		v.u = uint64(ic)
	case formIndirect:
		return s.readAttr(form(r.ULEB128()), ic)
	default:
		r.Fail(unknownForm(f))
	}
	switch f {
	case formStrp:
		v.b, v.isStr = cstrAt(s.secs.Str, v.u), true
	case formLineStrp:
		v.b, v.isStr = cstrAt(s.secs.LineStr, v.u), true
	case formStrx, formStrx1, formStrx2, formStrx3, formStrx4, formGNUStrIndex:
		so := s.secs.StrOffsets
		at := s.strOffs + v.u*uint64(s.offSize)
		if at+uint64(s.offSize) <= uint64(len(so)) {
			o := uint64(binary.LittleEndian.Uint32(so[at:]))
			if s.offSize == 8 {
				o = binary.LittleEndian.Uint64(so[at:])
			}
			v.b, v.isStr = cstrAt(s.secs.Str, o), true
		}
	}
	return v
}

func cstrAt(sec []byte, off uint64) []byte {
	if off >= uint64(len(sec)) {
		return nil
	}
	// IndexByte's vector loop, not a byte loop: names were a quarter
	// of readAttr's time.
	s := sec[off:]
	if i := bytes.IndexByte(s, 0); i >= 0 {
		return s[:i]
	}
	return s
}

// addrx resolves an index into .debug_addr.
func (s *Unit) addrx(i uint64) (uint64, bool) {
	a := s.secs.Addr
	at := s.addrBase + i*uint64(s.addrSize)
	if at+uint64(s.addrSize) > uint64(len(a)) {
		return 0, false
	}
	if s.addrSize == 4 {
		return uint64(binary.LittleEndian.Uint32(a[at:])), true
	}
	return binary.LittleEndian.Uint64(a[at:]), true
}

// DIE is the decoded subset of a DIE's attributes. Names are slices of
// the string sections; references are offsets in .debug_info (0: none).
type DIE struct {
	Off        uint64
	Tag        dwarf.Tag
	Children   bool
	Name       []byte
	Low        uint64 // DW_AT_low_pc, if HasLow
	HasLow     bool
	EntryPC    uint64 // DW_AT_entry_pc, if HasEntryPC
	HasEntryPC bool
	Origin     uint64 // DW_AT_abstract_origin
	Spec       uint64 // DW_AT_specification
	Type       uint64 // DW_AT_type
	Sibling    uint64 // DW_AT_sibling
	External   bool
	Decl       bool  // DW_AT_declaration
	Inline     int64 // DW_AT_inline
	DeclFile   int64 // -1 if absent
	DeclLine   int64
	CallFile   int64 // -1 if absent
	CallLine   int64
	ByteSize   int64
	CompDir    []byte
	// With Unit.WantVariables: variables', parameters' and lexical
	// blocks' DIEs are decoded too, with DW_AT_location (Loc, an
	// expression; or a location list: LocList, an offset, or with
	// LocListx an index) and functions' DW_AT_frame_base.
	Loc                  []byte
	LocList              uint64
	HasLocList, LocListx bool
	FrameBase            []byte

	high                uint64
	hasHigh, highIsOff  bool
	ranges              uint64
	hasRanges, rngIndex bool
	strOffs, addrBase   uint64
	rngBase             uint64
	hasBases            [3]bool
}

// wanted reports whether the scanner decodes the DIEs of tag; others are
// skipped attribute by attribute.
func wanted(t dwarf.Tag) bool {
	switch t {
	case dwarf.TagCompileUnit, dwarf.TagPartialUnit, dwarf.TagSubprogram, dwarf.TagInlinedSubroutine,
		dwarf.TagStructType, dwarf.TagUnionType, dwarf.TagTypedef:
		return true
	}
	return false
}

// HoldsCode reports whether the children of a DIE of tag may hold
// functions or inlined copies: a scan for code can jump over the other
// subtrees (SkipChildren).
func HoldsCode(t dwarf.Tag) bool {
	switch t {
	case dwarf.TagCompileUnit, dwarf.TagPartialUnit, dwarf.TagSubprogram, dwarf.TagInlinedSubroutine,
		dwarf.TagLexDwarfBlock, dwarf.TagNamespace, dwarf.TagModule:
		return true
	}
	return false
}

// abbrevOf reads the abbreviation code of the DIE at off, where the
// reader stands, and returns its abbreviation: nil at a null entry and on
// an error (a code not in the table fails the reader).
func (s *Unit) abbrevOf(off uint64) *abbrev {
	r := &s.r
	code := r.ULEB128()
	if code == 0 || r.Err() != nil {
		return nil
	}
	if code >= uint64(len(s.abbrevs)) || (s.abbrevs[code].tag == 0 && s.abbrevs[code].attrs == nil) {
		r.Fail(fmt.Errorf("DIE at %#x: abbreviation code %d not in the table: %w", off, code, ErrMalformed))
		return nil
	}
	return &s.abbrevs[code]
}

// sibling reads the DW_AT_sibling of a DIE of abbreviation a, the
// reader at its value (a.sib >= 0): GCC's are DW_FORM_ref4.
func (s *Unit) sibling(a *abbrev) uint64 {
	at := &a.attrs[a.sibAt]
	if at.form == formRef4 {
		return s.start + uint64(s.r.U32())
	}
	return s.ref(at.form, s.readAttr(at.form, at.ic).u)
}

// Next reads the next DIE into d. It returns false at a null entry (the
// end of a list of children) and on an error (see Err).
func (s *Unit) Next(d *DIE) bool {
	r := &s.r
	*d = DIE{Off: uint64(r.Offset()), DeclFile: -1, CallFile: -1}
	a := s.abbrevOf(d.Off)
	if a == nil {
		return false
	}
	d.Tag, d.Children = a.tag, a.children
	want := wanted(a.tag) || (s.vars && varTag(a.tag))
	if !want && s.fixed && a.size >= 0 {
		// A DIE nothing is kept of but its sibling, all of fixed
		// size (call sites, members, most types): stepped over at
		// once, as Skip does.
		if a.sib >= 0 {
			at0 := r.Offset()
			r.Skip(uint64(a.sib))
			d.Sibling = s.sibling(a)
			r.Seek(at0)
		}
		r.Skip(uint64(a.size))
		return r.Err() == nil
	}
	for _, at := range a.attrs {
		if (!want || !at.read) && at.attr != dwarf.AttrSibling {
			switch {
			case at.size >= 0 && s.fixed:
				r.Skip(uint64(at.size))
			case at.form == formExprloc:
				r.Skip(r.ULEB128())
			default:
				s.skipAttr(at.form)
			}
			continue
		}
		// The forms GCC writes most read here, the rest by readAttr:
		// its call and its larger result cost more than reading most
		// values (a helper holding this switch is not inlined, and
		// Next was then no faster).
		var v val
		switch at.form {
		case formRef4, formData4:
			v.u = uint64(r.U32())
		case formData1, formRef1, formFlag:
			v.u = uint64(r.U8())
		case formData2, formRef2:
			v.u = uint64(r.U16())
		case formFlagPresent:
			v.u = 1
		case formImplicitConst:
			v.u = uint64(at.ic)
		case formData8:
			v.u = r.U64()
		case formString:
			v.b, v.isStr = r.CString(), true
		case formExprloc:
			v.b = r.Bytes(r.ULEB128())
		case formStrp:
			if !s.fixed {
				v = s.readAttr(at.form, at.ic)
				break
			}
			v.u = uint64(r.U32())
			v.b, v.isStr = cstrAt(s.secs.Str, v.u), true
		case formAddr, formSecOffset:
			if !s.fixed {
				v = s.readAttr(at.form, at.ic)
				break
			}
			if at.form == formAddr {
				v.u = r.U64()
			} else {
				v.u = uint64(r.U32())
			}
		default:
			v = s.readAttr(at.form, at.ic)
		}
		switch at.attr {
		case dwarf.AttrSibling:
			d.Sibling = s.ref(at.form, v.u)
		case dwarf.AttrName:
			d.Name = v.b
		case dwarf.AttrLowpc:
			d.Low, d.HasLow = s.addrVal(at.form, v.u)
		case dwarf.AttrHighpc:
			d.hasHigh = true
			d.high = v.u
			if at.form == formAddr || at.form == formAddrx || (at.form >= formAddrx1 && at.form <= formAddrx4) {
				d.high, _ = s.addrVal(at.form, v.u)
			} else {
				d.highIsOff = true
			}
		case dwarf.AttrEntrypc:
			d.EntryPC, d.HasEntryPC = s.addrVal(at.form, v.u)
		case dwarf.AttrRanges:
			d.ranges, d.hasRanges, d.rngIndex = v.u, true, at.form == formRnglistx
		case dwarf.AttrAbstractOrigin:
			d.Origin = s.ref(at.form, v.u)
		case dwarf.AttrSpecification:
			d.Spec = s.ref(at.form, v.u)
		case dwarf.AttrExternal:
			d.External = v.u != 0
		case dwarf.AttrDeclaration:
			d.Decl = v.u != 0
		case dwarf.AttrInline:
			d.Inline = int64(v.u)
		case dwarf.AttrDeclFile:
			d.DeclFile = int64(v.u)
		case dwarf.AttrDeclLine:
			d.DeclLine = int64(v.u)
		case dwarf.AttrCallFile:
			d.CallFile = int64(v.u)
		case dwarf.AttrCallLine:
			d.CallLine = int64(v.u)
		case dwarf.AttrType:
			d.Type = s.ref(at.form, v.u)
		case dwarf.AttrByteSize:
			d.ByteSize = int64(v.u)
		case dwarf.AttrCompDir:
			d.CompDir = v.b
		case dwarf.AttrLocation:
			switch at.form {
			case formExprloc, formBlock, formBlock1, formBlock2, formBlock4:
				d.Loc = v.b
			case formLoclistx:
				d.LocList, d.HasLocList, d.LocListx = v.u, true, true
			case formSecOffset, formData4, formData8:
				d.LocList, d.HasLocList = v.u, true
			}
		case dwarf.AttrFrameBase:
			d.FrameBase = v.b
		case dwarf.AttrStrOffsetsBase:
			d.strOffs, d.hasBases[0] = v.u, true
		case dwarf.AttrAddrBase:
			d.addrBase, d.hasBases[1] = v.u, true
		case dwarf.AttrRnglistsBase:
			d.rngBase, d.hasBases[2] = v.u, true
		}
	}
	return r.Err() == nil
}

func (s *Unit) ref(f form, v uint64) uint64 {
	switch f {
	case formRefAddr:
		return v
	case formRef1, formRef2, formRef4, formRef8, formRefUdata:
		return s.start + v
	}
	return 0
}

func (s *Unit) addrVal(f form, v uint64) (uint64, bool) {
	switch f {
	case formAddrx, formAddrx1, formAddrx2, formAddrx3, formAddrx4, formGNUAddrIndex:
		return s.addrx(v)
	}
	return v, true
}

// skipAttr steps over a value of form f without decoding it.
func (s *Unit) skipAttr(f form) {
	r := &s.r
	switch f {
	case formFlagPresent, formImplicitConst:
	case formData1, formRef1, formFlag, formStrx1, formAddrx1:
		r.Skip(1)
	case formData2, formRef2, formStrx2, formAddrx2:
		r.Skip(2)
	case formStrx3, formAddrx3:
		r.Skip(3)
	case formData4, formRef4, formStrx4, formAddrx4:
		r.Skip(4)
	case formData8, formRef8, formRefSig8:
		r.Skip(8)
	case formData16:
		r.Skip(16)
	case formAddr:
		r.Skip(uint64(s.addrSize))
	case formStrp, formLineStrp, formSecOffset, formGNURefAlt, formGNUStrpAlt:
		r.Skip(uint64(s.offSize))
	case formRefAddr:
		if s.ver <= 2 {
			r.Skip(uint64(s.addrSize))
		} else {
			r.Skip(uint64(s.offSize))
		}
	case formSdata, formUdata, formRefUdata, formStrx, formAddrx,
		formRnglistx, formLoclistx, formGNUAddrIndex, formGNUStrIndex:
		r.SkipLEB128()
	case formString:
		r.CString()
	case formBlock1:
		r.Skip(uint64(r.U8()))
	case formBlock2:
		r.Skip(uint64(r.U16()))
	case formBlock4:
		r.Skip(uint64(r.U32()))
	case formBlock, formExprloc:
		r.Skip(r.ULEB128())
	case formIndirect:
		s.skipAttr(form(r.ULEB128()))
	default:
		r.Fail(unknownForm(f))
	}
}

func unknownForm(f form) error {
	return fmt.Errorf("unknown attribute form %#x: %w", uint64(f), ErrMalformed)
}

// Ranges returns the address ranges of d (low/high or DW_AT_ranges).
func (s *Unit) Ranges(d *DIE) ([][2]uint64, error) {
	return s.AppendRanges(nil, d)
}

// AppendRanges appends the address ranges of d to out: a caller's
// buffer saves the allocation of each list. On an error it returns out
// as it was.
func (s *Unit) AppendRanges(out [][2]uint64, d *DIE) ([][2]uint64, error) {
	if d.HasLow && d.hasHigh {
		hi := d.high
		if d.highIsOff {
			hi = d.Low + d.high
		}
		if hi >= d.Low {
			// Zero-length too: an inlined copy optimized down to nothing
			// still marks where the call was (its entry_pc).
			return append(out, [2]uint64{d.Low, hi}), nil
		}
		return out, nil
	}
	if !d.hasRanges {
		return out, nil
	}
	var got [][2]uint64
	var err error
	if s.ver >= 5 {
		got, err = s.rnglist(out, d.ranges, d.rngIndex)
	} else {
		got, err = s.rangesV4(out, d.ranges)
	}
	if err != nil {
		return out, err
	}
	return got, nil
}

func (s *Unit) rnglist(out [][2]uint64, off uint64, index bool) ([][2]uint64, error) {
	sec := s.secs.Rnglists
	if index {
		at := s.rngBase + off*uint64(s.offSize)
		if at+uint64(s.offSize) > uint64(len(sec)) {
			return nil, fmt.Errorf("rnglistx %d out of range: %w", off, ErrMalformed)
		}
		if s.offSize == 8 {
			off = s.rngBase + binary.LittleEndian.Uint64(sec[at:])
		} else {
			off = s.rngBase + uint64(binary.LittleEndian.Uint32(sec[at:]))
		}
	}
	if off >= uint64(len(sec)) {
		return nil, fmt.Errorf("range list at %#x outside .debug_rnglists: %w", off, ErrMalformed)
	}
	r := bytereader.New(sec)
	r.Seek(int(off))
	base := s.lowPC
	add := func(lo, hi uint64) {
		if hi >= lo { // empty ones too, as debug/dwarf: see dieRanges
			out = append(out, [2]uint64{lo, hi})
		}
	}
	for r.Err() == nil {
		switch r.U8() {
		case rleEndOfList:
			return out, nil
		case rleBaseAddressx:
			base, _ = s.addrx(r.ULEB128())
		case rleStartxEndx:
			a, _ := s.addrx(r.ULEB128())
			b, _ := s.addrx(r.ULEB128())
			add(a, b)
		case rleStartxLength:
			a, _ := s.addrx(r.ULEB128())
			add(a, a+r.ULEB128())
		case rleOffsetPair:
			a, b := r.ULEB128(), r.ULEB128()
			add(base+a, base+b)
		case rleBaseAddress:
			base = r.Uint(s.addrSize)
		case rleStartEnd:
			a, b := r.Uint(s.addrSize), r.Uint(s.addrSize)
			add(a, b)
		case rleStartLength:
			a := r.Uint(s.addrSize)
			add(a, a+r.ULEB128())
		default:
			return nil, fmt.Errorf("range list at %#x: unknown entry: %w", off, ErrMalformed)
		}
	}
	return nil, fmt.Errorf("range list at %#x runs past the section: %w", off, ErrMalformed)
}

// DW_RLE_* range list entry kinds (DWARF 5, 7.25).
const (
	rleEndOfList    = 0x00
	rleBaseAddressx = 0x01
	rleStartxEndx   = 0x02
	rleStartxLength = 0x03
	rleOffsetPair   = 0x04
	rleBaseAddress  = 0x05
	rleStartEnd     = 0x06
	rleStartLength  = 0x07
)

func (s *Unit) rangesV4(out [][2]uint64, off uint64) ([][2]uint64, error) {
	sec := s.secs.Ranges
	if off >= uint64(len(sec)) {
		return nil, fmt.Errorf("range list at %#x outside .debug_ranges: %w", off, ErrMalformed)
	}
	r := bytereader.New(sec)
	r.Seek(int(off))
	base := s.lowPC
	maxAddr := ^uint64(0)
	if s.addrSize == 4 {
		maxAddr = 0xffffffff
	}
	for r.Err() == nil {
		a, b := r.Uint(s.addrSize), r.Uint(s.addrSize)
		switch {
		case a == 0 && b == 0:
			return out, nil
		case a == maxAddr:
			base = b
		case b >= a:
			out = append(out, [2]uint64{base + a, base + b})
		}
	}
	return nil, fmt.Errorf("range list at %#x runs past the section: %w", off, ErrMalformed)
}

// NewUnit parses the header of the unit at [start, end) of .debug_info
// and its abbreviation table (from cache if there).
func NewUnit(secs *Sections, start, end uint64, cache Abbrevs) (*Unit, error) {
	info := secs.Info
	if start >= end || end > uint64(len(info)) {
		return nil, fmt.Errorf("unit at %#x..%#x outside .debug_info (%d bytes): %w", start, end, len(info), ErrMalformed)
	}
	s := &Unit{secs: secs, start: start, end: end, offSize: 4}
	r := &s.r
	r.Reset(info[:end])
	r.Seek(int(start))
	if r.U32() == 0xffffffff {
		r.U64()
		s.offSize = 8
	}
	s.ver = int(r.U16())
	var abOff uint64
	if s.ver >= 5 {
		ut := r.U8()
		s.addrSize = int(r.U8())
		abOff = r.Uint(s.offSize)
		switch ut {
		case utSkeleton, utSplitCompile:
			r.Skip(8) // dwo_id
		case utType, utSplitType:
			r.Skip(8 + uint64(s.offSize)) // type_signature, type_offset
		}
	} else {
		abOff = r.Uint(s.offSize)
		s.addrSize = int(r.U8())
	}
	if r.Err() != nil || s.ver < 2 || s.ver > 5 || (s.addrSize != 4 && s.addrSize != 8) {
		return nil, fmt.Errorf("unit at %#x: unsupported header (version %d, address size %d): %w", start, s.ver, s.addrSize, ErrMalformed)
	}
	s.fixed = s.addrSize == 8 && s.offSize == 4 && s.ver >= 3
	ab, ok := cache[abOff]
	if !ok && secs.shared != nil {
		secs.shared.mu.Lock()
		ab, ok = secs.shared.m[abOff]
		secs.shared.mu.Unlock()
	}
	if !ok {
		var err error
		if ab, err = parseAbbrevs(secs.Abbrev, abOff); err != nil {
			return nil, err
		}
		if secs.shared != nil {
			secs.shared.mu.Lock()
			secs.shared.m[abOff] = ab
			secs.shared.mu.Unlock()
		}
	}
	cache[abOff] = ab
	s.abbrevs = ab
	s.first = uint64(r.Offset())
	return s, nil
}

// DW_UT_* unit types whose headers carry more than a compile unit's
// (DWARF 5, 7.5.1).
const (
	utType         = 0x02
	utSkeleton     = 0x04
	utSplitCompile = 0x05
	utSplitType    = 0x06
)

// Version is the unit's DWARF version.
func (s *Unit) Version() int { return s.ver }

// AddrSize is the size of an address in the unit (its header's).
func (s *Unit) AddrSize() int { return s.addrSize }

// Err returns what stopped the scan, or nil.
func (s *Unit) Err() error { return s.r.Err() }

// Seek moves the scan to the DIE at off in .debug_info (in the unit).
func (s *Unit) Seek(off uint64) { s.r.Seek(int(off)) }

// UnitAttrs are the attributes of a unit DIE the scan does not keep
// in a DIE.
type UnitAttrs struct {
	StmtList     int64 // DW_AT_stmt_list, -1 if absent
	Language     int64
	AddrBase     uint64 // DWARF 5's bases
	LoclistsBase uint64
}

// UnitAttrs reads them from the unit DIE (after UnitDIE, which sets
// the bases its attributes may need), then goes back to where the scan
// was: Next does not decode them, once a unit.
func (s *Unit) UnitAttrs() UnitAttrs {
	r := &s.r
	back := r.Offset()
	defer r.Seek(back)
	ua := UnitAttrs{StmtList: -1}
	r.Seek(int(s.first))
	a := s.abbrevOf(s.first)
	if a == nil {
		return ua
	}
	for _, at := range a.attrs {
		v := s.readAttr(at.form, at.ic)
		switch at.attr {
		case dwarf.AttrStmtList:
			ua.StmtList = int64(v.u)
		case dwarf.AttrLanguage:
			ua.Language = int64(v.u)
		case dwarf.AttrAddrBase:
			ua.AddrBase = v.u
		case dwarf.AttrLoclistsBase:
			ua.LoclistsBase = v.u
		}
	}
	return ua
}

// UnitDIE reads the unit's first DIE into d. The string, address and
// range list bases it sets (DWARF 5) then apply to the unit's attributes,
// its own included (it is read again with them), and its low_pc becomes
// the base address of range lists.
func (s *Unit) UnitDIE(d *DIE) bool {
	s.Seek(s.first)
	if !s.Next(d) {
		return false
	}
	if d.hasBases != [3]bool{} {
		s.strOffs, s.addrBase, s.rngBase = d.strOffs, d.addrBase, d.rngBase
		s.Seek(d.Off)
		if !s.Next(d) {
			return false
		}
	}
	s.lowPC = d.Low
	return true
}

// PeekTag returns the tag of the DIE at the scan without moving it: 0
// at a null entry or where no DIE can be read.
func (s *Unit) PeekTag() dwarf.Tag {
	if a := s.peek(); a != nil {
		return a.tag
	}
	return 0
}

// Peek is what the abbreviation of a DIE says of it: enough to step
// over (Skip) one that cannot matter to a scan without decoding it.
type Peek struct {
	Tag      dwarf.Tag // 0 at a null entry or where no DIE can be read
	Children bool
	Location bool // it has a DW_AT_location
}

// Peek returns what the abbreviation of the DIE at the scan says,
// without moving the scan.
func (s *Unit) Peek() Peek {
	if a := s.peek(); a != nil {
		return Peek{Tag: a.tag, Children: a.children, Location: a.loc}
	}
	return Peek{}
}

// peek returns the abbreviation of the DIE at the scan, nil if none.
func (s *Unit) peek() *abbrev {
	if off := s.r.Offset(); s.r.Err() == nil && off < int(s.end) {
		// Most codes are one byte: read in place.
		if c := s.secs.Info[off]; c < 0x80 {
			if int(c) < len(s.abbrevs) {
				return &s.abbrevs[c]
			}
			return nil
		}
	}
	r := s.r
	code := r.ULEB128()
	if r.Err() != nil || code >= uint64(len(s.abbrevs)) {
		return nil
	}
	return &s.abbrevs[code]
}

// Skip moves the scan past the DIE at it and its children, decoding
// only what finds their end: DW_AT_sibling, or the sizes of the
// attributes. It returns false at a null entry and on an error (see
// Err), as Next does.
func (s *Unit) Skip() bool {
	r := &s.r
	off := uint64(r.Offset())
	a := s.abbrevOf(off)
	if a == nil {
		return false
	}
	fixed := s.fixed
	sib := uint64(0)
	switch {
	case fixed && a.children && a.sib >= 0:
		r.Skip(uint64(a.sib))
		sib = s.sibling(a)
		if r.Err() == nil && sib > off && sib <= s.end {
			s.Seek(sib)
			return true
		}
		// Not a sibling Skip can use: the attributes one by one, from
		// the start.
		r.Seek(int(off))
		s.abbrevOf(off)
		sib = 0
	case fixed && !a.children && a.size >= 0:
		r.Skip(uint64(a.size))
		return r.Err() == nil
	}
	for _, at := range a.attrs {
		if at.attr == dwarf.AttrSibling {
			sib = s.ref(at.form, s.readAttr(at.form, at.ic).u)
			continue
		}
		if fixed && at.size >= 0 {
			r.Skip(uint64(at.size))
		} else {
			s.skipAttr(at.form)
		}
	}
	if r.Err() != nil {
		return false
	}
	if !a.children {
		return true
	}
	if sib > off && sib <= s.end {
		s.Seek(sib)
		return true
	}
	for s.Skip() {
	}
	return r.Err() == nil
}

// SkipChildren moves the scan past the children of d, just read, if d
// has a usable DW_AT_sibling; it reports whether it did.
func (s *Unit) SkipChildren(d *DIE) bool {
	if !d.Children || d.Sibling <= d.Off || d.Sibling > s.end {
		return false
	}
	s.Seek(d.Sibling)
	return true
}
