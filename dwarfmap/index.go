package dwarfmap

import "github.com/klasy/klasy/dwarfmap/elfimage"

// The index is a handful of flat arrays of fixed-size records plus one
// string blob. Every record refers to others by array index and to
// strings by (offset, length), so the cache file is these arrays byte for
// byte and loading it is a mapping plus a check, not a parse.

// strRef names a string in Index.strs.
type strRef struct{ Off, Len uint32 }

// Row flags.
const (
	RowStmt        = 1 << iota // is_stmt: a recommended breakpoint location
	RowEndSequence             // first address past a sequence, not code
	RowPrologueEnd
	RowEpilogueBegin
	RowBasicBlock
)

// Row is one row of a line-number table.
type Row struct {
	Addr          uint64
	File          uint32 // index into Index.files
	Line          uint32
	Discriminator uint32
	Column        uint16
	Flags         uint16
}

// Unit is a compilation unit.
type Unit struct {
	Name     strRef
	CompDir  strRef
	Off, End uint64 // [Off, End) of .debug_info
	LowPC    uint64 // base address for location lists
	RowStart uint32 // [RowStart, RowEnd) of Index.rows
	RowEnd   uint32
	Version  uint32
	_        uint32
}

// Function flags.
const (
	FuncExternal = 1 << iota // DW_AT_external: a global symbol
	FuncInline               // declared inline
	// FuncDiscarded marks a copy whose code never runs, such as a __weak
	// definition that a strong one overrode (elfimage.Code). The sort
	// orders and address spans leave it out, with its inlined copies and
	// its rows: only Discarded lists it.
	FuncDiscarded
)

// noFile marks an unknown file.
const noFile = ^uint32(0)

// Func is a function with code (a concrete, out-of-line copy).
type Func struct {
	Name     strRef
	DIE      uint64 // offset of its DW_TAG_subprogram in .debug_info
	Entry    uint64 // entry address: low_pc, or the first DW_AT_ranges entry
	Unit     uint32
	DeclFile uint32
	DeclLine uint32
	Flags    uint32
	RngOff   uint32 // [RngOff, RngOff+RngN) of Index.ranges, sorted
	RngN     uint32
}

// Inline is one inlined copy of a function.
type Inline struct {
	Name     strRef
	DIE      uint64 // its DW_TAG_inlined_subroutine
	Unit     uint32
	CallFile uint32
	CallLine uint32
	Caller   uint32 // index into Index.funcs, or noFile if unknown
	RngOff   uint32 // [RngOff, RngOff+RngN) of Index.inlRanges, sorted
	RngN     uint32
	DeclFile uint32 // of the inlined function
	DeclLine uint32
}

// inlineSum sums up the inlined copies of one function, so that listing
// functions reads neither the copies nor their ranges.
type inlineSum struct {
	Name     strRef
	N        uint32 // inlined copies
	DeclFile uint32 // of the function (its first copy's)
	DeclLine uint32
}

// Struct kinds.
const (
	KindStruct  = 1
	KindUnion   = 2
	KindTypedef = 3 // a typedef name, resolved to its struct/union when asked
)

// Struct is a named struct or union type (its first complete definition).
type Struct struct {
	Name strRef
	DIE  uint64
	Unit uint32
	Size uint32
	Kind uint32
	_    uint32
}

// addrSpan maps an address range to the function owning it.
type addrSpan struct {
	Lo, Hi uint64
	Func   uint32
	_      uint32
}

// Index holds everything dwarfmap knows about one image.
type Index struct {
	BuildID string
	strs    []byte
	files   []strRef
	units   []Unit
	rows    []Row
	// The sort orders and spans hold live code only: no discarded
	// function (FuncDiscarded), no inlined copy in one, no row of its code.
	byAddr  []uint32 // rows (not end-of-sequence) by address
	byFile  []uint32 // rows by (file, line, address)
	funcs   []Func
	byName  []uint32 // funcs by name
	inlines []Inline
	inlName []uint32    // inlines by name
	ranges  [][2]uint64 // of funcs
	spans   []addrSpan  // function ranges by Lo
	structs []Struct    // by name
	// Appended in format version 6.
	inlRanges [][2]uint64 // of inlines
	inlSum    []inlineSum // by name
	// Appended in format version 7.
	chunkCRCs []uint32 // per chunk of rows, byAddr, byFile (cache files)

	img     *elfimage.Image // set once opened against the image, for lazy queries
	lazy    *lazySections   // a mapped cache file's sections not yet checked
	release func() error
}

func (x *Index) str(r strRef) string {
	return string(x.strs[r.Off : r.Off+r.Len])
}

// Stats are the sizes of an index.
type Stats struct {
	Units, Files, Rows, Funcs, Inlines, Ranges, Structs int
}

// Stats reports how many records the index holds.
func (x *Index) Stats() Stats {
	if x.lazy != nil {
		x = x.lazy.all // the sizes, without reading the sections
	}
	return Stats{len(x.units), len(x.files), len(x.rows), len(x.funcs), len(x.inlines), len(x.ranges) + len(x.inlRanges), len(x.structs)}
}

// Close releases the cache mapping behind x (if any). x must not be used
// afterwards.
func (x *Index) Close() error {
	if x.release != nil {
		return x.release()
	}
	return nil
}
