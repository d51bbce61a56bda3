package dwarfmap

import (
	"cmp"
	"debug/dwarf"
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"

	"github.com/go-delve/delve/pkg/dwarf/godwarf"

	"github.com/klasy/klasy/dwarfmap/cachefile"
	"github.com/klasy/klasy/dwarfmap/dwtype"
	"github.com/klasy/klasy/dwarfmap/dwvar"
	"github.com/klasy/klasy/dwarfmap/elfimage"
	"github.com/klasy/klasy/dwarfmap/loc"
	"github.com/klasy/klasy/dwarfmap/table"
	"github.com/klasy/klasy/internal/mmapfile"
	"github.com/klasy/klasy/internal/srcpath"
	"github.com/klasy/klasy/x86code"
)

// Batch answers the many small queries of one pass over an image (the
// weaver resolving access join points: thousands of lines, each in
// every copy of its function) and keeps what they share: file ids by
// name, the decoded code of functions, the DWARF tree of each function
// whose variables are asked for, struct layouts, the .debug_frame
// entries by address. It is not safe for concurrent use. Like the
// index's other queries that read the image, its callers catch an image
// changed under the mapping (mmapfile.Catch).
type Batch struct {
	x        *Index
	fileIDs  map[string][]uint32 // file ids by name (srcpath.Rel)
	byBase   map[string][]uint32 // file ids by base name
	files    map[string][]uint32 // Files' answers
	byCaller map[uint32][]uint32 // inlined copies by caller, made when first asked
	code     map[uint64]*FuncCode
	scopes   map[uint32]*dwvar.Scope
	layouts  map[string]layoutResult
	fdes     *loc.FDEIndex
	// graphs are the control flow graphs by function entry; reserved
	// the image's jump label and static call sites (Graph).
	graphs       map[uint64]*x86code.Graph
	reserved     *elfimage.Reserved
	reservedRead bool
	decls        map[uint32][]int // functions' declaration lines by file (NextDecl)
}

type layoutResult struct {
	l   *dwtype.Layout
	err error
}

// batchSecs are the sections a Batch reads.
const batchSecs = inlineSecs | funcAtSecs | 1<<cachefile.SecRows | 1<<cachefile.SecByAddr | 1<<cachefile.SecByFile | structSecs

// NewBatch starts a batch of queries on x.
func (x *Index) NewBatch() (*Batch, error) {
	if err := x.needImage(); err != nil {
		return nil, err
	}
	y, err := x.use(batchSecs)
	if err != nil {
		return nil, err
	}
	b := &Batch{x: y, fileIDs: make(map[string][]uint32, len(y.t.Files)), byBase: map[string][]uint32{},
		files: map[string][]uint32{}, code: map[uint64]*FuncCode{},
		scopes: map[uint32]*dwvar.Scope{}, layouts: map[string]layoutResult{}}
	for i := range y.t.Files {
		name := y.File(uint32(i))
		b.fileIDs[name] = append(b.fileIDs[name], uint32(i))
		b.byBase[path.Base(name)] = append(b.byBase[path.Base(name)], uint32(i))
	}
	return b, nil
}

// Files returns the ids of the line table's files called name: that
// path, or paths ending in /name. A compiler given a relative path
// records it as such elsewhere (gcc's plugin does), while the line
// table joins it to the compilation directory.
func (b *Batch) Files(name string) []uint32 {
	if ids, ok := b.files[name]; ok {
		return ids
	}
	// Names are compared as printed: relative to the source tree.
	rel := srcpath.Rel(name)
	ids, ok := b.fileIDs[rel]
	if !ok {
		for _, id := range b.byBase[path.Base(rel)] {
			if strings.HasSuffix(b.x.File(id), "/"+rel) {
				ids = append(ids, id)
			}
		}
	}
	b.files[name] = ids
	return ids
}

// Index is the index the batch queries (a rebuilt one if the cache
// file was found damaged).
func (b *Batch) Index() *Index { return b.x }

