package dwarfmap

import (
	"debug/dwarf"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/klasy/klasy/dwarfmap/elfimage"
	"github.com/klasy/klasy/internal/bytereader"
)

// A purpose-built DIE scanner for the index build. debug/dwarf's Reader
// decodes every attribute of every DIE into interface values (17.9 M DIEs
// and 4 GB of garbage for Debian's vmlinux, 4 s of CPU); the index needs a
// dozen attributes of three tags. The scanner skips other attributes by
// form, jumps over type subtrees with DW_AT_sibling, and returns names as
// slices of the mapped string sections. Queries still use debug/dwarf and
// delve's packages on one unit at a time.

var errBadDWARF = errors.New("malformed DWARF")

type attrSpec struct {
	attr dwarf.Attr
	form form
	ic   int64 // DW_FORM_implicit_const value
}

type abbrev struct {
	tag      dwarf.Tag
	children bool
	attrs    []attrSpec
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

func parseAbbrevs(b []byte, off uint64) ([]abbrev, error) {
	if off >= uint64(len(b)) {
		return nil, fmt.Errorf("abbrev offset %#x outside .debug_abbrev: %w", off, errBadDWARF)
	}
	r := bytereader.New(b)
	r.Seek(int(off))
	var tab []abbrev
	for {
		code := r.ULEB128()
		if code == 0 || r.Err() != nil {
			break
		}
		if code > 1<<20 {
			return nil, fmt.Errorf("abbrev code %d: %w", code, errBadDWARF)
		}
		a := abbrev{tag: dwarf.Tag(r.ULEB128())}
		a.children = r.U8() == 1 // DW_CHILDREN_yes
		for {
			at, fm := dwarf.Attr(r.ULEB128()), form(r.ULEB128())
			if r.Err() != nil {
				return nil, fmt.Errorf("abbrev table at %#x: %w", off, errBadDWARF)
			}
			if at == 0 && fm == 0 {
				break
			}
			s := attrSpec{attr: at, form: fm}
			if fm == formImplicitConst {
				s.ic = r.SLEB128()
			}
			a.attrs = append(a.attrs, s)
		}
		for uint64(len(tab)) <= code {
			tab = append(tab, abbrev{})
		}
		tab[code] = a
	}
	if r.Err() != nil {
		return nil, fmt.Errorf("abbrev table at %#x: %w", off, errBadDWARF)
	}
	return tab, nil
}

// unitScan holds what reading attribute values of one unit needs.
type unitScan struct {
	img      *elfimage.Image
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
}

// val is one attribute value: an integer, or bytes (strings, blocks).
type val struct {
	u     uint64
	b     []byte
	isStr bool
}

// readAttr reads the value of form f, resolving strings and (with
// resolveAddr) address indexes.
func (s *unitScan) readAttr(f form, ic int64) (v val) {
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
		v.b, v.isStr = cstrAt(s.img.Section(".debug_str"), v.u), true
	case formLineStrp:
		v.b, v.isStr = cstrAt(s.img.Section(".debug_line_str"), v.u), true
	case formStrx, formStrx1, formStrx2, formStrx3, formStrx4, formGNUStrIndex:
		so := s.img.Section(".debug_str_offsets")
		at := s.strOffs + v.u*uint64(s.offSize)
		if at+uint64(s.offSize) <= uint64(len(so)) {
			o := uint64(binary.LittleEndian.Uint32(so[at:]))
			if s.offSize == 8 {
				o = binary.LittleEndian.Uint64(so[at:])
			}
			v.b, v.isStr = cstrAt(s.img.Section(".debug_str"), o), true
		}
	}
	return v
}

func cstrAt(sec []byte, off uint64) []byte {
	if off >= uint64(len(sec)) {
		return nil
	}
	s := sec[off:]
	for i, c := range s {
		if c == 0 {
			return s[:i]
		}
	}
	return s
}

