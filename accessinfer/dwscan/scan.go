package dwscan

import (
	"cmp"
	"debug/dwarf"
	"encoding/binary"
	"slices"

	"github.com/klasy/klasy/accessinfer/members"
	"github.com/klasy/klasy/dwarfmap/diescan"
	"github.com/klasy/klasy/dwarfmap/lineprog"
)

// Variable is a parameter or local of a function (or of a copy inlined
// into it) with its locations.
type Variable struct {
	Name   string
	Type   dwarf.Offset // declared type
	Depth  int          // scopes from the function: inlined copies and lexical blocks
	Scope  [][2]uint64  // code of its innermost scope; nil: the whole function
	Pieces []Piece
	Param  bool // a formal parameter
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
	CFAFrame bool       // DW_AT_frame_base is DW_OP_call_frame_cfa
	Vars     []Variable // those that can type an access (Scanner.typed)
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
	Rets    []Ret // in the order of the unit's DIEs
}

// Ret is the declared return type of the function at Entry.
type Ret struct {
	Entry uint64
	Type  dwarf.Offset
}

type Scanner struct {
	// dw gives debug/dwarf's view of the image, read when first asked:
	// to tell whether a unit diescan cannot read makes the image an
	// error.
	dw     func() (*dwarf.Data, error)
	err    error
	ts     *members.Types
	secs   *diescan.Sections
	abbrev diescan.Abbrevs
	u, uo  *diescan.Unit // the scan, and the reads of origins
	e      diescan.DIE
	locs   unitLocs
	// files is the unit's line table's header, for the inlined
	// copies' call files: its names are joined when a call site asks
	// (the headers name hundreds of files, a unit's call sites a few).
	files  lineprog.Header
	line   lineprog.Sections
	origin map[dwarf.Offset]originInfo
	names  *members.NameCache
	out    *Unit
	// The lists of the function being scanned grow here and are copied
	// out at its end: growing each function's own left half its
	// variables' memory behind as garbage.
	vars    []Variable
	inlines []InlineSite
	params  []ScopedType
	one     [1]Piece // a location that is one expression
	rbuf    [][2]uint64
	// The lists a scan keeps are carved out of these: they live as long
	// as its result, and one allocation for thousands of them cost less
	// than one each.
	slabs struct {
		vars    slab[Variable]
		inlines slab[InlineSite]
		params  slab[ScopedType]
		pieces  slab[Piece]
		ranges  slab[[2]uint64]
	}
}

// slab hands out slices of large backing arrays.
type slab[T any] struct{ buf []T }

// copy returns a copy of l (nil if empty, as a list never appended to),
// its capacity its length: appending to it copies it out of the slab.
func (s *slab[T]) copy(l []T) []T {
	if len(l) == 0 {
		return nil
	}
	if len(l) > cap(s.buf)-len(s.buf) {
		s.buf = make([]T, 0, max(1024, len(l)))
	}
	n := len(s.buf)
	s.buf = append(s.buf, l...)
	return s.buf[n:len(s.buf):len(s.buf)]
}

// Sections are the raw DWARF sections a scan reads besides what
// debug/dwarf decodes: the unit headers and the location lists.
type Sections struct {
	Info     []byte // .debug_info
	Loc      []byte // .debug_loc (DWARF 2-4)
	Loclists []byte // .debug_loclists (DWARF 5)
	Addr     []byte // .debug_addr
	// The line tables and their strings, for the files' names.
	Line, Str, LineStr []byte
	// The DIEs are read with dwarfmap's scanner (diescan), which
	// decodes only the attributes asked for: debug/dwarf's Reader
	// decoded all of them into interface values, half the scan's time.
	DIEs *diescan.Sections
}

// NewScanner returns a scanner of an image's units that reads the sizes of
// globals' types through ts (one goroutine's: neither is safe for
// concurrent use).
func NewScanner(dw func() (*dwarf.Data, error), ts *members.Types, sec Sections) *Scanner {
	s := &Scanner{dw: dw, ts: ts, secs: sec.DIEs, abbrev: ts.Abbrevs(), names: &members.NameCache{}}
	s.locs.loc = sec.Loc
	s.locs.loclists = sec.Loclists
	s.locs.addr = sec.Addr
	s.line = lineprog.Sections{Line: sec.Line, Str: sec.Str, LineStr: sec.LineStr}
	return s
}

