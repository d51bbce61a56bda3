// Package table holds the data of a dwarfmap index: flat arrays of
// fixed-size records that refer to each other by array index and to
// strings by (offset, length), so that a cache file holds them byte for
// byte, and the sort orders and address spans derived from them that
// lookups search (Finish).
package table

import "sort"

// StrRef names a string in Tables.Strs.
type StrRef struct{ Off, Len uint32 }

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
	File          uint32 // index into Tables.Files
	Line          uint32
	Discriminator uint32
	Column        uint16
	Flags         uint16
}

// Unit is a compilation unit.
type Unit struct {
	Name     StrRef
	CompDir  StrRef
	Off, End uint64 // [Off, End) of .debug_info
	LowPC    uint64 // base address for location lists
	RowStart uint32 // [RowStart, RowEnd) of Tables.Rows
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

// NoFile marks an unknown file (and an unknown caller).
const NoFile = ^uint32(0)

// Func is a function with code (a concrete, out-of-line copy).
type Func struct {
	Name     StrRef
	DIE      uint64 // offset of its DW_TAG_subprogram in .debug_info
	Entry    uint64 // entry address: low_pc, or the first DW_AT_ranges entry
	Unit     uint32
	DeclFile uint32
	DeclLine uint32
	Flags    uint32
	RngOff   uint32 // [RngOff, RngOff+RngN) of Tables.Ranges, sorted
	RngN     uint32
}

// Inline is one inlined copy of a function.
type Inline struct {
	Name     StrRef
	DIE      uint64 // its DW_TAG_inlined_subroutine
	Unit     uint32
	CallFile uint32
	CallLine uint32
	Caller   uint32 // index into Tables.Funcs, or NoFile if unknown
	RngOff   uint32 // [RngOff, RngOff+RngN) of Tables.InlRanges, sorted
	RngN     uint32
	DeclFile uint32 // of the inlined function
	DeclLine uint32
}

// InlineSum sums up the inlined copies of one function, so that listing
// functions reads neither the copies nor their ranges.
type InlineSum struct {
	Name     StrRef
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
	Name StrRef
	DIE  uint64
	Unit uint32
	Size uint32
	Kind uint32
	_    uint32
}

// Span maps an address range to the function owning it.
type Span struct {
	Lo, Hi uint64
	Func   uint32
	_      uint32
}

// Tables are the arrays of one image's index.
type Tables struct {
	Strs  []byte
	Files []StrRef
	Units []Unit
	Rows  []Row
	// The sort orders and spans hold live code only: no discarded
	// function (FuncDiscarded), no inlined copy in one, no row of its code.
	ByAddr  []uint32 // rows (not end-of-sequence) by address
	ByFile  []uint32 // rows by (file, line, address)
	Funcs   []Func
	ByName  []uint32 // funcs by name
	Inlines []Inline
	InlName []uint32    // inlines by name
	Ranges  [][2]uint64 // of funcs
	Spans   []Span      // function ranges by Lo
	Structs []Struct    // by name
	// Appended in format version 6.
	InlRanges [][2]uint64 // of inlines
	InlSum    []InlineSum // by name
	// Appended in format version 7.
	ChunkCRCs []uint32 // per chunk of rows, byAddr, byFile (cache files)
}

// Str returns the string r names.
func (t *Tables) Str(r StrRef) string {
	return string(t.Strs[r.Off : r.Off+r.Len])
}

// Stats are the sizes of an index.
type Stats struct {
	Units, Files, Rows, Funcs, Inlines, Ranges, Structs int
}

// Stats reports how many records t holds.
func (t *Tables) Stats() Stats {
	return Stats{len(t.Units), len(t.Files), len(t.Rows), len(t.Funcs), len(t.Inlines), len(t.Ranges) + len(t.InlRanges), len(t.Structs)}
}

// FuncAt returns the index of the live function whose code holds addr.
func (t *Tables) FuncAt(addr uint64) (int, bool) {
	i := sort.Search(len(t.Spans), func(i int) bool { return t.Spans[i].Lo > addr }) - 1
	// Spans may nest; look back a few for one that covers addr.
	for k := 0; i >= 0 && k < 8; i, k = i-1, k+1 {
		if s := t.Spans[i]; addr >= s.Lo && addr < s.Hi {
			return int(s.Func), true
		}
	}
	return 0, false
}