// addrx resolves an index into .debug_addr.
func (s *unitScan) addrx(i uint64) (uint64, bool) {
	a := s.img.Section(".debug_addr")
	at := s.addrBase + i*uint64(s.addrSize)
	if at+uint64(s.addrSize) > uint64(len(a)) {
		return 0, false
	}
	if s.addrSize == 4 {
		return uint64(binary.LittleEndian.Uint32(a[at:])), true
	}
	return binary.LittleEndian.Uint64(a[at:]), true
}

// die is the decoded subset of a DIE's attributes.
type die struct {
	off                 uint64
	tag                 dwarf.Tag
	children            bool
	name                []byte
	low, high           uint64
	hasLow, hasHigh     bool
	highIsOff           bool
	ranges              uint64
	hasRanges, rngIndex bool
	entryPC             uint64
	hasEntryPC          bool
	origin, spec, typ   uint64
	sibling             uint64
	external, decl      bool
	inline              int64
	declFile, declLine  int64
	callFile, callLine  int64
	byteSize            int64
	stmtList            int64
	compDir             []byte
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

// descend reports whether children of tag may hold functions or inlined
// copies; other subtrees are jumped over by DW_AT_sibling when present.
func descend(t dwarf.Tag) bool {
	switch t {
	case dwarf.TagCompileUnit, dwarf.TagPartialUnit, dwarf.TagSubprogram, dwarf.TagInlinedSubroutine,
		dwarf.TagLexDwarfBlock, dwarf.TagNamespace, dwarf.TagModule:
		return true
	}
	return false
}

// next reads the DIE at the reader's offset into d. It returns false at a null entry.
func (s *unitScan) next(d *die) bool {
	r := &s.r
	*d = die{off: uint64(r.Offset()), declFile: -1, callFile: -1}
	code := r.ULEB128()
	if code == 0 || r.Err() != nil {
		return false
	}
	if code >= uint64(len(s.abbrevs)) || (s.abbrevs[code].tag == 0 && s.abbrevs[code].attrs == nil) {
		r.Fail(fmt.Errorf("DIE at %#x: abbreviation code %d not in the table: %w", d.off, code, errBadDWARF))
		return false
	}
	a := &s.abbrevs[code]
	d.tag, d.children = a.tag, a.children
	want := wanted(a.tag)
	for _, at := range a.attrs {
		if !want && at.attr != dwarf.AttrSibling {
			s.skipAttr(at.form)
			continue
		}
		v := s.readAttr(at.form, at.ic)
		switch at.attr {
		case dwarf.AttrSibling:
			d.sibling = s.ref(at.form, v.u)
		case dwarf.AttrName:
			d.name = v.b
		case dwarf.AttrLowpc:
			d.low, d.hasLow = s.addrVal(at.form, v.u)
		case dwarf.AttrHighpc:
			d.hasHigh = true
			d.high = v.u
			if at.form == formAddr || at.form == formAddrx || (at.form >= formAddrx1 && at.form <= formAddrx4) {
				d.high, _ = s.addrVal(at.form, v.u)
			} else {
				d.highIsOff = true
			}
		case dwarf.AttrEntrypc:
			d.entryPC, d.hasEntryPC = s.addrVal(at.form, v.u)
		case dwarf.AttrRanges:
			d.ranges, d.hasRanges, d.rngIndex = v.u, true, at.form == formRnglistx
		case dwarf.AttrAbstractOrigin:
			d.origin = s.ref(at.form, v.u)
		case dwarf.AttrSpecification:
			d.spec = s.ref(at.form, v.u)
		case dwarf.AttrExternal:
			d.external = v.u != 0
		case dwarf.AttrDeclaration:
			d.decl = v.u != 0
		case dwarf.AttrInline:
			d.inline = int64(v.u)
		case dwarf.AttrDeclFile:
			d.declFile = int64(v.u)
		case dwarf.AttrDeclLine:
			d.declLine = int64(v.u)
		case dwarf.AttrCallFile:
			d.callFile = int64(v.u)
		case dwarf.AttrCallLine:
			d.callLine = int64(v.u)
		case dwarf.AttrType:
			d.typ = s.ref(at.form, v.u)
		case dwarf.AttrByteSize:
			d.byteSize = int64(v.u)
		case dwarf.AttrStmtList:
			d.stmtList = int64(v.u)
		case dwarf.AttrCompDir:
			d.compDir = v.b
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

func (s *unitScan) ref(f form, v uint64) uint64 {
	switch f {
	case formRefAddr:
		return v
	case formRef1, formRef2, formRef4, formRef8, formRefUdata:
		return s.start + v
	}
	return 0
}

func (s *unitScan) addrVal(f form, v uint64) (uint64, bool) {
	switch f {
	case formAddrx, formAddrx1, formAddrx2, formAddrx3, formAddrx4, formGNUAddrIndex:
		return s.addrx(v)
	}
	return v, true
}

// skipAttr steps over a value of form f without decoding it.
func (s *unitScan) skipAttr(f form) {
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
	return fmt.Errorf("unknown attribute form %#x: %w", uint64(f), errBadDWARF)
}

// dieRanges returns the address ranges of d (low/high or DW_AT_ranges).
func (s *unitScan) dieRanges(d *die) ([][2]uint64, error) {
	if d.hasLow && d.hasHigh {
		hi := d.high
		if d.highIsOff {
			hi = d.low + d.high
		}
		if hi >= d.low {
			// Zero-length too: an inlined copy optimized down to nothing
			// still marks where the call was (its entry_pc).
			return [][2]uint64{{d.low, hi}}, nil
		}
		return nil, nil
	}
	if !d.hasRanges {
		return nil, nil
	}
	if s.ver >= 5 {
		return s.rnglist(d.ranges, d.rngIndex)
	}
	return s.rangesV4(d.ranges)
}

func (s *unitScan) rnglist(off uint64, index bool) ([][2]uint64, error) {
	sec := s.img.Section(".debug_rnglists")
	if index {
		at := s.rngBase + off*uint64(s.offSize)
		if at+uint64(s.offSize) > uint64(len(sec)) {
			return nil, fmt.Errorf("rnglistx %d out of range: %w", off, errBadDWARF)
		}
		if s.offSize == 8 {
			off = s.rngBase + binary.LittleEndian.Uint64(sec[at:])
		} else {
			off = s.rngBase + uint64(binary.LittleEndian.Uint32(sec[at:]))
		}
	}
	if off >= uint64(len(sec)) {
		return nil, fmt.Errorf("range list at %#x outside .debug_rnglists: %w", off, errBadDWARF)
	}
	r := bytereader.New(sec)
	r.Seek(int(off))
	base := s.lowPC
	var out [][2]uint64
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
			return nil, fmt.Errorf("range list at %#x: unknown entry: %w", off, errBadDWARF)
		}
	}
	return nil, fmt.Errorf("range list at %#x runs past the section: %w", off, errBadDWARF)
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

func (s *unitScan) rangesV4(off uint64) ([][2]uint64, error) {
	sec := s.img.Section(".debug_ranges")
	if off >= uint64(len(sec)) {
		return nil, fmt.Errorf("range list at %#x outside .debug_ranges: %w", off, errBadDWARF)
	}
	r := bytereader.New(sec)
	r.Seek(int(off))
	base := s.lowPC
	maxAddr := ^uint64(0)
	if s.addrSize == 4 {
		maxAddr = 0xffffffff
	}
	var out [][2]uint64
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
	return nil, fmt.Errorf("range list at %#x runs past the section: %w", off, errBadDWARF)
}

// newUnitScan parses the header of the unit at [start, end).
func newUnitScan(img *elfimage.Image, start, end uint64, abbrevCache map[uint64][]abbrev) (*unitScan, error) {
	info := img.Section(".debug_info")
	s := &unitScan{img: img, start: start, offSize: 4}
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
		return nil, fmt.Errorf("unit at %#x: unsupported header (version %d, address size %d): %w", start, s.ver, s.addrSize, errBadDWARF)
	}
	ab, ok := abbrevCache[abOff]
	if !ok {
		var err error
		if ab, err = parseAbbrevs(img.Section(".debug_abbrev"), abOff); err != nil {
			return nil, err
		}
		abbrevCache[abOff] = ab
	}
	s.abbrevs = ab
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
