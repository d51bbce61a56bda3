package dwscan

import (
	"debug/dwarf"
	"encoding/binary"
	"sort"

	"github.com/klasy/klasy/accessinfer/members"
)

// Variable is a parameter or local of a function (or of a copy inlined
// into it) with its locations.
type Variable struct {
	Name   string
	Type   dwarf.Offset // declared type
	Depth  int          // scopes from the function: inlined copies and lexical blocks
	Scope  [][2]uint64  // code of its innermost scope; nil: the whole function
	Pieces []Piece
}

// InlineSite is a copy of a function inlined into the one scanned.
type InlineSite struct {
	Name     string
	Ranges   [][2]uint64
	CallFile string
	CallLine int
	Depth    int
}

// Function is an out-of-line function with what tracking needs.
type Function struct {
	Name     string
	Entry    uint64
	Ranges   [][2]uint64
	CFAFrame bool // DW_AT_frame_base is DW_OP_call_frame_cfa
	Vars     []Variable
	Inlines  []InlineSite
	Params   []ScopedType // of the inlined copies
}

// ScopedType is a parameter's declared type and the code of the copy
// it belongs to.
type ScopedType struct {
	Type  dwarf.Offset
	Scope [][2]uint64
}

// Global is a variable at a fixed address: a global, a static (of a
// file or a function), a per-CPU variable (at its offset in the per-CPU
// area).
type Global struct {
	Addr uint64
	Size int64
	Type dwarf.Offset
	Name string
}

// Unit is what scanning one compilation unit found.
type Unit struct {
	Funcs   []Function
	Globals []Global
	Rets    map[uint64]dwarf.Offset // entry -> declared return type
}

type Scanner struct {
	d      *dwarf.Data
	r, ro  *dwarf.Reader
	ts     *members.Types
	info   []byte
	locs   unitLocs
	files  []string
	origin map[dwarf.Offset]originInfo
	out    *Unit
}

// Sections are the raw DWARF sections a scan reads besides what
// debug/dwarf decodes: the unit headers and the location lists.
type Sections struct {
	Info     []byte // .debug_info
	Loc      []byte // .debug_loc (DWARF 2-4)
	Loclists []byte // .debug_loclists (DWARF 5)
	Addr     []byte // .debug_addr
}

// NewScanner returns a scanner of d's units that reads the sizes of
// globals' types through ts (one goroutine's: neither is safe for
// concurrent use).
func NewScanner(d *dwarf.Data, ts *members.Types, sec Sections) *Scanner {
	s := &Scanner{d: d, r: d.Reader(), ro: d.Reader(), ts: ts, info: sec.Info}
	s.locs.loc = sec.Loc
	s.locs.loclists = sec.Loclists
	s.locs.addr = sec.Addr
	return s
}

// Scan scans the compilation unit whose DIE is at off into out.
func (s *Scanner) Scan(off dwarf.Offset, out *Unit) {
	out.Rets = map[uint64]dwarf.Offset{}
	s.out = out
	s.scanUnit(off)
}

type originInfo struct {
	name string
	typ  dwarf.Offset
}

// lookupOrigin follows DW_AT_abstract_origin and DW_AT_specification
// for a name and a type.
func (s *Scanner) lookupOrigin(e *dwarf.Entry) originInfo {
	var oi originInfo
	oi.name, _ = e.Val(dwarf.AttrName).(string)
	oi.typ, _ = e.Val(dwarf.AttrType).(dwarf.Offset)
	if oi.name != "" && oi.typ != 0 {
		return oi
	}
	o, ok := e.Val(dwarf.AttrAbstractOrigin).(dwarf.Offset)
	if !ok {
		if o, ok = e.Val(dwarf.AttrSpecification).(dwarf.Offset); !ok {
			return oi
		}
	}
	c := s.origins(o, 0)
	if oi.name == "" {
		oi.name = c.name
	}
	if oi.typ == 0 {
		oi.typ = c.typ
	}
	return oi
}

