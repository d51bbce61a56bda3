package dwarfmap

import (
	"sync/atomic"

	"github.com/klasy/klasy/dwarfmap/cachefile"
	"github.com/klasy/klasy/dwarfmap/elfimage"
	"github.com/klasy/klasy/dwarfmap/table"
)

// The index is a handful of flat arrays of fixed-size records plus one
// string blob (package table). Every record refers to others by array
// index and to strings by (offset, length), so the cache file is these
// arrays byte for byte and loading it is a mapping plus a check, not a
// parse.

// Row is one row of a line-number table.
type Row = table.Row

// Unit is a compilation unit.
type Unit = table.Unit

// Func is a function with code (a concrete, out-of-line copy).
type Func = table.Func

// Inline is one inlined copy of a function.
type Inline = table.Inline

// Struct is a named struct or union type (its first complete definition).
type Struct = table.Struct

// Row flags.
const (
	RowStmt          = table.RowStmt
	RowEndSequence   = table.RowEndSequence
	RowPrologueEnd   = table.RowPrologueEnd
	RowEpilogueBegin = table.RowEpilogueBegin
	RowBasicBlock    = table.RowBasicBlock
)

// Function flags.
const (
	FuncExternal  = table.FuncExternal
	FuncInline    = table.FuncInline
	FuncDiscarded = table.FuncDiscarded
)

// Struct kinds.
const (
	KindStruct  = table.KindStruct
	KindUnion   = table.KindUnion
	KindTypedef = table.KindTypedef
)

// Index holds everything dwarfmap knows about one image.
type Index struct {
	BuildID string
	t       *table.Tables // of a cache file: the sections checked so far

	img  *elfimage.Image // set once opened against the image, for lazy queries
	file *cachefile.File // the cache file whose tables t are, if any
	// rebuilt is the index built again after file was found damaged,
	// which answers once set.
	rebuilt atomic.Pointer[Index]
	release func() error
}

// Stats are the sizes of an index.
type Stats = table.Stats

// Stats reports how many records the index holds.
func (x *Index) Stats() Stats {
	if x.file != nil {
		return x.file.Stats() // the sizes, without reading the sections
	}
	return x.t.Stats()
}

// Close releases the cache mapping behind x (if any). x must not be used
// afterwards.
func (x *Index) Close() error {
	if x.release != nil {
		return x.release()
	}
	return nil
}