// LineRows returns the rows of file:line by address (file as Files
// finds it).
func (b *Batch) LineRows(file string, line int) []Row {
	var out []Row
	for _, id := range b.Files(file) {
		for _, ri := range b.x.fileRows(id, line) {
			if r := b.x.row(ri); r.Flags&RowEndSequence == 0 && r.Line != 0 {
				out = append(out, r)
			}
		}
	}
	slices.SortStableFunc(out, func(a, c Row) int { return cmp.Compare(a.Addr, c.Addr) })
	return out
}

// RowsIn returns the rows with addresses in [lo, hi), by address.
func (b *Batch) RowsIn(lo, hi uint64) []Row {
	var out []Row
	for _, ri := range b.x.rowsIn(lo, hi) {
		if r := b.x.row(ri); r.Flags&RowEndSequence == 0 {
			out = append(out, r)
		}
	}
	return out
}

// FileName is the name of a row's file.
func (b *Batch) FileName(r Row) string { return b.x.File(r.File) }

// Instance is one copy of a function's code: an out-of-line body, or a
// copy inlined into another function.
type Instance struct {
	Name string // the function
	// Host is the out-of-line function whose code holds the copy (the
	// function itself for an out-of-line body).
	Host     string
	HostFile string
	Inlined  bool
	// Ranges hold the copy's code, by address; a copy the compiler
	// merged into its caller's line has one empty range at its entry.
	Ranges [][2]uint64
	// HostRanges are the ranges of Host.
	HostRanges [][2]uint64
	// CallFile:CallLine is where an inlined copy is called.
	CallFile string
	CallLine int
	// DeclFile:DeclLine is where the function of an inlined copy is
	// defined (set by CopiesAt).
	DeclFile string
	DeclLine int
	// DIE is the copy's DW_TAG_subprogram or DW_TAG_inlined_subroutine.
	DIE uint64
}

// Instances returns every out-of-line body and every inlined copy of
// the function name, those of the function declared in declFile when
// some are (static functions of other files may share the name), out of
// line ones first.
func (b *Batch) Instances(name, declFile string) []Instance {
	x := b.x
	var out []Instance
	var decl []uint32 // each instance's function's declaration file
	lo, hi := x.nameRange(len(x.t.ByName), x.funcName, name, true)
	for _, i := range x.t.ByName[lo:hi] {
		f := x.t.Funcs[i]
		rs := x.t.Ranges[f.RngOff : f.RngOff+f.RngN]
		out = append(out, Instance{Name: name, Host: name, HostFile: x.File(f.DeclFile), Ranges: rs, HostRanges: rs, DIE: f.DIE})
		decl = append(decl, f.DeclFile)
	}
	lo, hi = x.nameRange(len(x.t.InlName), x.inlineName, name, true)
	for _, i := range x.t.InlName[lo:hi] {
		in := x.t.Inlines[i]
		inst := Instance{Name: name, Inlined: true, Ranges: x.t.InlRanges[in.RngOff : in.RngOff+in.RngN],
			CallFile: x.File(in.CallFile), CallLine: int(in.CallLine), DIE: in.DIE}
		if in.Caller != table.NoFile && int(in.Caller) < len(x.t.Funcs) {
			c := x.t.Funcs[in.Caller]
			inst.Host, inst.HostFile = x.t.Str(c.Name), x.File(c.DeclFile)
			inst.HostRanges = x.t.Ranges[c.RngOff : c.RngOff+c.RngN]
		}
		out = append(out, inst)
		decl = append(decl, in.DeclFile)
	}
	ids := b.Files(declFile)
	if !slices.ContainsFunc(decl, func(d uint32) bool { return slices.Contains(ids, d) }) {
		return out
	}
	kept := out[:0]
	for i, in := range out {
		if slices.Contains(ids, decl[i]) {
			kept = append(kept, in)
		}
	}
	return kept
}