// Units returns the bytes [start, end) of each unit in .debug_info.
func Units(info []byte) [][2]uint64 {
	var out [][2]uint64
	for at := uint64(0); at+4 <= uint64(len(info)); {
		n, hdr := uint64(binary.LittleEndian.Uint32(info[at:])), uint64(4)
		if n == 0xffffffff {
			if at+12 > uint64(len(info)) {
				break
			}
			n, hdr = binary.LittleEndian.Uint64(info[at+4:]), 12
		}
		end := at + hdr + n
		if n == 0 || end > uint64(len(info)) || end <= at {
			break
		}
		out = append(out, [2]uint64{at, end})
		at = end
	}
	return out
}

// Scan scans the compilation unit at [start, end) of .debug_info into
// out.
func (s *Scanner) Scan(start, end uint64, out *Unit) {
	s.out = out
	s.scanUnit(start, end)
}

// originInfo is a DIE's name and type, its own or its origins'. The
// name stays bytes of the string section until kept: most variables
// are dropped (Scanner.typed).
type originInfo struct {
	name []byte
	typ  dwarf.Offset
}

// str returns b as a string (members.NameCache).
func (s *Scanner) str(b []byte) string { return s.names.Str(b) }

// lookupOrigin follows DW_AT_abstract_origin and DW_AT_specification
// for a name and a type.
func (s *Scanner) lookupOrigin(e *diescan.DIE) originInfo {
	var oi originInfo
	oi.name = e.Name
	oi.typ = dwarf.Offset(e.Type)
	if len(oi.name) != 0 && oi.typ != 0 {
		return oi
	}
	o := e.Origin
	if o == 0 {
		if o = e.Spec; o == 0 {
			return oi
		}
	}
	c := s.origins(dwarf.Offset(o), 0)
	if len(oi.name) == 0 {
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
	if uint64(o) < s.uo.Start() || uint64(o) >= s.uo.End() {
		return oi // in another unit (DW_FORM_ref_addr): not read
	}
	var oe diescan.DIE
	s.uo.Seek(uint64(o))
	if !s.uo.Next(&oe) {
		return oi
	}
	oi.name = oe.Name
	oi.typ = dwarf.Offset(oe.Type)
	if (len(oi.name) == 0 || oi.typ == 0) && hop < 3 {
		next := oe.Origin
		if next == 0 {
			next = oe.Spec
		}
		if next != 0 {
			c := s.origins(dwarf.Offset(next), hop+1)
			if len(oi.name) == 0 {
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

// scanUnit scans the compilation unit at [start, end).
func (s *Scanner) scanUnit(start, end uint64) {
	var cud diescan.DIE
	u, err := diescan.NewUnit(s.secs, start, end, s.abbrev)
	if err != nil || !u.UnitDIE(&cud) {
		s.unreadable()
		return
	}
	if cud.Tag != dwarf.TagCompileUnit {
		return
	}
	uo, _ := diescan.NewUnit(s.secs, start, end, s.abbrev)
	u.WantVariables()
	uo.WantVariables()
	s.u, s.uo = u, uo
	uo.UnitDIE(&diescan.DIE{})
	s.locs.version = u.Version()
	s.locs.lowPC = cud.Low
	ua := u.UnitAttrs()
	s.locs.addrBase = ua.AddrBase
	s.locs.llBase = int64(ua.LoclistsBase)
	// A table debug/dwarf's LineReader would refuse gives no files, as
	// it did when the scan asked debug/dwarf.
	_ = s.files.Read(s.line, lineprog.Unit{StmtList: ua.StmtList, CompDir: string(cud.CompDir), AddrSize: u.AddrSize()})
	// Emptied, not made anew: its buckets serve the next unit.
	if s.origin == nil {
		s.origin = map[dwarf.Offset]originInfo{}
	}
	clear(s.origin)
	if !cud.Children {
		return
	}
	if ua.Language == langAssembler {
		// gas describes an assembler file's functions (.type f,
		// @function) as subprograms; their code has no C member
		// access to infer, only the variables' addresses it uses
		// (saved_context in wakeup_64.S).
		return
	}
	e := &s.e
	for {
		// Most DIEs of a unit are its types: skipped without decoding.
		// So are variables without a location: declarations.
		if p := u.Peek(); p.Tag != dwarf.TagSubprogram && (p.Tag != dwarf.TagVariable || !p.Location) && p.Tag != 0 {
			if !u.Skip() {
				return
			}
			continue
		}
		if !u.Next(e) || e.Tag == 0 {
			return
		}
		switch e.Tag {
		case dwarf.TagSubprogram:
			s.subprogram(e)
		case dwarf.TagVariable:
			s.variableDIE(e, 0, nil, nil, originInfo{}, false)
			s.skipChildren(e)
		}
	}
}

// unreadable notes a unit diescan cannot read: an image debug/dwarf
// refuses as a whole is an error (Err), as when inference began with
// debug/dwarf; other units are skipped, as they were.
func (s *Scanner) unreadable() {
	if _, err := s.dw(); err != nil && s.err == nil {
		s.err = err
	}
}

// Err is the error of the image's DWARF a scan met, if any.
func (s *Scanner) Err() error { return s.err }

// langAssembler is DW_LANG_Mips_Assembler, which gas gives its units.
const langAssembler = 0x8001

// skipChildren moves the scan past the children of e, just read.
func (s *Scanner) skipChildren(e *diescan.DIE) {
	if !e.Children || s.u.SkipChildren(e) {
		return
	}
	for s.u.Skip() {
	}
}

func (s *Scanner) ranges(e *diescan.DIE) [][2]uint64 {
	rs, err := s.u.AppendRanges(s.rbuf[:0], e)
	s.rbuf = rs
	if err != nil {
		return nil
	}
	out := rs[:0]
	for _, r := range rs {
		if r[0] != 0 && r[0] < r[1] {
			out = append(out, r)
		}
	}
	if len(out) > 1 {
		// Not sort.Slice, whose reflection swapper and closure were
		// two allocations a list: 7% of inference's.
		slices.SortFunc(out, func(a, b [2]uint64) int { return cmp.Compare(a[0], b[0]) })
	}
	if len(out) == 0 && len(rs) > 0 {
		// Only empty ranges: a scope of no code (a variable's Scope
		// nil is the whole function).
		return noCode
	}
	return s.slabs.ranges.copy(out)
}

var noCode = [][2]uint64{}

func (s *Scanner) subprogram(e *diescan.DIE) {
	if e.Decl {
		s.skipChildren(e)
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
		s.out.Rets = append(s.out.Rets, Ret{rs[0][0], oi.typ})
	}
	f := Function{Name: s.str(oi.name), Entry: rs[0][0], Ranges: rs}
	if e.HasLow {
		f.Entry = e.Low
	}
	fb := e.FrameBase
	f.CFAFrame = len(fb) == 1 && fb[0] == opCallFrameCFA
	if e.Children {
		f.Vars, f.Inlines, f.Params = s.vars[:0], s.inlines[:0], s.params[:0]
		s.children(&f, 0, nil)
		s.vars, s.inlines, s.params = f.Vars, f.Inlines, f.Params
		f.Vars, f.Inlines, f.Params = s.slabs.vars.copy(f.Vars), s.slabs.inlines.copy(f.Inlines), s.slabs.params.copy(f.Params)
	}
	s.out.Funcs = append(s.out.Funcs, f)
}

// children reads the DIEs of a scope up to its end: variables, lexical
// blocks, inlined copies. f is nil in an abstract instance.
func (s *Scanner) children(f *Function, depth int, scope [][2]uint64) {
	var de diescan.DIE
	e := &de
	// The parameters of an inlined copy are kept with or without a
	// location (Function.Params).
	inlined := f != nil && depth > 0 && len(scope) > 0
	for {
		// Call sites, labels, types local to the function are skipped
		// undecoded; so are variables and parameters without a
		// location (optimized out, or an abstract instance's) but
		// those of an inlined copy, and lexical blocks without
		// children: a third of the DIEs scanned.
		var skip bool
		switch p := s.u.Peek(); p.Tag {
		case dwarf.TagInlinedSubroutine, 0:
		case dwarf.TagFormalParameter:
			skip = !p.Location && !inlined
		case dwarf.TagVariable:
			skip = !p.Location
		case dwarf.TagLexDwarfBlock:
			skip = !p.Children
		default:
			skip = true
		}
		if skip {
			if !s.u.Skip() {
				return
			}
			continue
		}
		if !s.u.Next(e) || e.Tag == 0 {
			return
		}
		switch e.Tag {
		case dwarf.TagFormalParameter, dwarf.TagVariable:
			var oi originInfo
			known := false
			if e.Tag == dwarf.TagFormalParameter && inlined {
				// A parameter of an inlined copy, with a location or not.
				if oi, known = s.lookupOrigin(e), true; oi.typ != 0 {
					f.Params = append(f.Params, ScopedType{Type: oi.typ, Scope: scope})
				}
			}
			s.variableDIE(e, depth, scope, f, oi, known)
			s.skipChildren(e)
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
				site := InlineSite{Name: s.str(oi.name), Ranges: rs, Depth: depth + 1}
				site.CallFile = s.files.File(int(e.CallFile))
				site.CallLine = int(e.CallLine)
				f.Inlines = append(f.Inlines, site)
			}
			if e.Children {
				s.children(f, depth+1, rs)
			}
		default:
			s.skipChildren(e)
		}
	}
}

// variableDIE records a variable: a global if it lives at a fixed
// address, else (in a function) a local with its locations. oi is
// lookupOrigin(e) when known.
func (s *Scanner) variableDIE(e *diescan.DIE, depth int, scope [][2]uint64, f *Function, oi originInfo, known bool) {
	var pieces []Piece
	switch {
	case e.Loc != nil:
		b := e.Loc
		if w := Describe(b); w.Kind == LocAddr {
			if !known {
				oi = s.lookupOrigin(e)
			}
			g := Global{Addr: w.addr, Type: oi.typ}
			if t := s.ts.Get(oi.typ); t != nil {
				g.Size = t.Size
			}
			if g.Size > 0 {
				g.Name = s.str(oi.name)
				s.out.Globals = append(s.out.Globals, g)
			}
			return
		}
		pieces = s.one[:]
		s.one[0] = Piece{0, Everywhere, b}
	case e.HasLocList:
	default:
		return
	}
	if f == nil {
		return
	}
	if !known {
		oi = s.lookupOrigin(e)
	}
	if oi.typ == 0 || !s.typed(oi.typ) {
		return
	}
	switch {
	case pieces != nil:
	case e.LocListx:
		if off, ok := s.locs.loclistx(e.LocList); ok {
			pieces = s.locs.list(off)
		}
	default:
		pieces = s.locs.list(int64(e.LocList))
	}
	if len(pieces) == 0 {
		return
	}
	f.Vars = append(f.Vars, Variable{Name: s.str(oi.name), Type: oi.typ, Depth: depth, Scope: scope, Pieces: s.slabs.pieces.copy(pieces), Param: e.Tag == dwarf.TagFormalParameter})
}

// typed says whether a variable of type off can type a memory access:
// a struct, union or array, or a pointer to one (or to a pointer).
// Tracking uses no other; most locals are integers, and their location
// lists were half of those read.
func (s *Scanner) typed(off dwarf.Offset) bool {
	t := s.ts.Get(off)
	if t == nil {
		return false
	}
	switch t.Kind {
	case members.Struct, members.Union, members.Array:
		return true
	case members.Ptr:
		return members.Useful(s.ts.Pointee(t))
	}
	return false
}