// origins is the name and type the DIE at o has or its origins give
// (up to 4 hops), read once per unit: every inlined copy of a function
// and every parameter of one names the same abstract DIE.
func (s *Scanner) origins(o dwarf.Offset, hop int) originInfo {
	if c, ok := s.origin[o]; ok {
		return c
	}
	var oi originInfo
	s.ro.Seek(o)
	oe, err := s.ro.Next()
	if err != nil || oe == nil {
		return oi
	}
	oi.name, _ = oe.Val(dwarf.AttrName).(string)
	oi.typ, _ = oe.Val(dwarf.AttrType).(dwarf.Offset)
	if (oi.name == "" || oi.typ == 0) && hop < 3 {
		next, ok := oe.Val(dwarf.AttrAbstractOrigin).(dwarf.Offset)
		if !ok {
			next, ok = oe.Val(dwarf.AttrSpecification).(dwarf.Offset)
		}
		if ok {
			c := s.origins(next, hop+1)
			if oi.name == "" {
				oi.name = c.name
			}
			if oi.typ == 0 {
				oi.typ = c.typ
			}
		}
	}
	s.origin[o] = oi
	return oi
}

// scanUnit scans the compilation unit whose DIE is at off.
func (s *Scanner) scanUnit(off dwarf.Offset) {
	s.r.Seek(off)
	cu, err := s.r.Next()
	if err != nil || cu == nil || cu.Tag != dwarf.TagCompileUnit {
		return
	}
	s.locs.version = 4
	// The unit header starts 11 (DWARF 2-4) or 12 (5) bytes before
	// its DIE; its version follows the 4-byte length.
	for _, h := range []int{12, 11} {
		if o := int(off) - h; o >= 0 && o+6 <= len(s.info) {
			if v := int(binary.LittleEndian.Uint16(s.info[o+4:])); (v == 5 && h == 12) || (v < 5 && v >= 2 && h == 11) {
				s.locs.version = v
				break
			}
		}
	}
	s.locs.lowPC, _ = cu.Val(dwarf.AttrLowpc).(uint64)
	if v, ok := cu.Val(dwarf.AttrAddrBase).(int64); ok {
		s.locs.addrBase = uint64(v)
	} else {
		s.locs.addrBase = 0
	}
	s.locs.llBase, _ = cu.Val(dwarf.AttrLoclistsBase).(int64)
	s.files = s.files[:0]
	if lr, err := s.d.LineReader(cu); err == nil && lr != nil {
		for _, f := range lr.Files() {
			if f == nil {
				s.files = append(s.files, "")
			} else {
				s.files = append(s.files, f.Name)
			}
		}
	}
	s.origin = map[dwarf.Offset]originInfo{}
	if !cu.Children {
		return
	}
	for {
		e, err := s.r.Next()
		if err != nil || e == nil || e.Tag == 0 {
			return
		}
		switch e.Tag {
		case dwarf.TagSubprogram:
			s.subprogram(e)
		case dwarf.TagVariable:
			s.variableDIE(e, 0, nil, nil)
			if e.Children {
				s.r.SkipChildren()
			}
		default:
			if e.Children {
				s.r.SkipChildren()
			}
		}
	}
}