// CopiesCalledAt returns the inlined copies called at file:line whose
// code lies in the out-of-line function host (its entry address), each
// with its ranges.
func (b *Batch) CopiesCalledAt(hostEntry uint64, file string, line int) []Instance {
	x := b.x
	hi, ok := x.t.FuncAt(hostEntry)
	if !ok {
		return nil
	}
	b.indexCallers()
	ids := b.Files(file)
	var out []Instance
	for _, i := range b.byCaller[uint32(hi)] {
		in := x.t.Inlines[i]
		if !slices.Contains(ids, in.CallFile) || int(in.CallLine) != line {
			continue
		}
		out = append(out, Instance{Name: x.t.Str(in.Name), Host: x.t.Str(x.t.Funcs[hi].Name), Inlined: true,
			Ranges: x.t.InlRanges[in.RngOff : in.RngOff+in.RngN], CallFile: file, CallLine: line, DIE: in.DIE})
	}
	return out
}

// FuncAt returns the out-of-line function whose code holds addr.
func (b *Batch) FuncAt(addr uint64) (FuncInfo, bool) { return b.x.FuncAt(addr) }

// FuncCode is one address range of a function's code, decoded: where
// its instructions and basic blocks start.
type FuncCode struct {
	Func    string
	Lo, Hi  uint64
	starts  []uint64
	leaders []uint64
}

// Code returns the decoded range of the function holding addr.
func (b *Batch) Code(addr uint64) (*FuncCode, error) {
	fi, ok := b.x.FuncAt(addr)
	if !ok {
		return nil, fmt.Errorf("%#x is in no function with debug info", addr)
	}
	for _, r := range fi.Ranges {
		if addr < r[0] || addr >= r[1] {
			continue
		}
		if c := b.code[r[0]]; c != nil {
			return c, nil
		}
		code := b.x.img.ReadText(r[0], r[1]-r[0])
		if code == nil {
			return nil, fmt.Errorf("no code bytes for %s at %#x in the image", fi.Name, r[0])
		}
		c := &FuncCode{Func: fi.Name, Lo: r[0], Hi: r[1]}
		c.starts, c.leaders = x86code.Scan(code, r[0])
		b.code[r[0]] = c
		return c, nil
	}
	return nil, fmt.Errorf("%#x is not in %s", addr, fi.Name)
}

// Find reports whether an instruction starts at addr.
func (c *FuncCode) Find(addr uint64) (int, bool) {
	return slices.BinarySearch(c.starts, addr)
}

// Block returns the basic block [lo, hi) holding addr (dwarfmap's
// BasicBlock rule: calls do not end a block).
func (c *FuncCode) Block(addr uint64) (lo, hi uint64) {
	i := sort.Search(len(c.leaders), func(i int) bool { return c.leaders[i] > addr })
	lo, hi = c.Lo, c.Hi
	if i > 0 {
		lo = c.leaders[i-1]
	}
	if i < len(c.leaders) {
		hi = c.leaders[i]
	}
	return lo, hi
}

// Insns decodes the code in [lo, hi), which starts with an instruction.
func (b *Batch) Insns(lo, hi uint64) []x86code.Insn {
	if hi <= lo {
		return nil
	}
	code := b.x.img.ReadText(lo, hi-lo)
	if code == nil {
		return nil
	}
	return x86code.Decode(code, lo)
}

// VarLocsAt is Index.VarLocsAt, reading each function's DWARF once.
func (b *Batch) VarLocsAt(addr uint64) (locs []VarLoc, err error) {
	defer func() {
		if r := recover(); r != nil {
			if mmapfile.IsFault(r) {
				panic(r) // the image changed: for the caller's mmapfile.Catch
			}
			locs, err = nil, fmt.Errorf("malformed debug info at %#x: %v", addr, r)
		}
	}()
	s, err := b.scope(addr)
	if err != nil {
		return nil, err
	}
	return s.VarLocs(addr, loc.NewFrameIn(b.fdeIndex(), addr, s.FrameBase)), nil
}

// Struct is Index.Struct, each name read once.
func (b *Batch) Struct(name string) (*dwtype.Layout, error) {
	if r, ok := b.layouts[name]; ok {
		return r.l, r.err
	}
	l, err := b.x.Struct(name)
	b.layouts[name] = layoutResult{l, err}
	return l, err
}