func (s *Scanner) ranges(e *dwarf.Entry) [][2]uint64 {
	rs, err := s.d.Ranges(e)
	if err != nil {
		return nil
	}
	out := rs[:0]
	for _, r := range rs {
		if r[0] != 0 && r[0] < r[1] {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	return out
}

func (s *Scanner) subprogram(e *dwarf.Entry) {
	if decl, _ := e.Val(dwarf.AttrDeclaration).(bool); decl {
		if e.Children {
			s.r.SkipChildren()
		}
		return
	}
	oi := s.lookupOrigin(e)
	rs := s.ranges(e)
	if len(rs) == 0 {
		// An abstract instance: its static locals may still be
		// globals; nothing else has code.
		if e.Children {
			s.children(nil, 0, nil)
		}
		return
	}
	if oi.typ != 0 {
		s.out.Rets[rs[0][0]] = oi.typ
	}
	f := Function{Name: oi.name, Entry: rs[0][0], Ranges: rs}
	if lo, ok := e.Val(dwarf.AttrLowpc).(uint64); ok {
		f.Entry = lo
	}
	fb, _ := e.Val(dwarf.AttrFrameBase).([]byte)
	f.CFAFrame = len(fb) == 1 && fb[0] == opCallFrameCFA
	if e.Children {
		s.children(&f, 0, nil)
	}
	s.out.Funcs = append(s.out.Funcs, f)
}

// children reads the DIEs of a scope up to its end: variables, lexical
// blocks, inlined copies. f is nil in an abstract instance.
func (s *Scanner) children(f *Function, depth int, scope [][2]uint64) {
	for {
		e, err := s.r.Next()
		if err != nil || e == nil || e.Tag == 0 {
			return
		}
		switch e.Tag {
		case dwarf.TagFormalParameter, dwarf.TagVariable:
			if e.Tag == dwarf.TagFormalParameter && f != nil && depth > 0 && len(scope) > 0 {
				// A parameter of an inlined copy, with a location or not.
				if oi := s.lookupOrigin(e); oi.typ != 0 {
					f.Params = append(f.Params, ScopedType{Type: oi.typ, Scope: scope})
				}
			}
			s.variableDIE(e, depth, scope, f)
			if e.Children {
				s.r.SkipChildren()
			}
		case dwarf.TagLexDwarfBlock:
			if !e.Children {
				continue
			}
			var rs [][2]uint64
			if f != nil {
				rs = s.ranges(e)
			}
			s.children(f, depth+1, rs)
		case dwarf.TagInlinedSubroutine:
			var rs [][2]uint64
			if f != nil {
				rs = s.ranges(e)
				oi := s.lookupOrigin(e)
				site := InlineSite{Name: oi.name, Ranges: rs, Depth: depth + 1}
				if cf, ok := e.Val(dwarf.AttrCallFile).(int64); ok && cf >= 0 && int(cf) < len(s.files) {
					site.CallFile = s.files[cf]
				}
				if cl, ok := e.Val(dwarf.AttrCallLine).(int64); ok {
					site.CallLine = int(cl)
				}
				f.Inlines = append(f.Inlines, site)
			}
			if e.Children {
				s.children(f, depth+1, rs)
			}
		default:
			if e.Children {
				s.r.SkipChildren()
			}
		}
	}
}

// variableDIE records a variable: a global if it lives at a fixed
// address, else (in a function) a local with its locations.
func (s *Scanner) variableDIE(e *dwarf.Entry, depth int, scope [][2]uint64, f *Function) {
	fld := e.AttrField(dwarf.AttrLocation)
	if fld == nil {
		return
	}
	var pieces []Piece
	switch fld.Class {
	case dwarf.ClassExprLoc, dwarf.ClassBlock:
		b, _ := fld.Val.([]byte)
		if w := Describe(b); w.Kind == LocAddr {
			oi := s.lookupOrigin(e)
			g := Global{Addr: w.addr, Type: oi.typ, Name: oi.name}
			if t := s.ts.Get(oi.typ); t != nil {
				g.Size = t.Size
			}
			if g.Size > 0 {
				s.out.Globals = append(s.out.Globals, g)
			}
			return
		}
		pieces = []Piece{{0, Everywhere, b}}
	case dwarf.ClassLocListPtr:
		off, _ := fld.Val.(int64)
		pieces = s.locs.list(off)
	case dwarf.ClassLocList:
		i, _ := fld.Val.(int64)
		if off, ok := s.locs.loclistx(uint64(i)); ok {
			pieces = s.locs.list(off)
		}
	}
	if f == nil || len(pieces) == 0 {
		return
	}
	oi := s.lookupOrigin(e)
	if oi.typ == 0 {
		return
	}
	f.Vars = append(f.Vars, Variable{Name: oi.name, Type: oi.typ, Depth: depth, Scope: scope, Pieces: pieces})
}