// StructNames returns the names of the structs, unions and typedefs of
// the image, sorted (for suggestions).
func (b *Batch) StructNames() []string {
	x := b.x
	out := make([]string, 0, len(x.t.Structs))
	for _, s := range x.t.Structs {
		if n := x.t.Str(s.Name); len(out) == 0 || out[len(out)-1] != n {
			out = append(out, n)
		}
	}
	return out
}

// SectionOf names the image's section holding addr.
func (b *Batch) SectionOf(addr uint64) string { return b.x.SectionOf(addr) }

// NextRowAddr returns the lowest row address above addr (the end of
// the code of the rows at addr), ok false if none.
func (b *Batch) NextRowAddr(addr uint64) (uint64, bool) {
	x := b.x
	at := func(i int) Row { return x.byAddr(i, Row{Addr: ^uint64(0)}) }
	i := sort.Search(len(x.t.ByAddr), func(i int) bool { return at(i).Addr > addr })
	if i >= len(x.t.ByAddr) {
		return 0, false
	}
	return at(i).Addr, true
}

// VarLocNamed is the variable name in scope at addr, as VarLocsAt lists
// it: the innermost one of scope ("f", or "inline f" for an inlined
// copy's), else the innermost of any scope; ok false if none is in scope.
// Only that variable's location is worked out.
func (b *Batch) VarLocNamed(addr uint64, name, scope string) (vl VarLoc, ok bool, err error) {
	defer func() {
		if r := recover(); r != nil {
			if mmapfile.IsFault(r) {
				panic(r)
			}
			vl, ok, err = VarLoc{}, false, fmt.Errorf("malformed debug info at %#x: %v", addr, r)
		}
	}()
	s, err := b.scope(addr)
	if err != nil {
		return VarLoc{}, false, err
	}
	vl, ok = s.VarLocNamed(addr, loc.NewFrameIn(b.fdeIndex(), addr, s.FrameBase), name, scope)
	return vl, ok, nil
}

func (b *Batch) fdeIndex() *loc.FDEIndex {
	if b.fdes == nil {
		b.fdes = loc.NewFDEIndex(b.x.img)
	}
	return b.fdes
}

// scope returns the DWARF tree of the function holding addr, read once.
func (b *Batch) scope(addr uint64) (*dwvar.Scope, error) {
	x := b.x
	fi, ok := x.FuncAt(addr)
	if !ok {
		return nil, fmt.Errorf("no function with debug info at %#x", addr)
	}
	if s := b.scopes[uint32(fi.index)]; s != nil {
		return s, nil
	}
	s, err := x.loadScope(fi)
	if err != nil {
		return nil, err
	}
	b.scopes[uint32(fi.index)] = s
	return s, nil
}

// loadScope reads the DWARF tree of function fi.
func (x *Index) loadScope(fi FuncInfo) (*dwvar.Scope, error) {
	f := x.t.Funcs[fi.index]
	u := x.t.Units[f.Unit]
	d, err := x.img.UnitDWARF(u.Off, u.End)
	if err != nil {
		return nil, err
	}
	tree, err := godwarf.LoadTree(dwarf.Offset(f.DIE-u.Off), d, 0)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", fi.Name, err)
	}
	fb, _ := tree.Val(dwarf.AttrFrameBase).([]byte)
	return &dwvar.Scope{Name: fi.Name, Tree: tree, FrameBase: fb, Types: dwtype.NewNamer(d), Lists: loc.NewLists(x.img, d, int(u.Version), u.LowPC)}, nil
}

// TrapAt names the trap instruction at addr — "ud2" (a BUG() or
// WARN() site) or "int3" — or returns "": the kernel refuses kprobes on
// both.
func (b *Batch) TrapAt(addr uint64) string {
	code := b.x.img.ReadText(addr, 2)
	switch {
	case len(code) == 2 && code[0] == 0x0f && code[1] == 0x0b:
		return "ud2"
	case len(code) >= 1 && code[0] == 0xcc:
		return "int3"
	}
	return ""
}
