// Package debugklasy reads the .debug_klasy section that the klasy GCC
// plugin (gcc-patches/klasy.so) writes: every struct/union member access of
// the functions a compilation unit emits, with the line the weaver hooks and
// how the accessed struct's address is computed.
//
// The format is described in gcc-patches/FORMAT.md. A linked object (.ko,
// vmlinux) holds one unit per compilation unit; header inline functions are
// recorded in every unit that uses them, and Table removes those copies.
package debugklasy

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"path"
	"slices"

	"github.com/klasy/klasy/internal/bytereader"
	"github.com/klasy/klasy/internal/srcpath"
	"github.com/klasy/klasy/x86code"
)

// SectionName is the ELF section the plugin writes.
const SectionName = ".debug_klasy"

// Version is the format version this package reads.
const Version = 1

const (
	magic         = "KLSY"
	minHeaderSize = 32
)

// ErrNoSection is returned (wrapped) for a binary built without the plugin.
var ErrNoSection = errors.New("no " + SectionName + " section")

// VersionError is returned for a unit of a format version this package
// does not read.
type VersionError struct {
	Got  int // version in the section
	Want int // version this reader understands
}

func (e *VersionError) Error() string {
	rel := "newer"
	if e.Got < e.Want {
		rel = "older"
	}
	return fmt.Sprintf("%s format version %d is %s than the version %d this klasy reads: rebuild the binary with this klasy's plugin (make -C gcc-patches), or use the klasy that matches it",
		SectionName, e.Got, rel, e.Want)
}

// Mode says how a member is accessed.
type Mode uint8

const (
	Read      Mode = 0
	Write     Mode = 1
	ReadWrite Mode = 2 // x += y, x++
	Addr      Mode = 3 // &p->x
)

var modeNames = [...]string{"read", "write", "rw", "addr"}

func (m Mode) String() string {
	if int(m) < len(modeNames) {
		return modeNames[m]
	}
	return fmt.Sprintf("mode(%d)", m)
}

// BaseKind says where the chain computing the accessed struct's address
// starts.
type BaseKind uint8

const (
	Param BaseKind = iota
	Local
	Static
	Global
	Call        // the chain starts at a call: skb_shinfo(skb), current
	Unsupported // Reason says why
)

var baseNames = [...]string{"param", "local", "static", "global", "call", "unsupported"}

func (k BaseKind) String() string {
	if int(k) < len(baseNames) {
		return baseNames[k]
	}
	return fmt.Sprintf("base(%d)", k)
}

// Base is how the address of the accessed struct is computed.
type Base struct {
	Kind BaseKind
	// Var is the root variable, or the callee for Kind == Call.
	Var string
	// Expr is the C expression of the struct's address: "skb" for
	// skb->len, "&s" for s.len, "p->thread" for p->thread->fs,
	// "skb_end_pointer(skb)", "(char *)ptr - 24" after container_of.
	Expr string
	// Offset is container_of's (negative) adjustment in bytes.
	Offset      int64
	ContainerOf bool
	Reason      string // why Kind == Unsupported
}

// Function is a function that the compilation unit emits.
type Function struct {
	Name   string
	File   string
	Line   int
	Static bool
}

// Access is one member access.
type Access struct {
	Struct    string // tag; typedef name of an anonymous type; "" if none
	Member    string
	Union     bool
	AnonType  bool   // the container has no tag
	DeclFile  string // where an anonymous container is declared
	DeclLine  int
	ViaAnon   bool // reached through anonymous members (collapsed)
	Bitfield  bool
	NoOffset  bool // the layout is not constant: offsets are unknown
	BitOffset uint64
	BitSize   uint64
	Mode      Mode

	// File:Line:Col is where the weaver hooks: the outermost macro
	// expansion point (the line .debug_line has), the header line for a
	// header inline function.
	File string
	Line int
	Col  int
	// StmtLine is the enclosing statement's line in File when it differs
	// (a multi-line condition), else 0.
	StmtLine int
	// Spelling location, when it differs from the hook (macro bodies).
	SpellFile string
	SpellLine int
	SpellCol  int

	Function Function
	Base     Base
}

// StructName is the name to print: the tag, the typedef of an anonymous
// type, or "(anonymous at FILE:LINE)".
func (a *Access) StructName() string {
	if a.Struct != "" {
		return a.Struct
	}
	return fmt.Sprintf("(anonymous at %s:%d)", a.DeclFile, a.DeclLine)
}

// Unit is the part of the section one compilation unit wrote.
type Unit struct {
	Name      string // the compilation unit's main file
	Producer  string
	Functions []Function
	Accesses  []Access
}

const (
	flagUnion       = 1 << 0
	flagViaAnon     = 1 << 1
	flagBitfield    = 1 << 2
	flagAnonType    = 1 << 3
	flagNoOffset    = 1 << 4
	flagContainerOf = 1 << 5
)

// Parse decodes the contents of a .debug_klasy section: the units of every
// compilation unit linked into the binary.
func Parse(data []byte) ([]Unit, error) {
	var units []Unit
	err := parseEach(data, false, nil, func(u Unit) { units = append(units, u) })
	return units, err
}

// parseEach calls fn for each unit in turn, so a vmlinux's units need not
// all be in memory at once. With reuse, each unit's Accesses reuse the
// previous unit's array: fn must copy what it keeps.
//
// keep, if not nil, selects the records to decode by struct and member;
// the others are skipped.
func parseEach(data []byte, reuse bool, keep func(st, mem string) bool, fn func(Unit)) error {
	// A vmlinux repeats the same header paths and names in every unit:
	// share one copy of each string.
	intern := &interner{strs: make(map[string]string), paths: make(map[string]string)}
	var buf []Access
	off, n := 0, 0
	for off < len(data) {
		if data[off] == 0 { // padding between concatenated units
			off++
			continue
		}
		u, size, err := parseUnit(data[off:], intern, buf, keep)
		if err != nil {
			return fmt.Errorf("parsing unit %d at offset %#x: %w", n, off, err)
		}
		fn(u)
		if reuse {
			buf = u.Accesses[:0]
		}
		n++
		off += size
	}
	return nil
}

// countRecords adds up the record counts of the unit headers, to size the
// table once. It stops at anything odd: parseEach reports it.
func countRecords(data []byte) int {
	n := 0
	for off := 0; off+minHeaderSize <= len(data); {
		if data[off] == 0 {
			off++
			continue
		}
		b := data[off:]
		size := int(binary.LittleEndian.Uint32(b[8:]))
		if string(b[:4]) != magic || size < minHeaderSize {
			break
		}
		n += int(binary.LittleEndian.Uint32(b[16:]))
		off += size
	}
	return min(n, len(data)) // each record takes a byte or more
}

// interner shares strings between units. Paths are cleaned the way
// .debug_line readers (dwarfmap) clean theirs: kbuild compiles through
// "arch/x86/events/intel/../perf_event.h", and a hook file must match the
// line table's name, and header copies reached through different paths
// must merge.
type interner struct {
	strs  map[string]string
	paths map[string]string // as written -> cleaned and interned
}

func (in *interner) str(b []byte) string {
	if v, ok := in.strs[string(b)]; ok {
		return v
	}
	v := string(b)
	in.strs[v] = v
	return v
}

func (in *interner) path(s string) string {
	if s == "" {
		return s
	}
	if v, ok := in.paths[s]; ok {
		return v
	}
	// As the DWARF's names print (dwarfmap): relative to the source tree.
	v := in.str([]byte(srcpath.Rel(path.Clean(s))))
	in.paths[s] = v
	return v
}

// parseUnit decodes the unit at the start of b, appending its accesses to
// acc[:0].
func parseUnit(b []byte, intern *interner, acc []Access, keep func(st, mem string) bool) (Unit, int, error) {
	var u Unit
	if len(b) < 8 || string(b[:4]) != magic {
		return u, 0, errors.New("bad magic: not a klasy unit")
	}
	le := binary.LittleEndian
	if v := int(le.Uint16(b[4:])); v != Version {
		return u, 0, &VersionError{Got: v, Want: Version}
	}
	hdr := int(le.Uint16(b[6:]))
	if hdr < minHeaderSize || len(b) < hdr {
		return u, 0, fmt.Errorf("header size %d out of range", hdr)
	}
	size := int(le.Uint32(b[8:]))
	nfuncs := int(le.Uint32(b[12:]))
	nrecs := int(le.Uint32(b[16:]))
	strsize := int(le.Uint32(b[20:]))
	if size < hdr+strsize || size > len(b) || strsize < 0 {
		return u, 0, fmt.Errorf("unit size %d does not fit (header %d, strings %d, %d bytes left)", size, hdr, strsize, len(b))
	}
	strtab := b[size-strsize : size]
	str := func(o uint64) (string, error) {
		if o >= uint64(len(strtab)) {
			if o == 0 {
				return "", nil
			}
			return "", fmt.Errorf("string offset %d past the string table (%d bytes)", o, len(strtab))
		}
		s := strtab[o:]
		if i := bytes.IndexByte(s, 0); i >= 0 {
			s = s[:i]
		}
		return intern.str(s), nil
	}
	var err error
	if u.Name, err = str(uint64(le.Uint32(b[24:]))); err != nil {
		return u, 0, err
	}
	u.Name = intern.path(u.Name)
	if u.Producer, err = str(uint64(le.Uint32(b[28:]))); err != nil {
		return u, 0, err
	}
	r := reader{Reader: bytereader.New(b[hdr : size-strsize]), lookup: str, cleanPath: intern.path, strtab: strtab}
	// Each function and record takes at least one byte per field.
	if nfuncs > r.Len() || nrecs > r.Len() {
		return u, 0, fmt.Errorf("%d functions and %d records cannot fit in %d bytes", nfuncs, nrecs, r.Len())
	}
	u.Functions = make([]Function, 0, nfuncs)
	for i := 0; i < nfuncs; i++ {
		f := Function{Name: r.str(), File: r.path(), Line: r.int()}
		f.Static = r.ULEB128()&1 != 0
		if r.Err() != nil {
			return u, 0, fmt.Errorf("function %d: %w", i, r.Err())
		}
		u.Functions = append(u.Functions, f)
	}
	if keep == nil {
		u.Accesses = slices.Grow(acc[:0], nrecs)
	} else {
		u.Accesses = acc[:0]
	}
	for i := 0; i < nrecs; i++ {
		if keep != nil {
			kept, err := r.select_(keep)
			if err != nil {
				return u, 0, fmt.Errorf("record %d: %w", i, err)
			}
			if !kept {
				continue
			}
		}
		a, err := r.access(u.Functions)
		if err != nil {
			return u, 0, fmt.Errorf("record %d: %w", i, err)
		}
		u.Accesses = append(u.Accesses, a)
	}
	if r.Len() != 0 {
		return u, 0, fmt.Errorf("%d bytes left after %d records", r.Len(), nrecs)
	}
	return u, size, nil
}

// reader reads a unit's functions and records: LEB128 numbers, and
// strings as offsets into the unit's string table.
type reader struct {
	*bytereader.Reader
	lookup    func(uint64) (string, error)
	cleanPath func(string) string
	strtab    []byte
	kept      map[[2]uint64]bool // select_'s answers by string offsets
}

// raw returns the string at offset o of the string table, not interned.
func (r *reader) raw(o uint64) (string, error) {
	if o >= uint64(len(r.strtab)) {
		if o == 0 {
			return "", nil
		}
		return "", fmt.Errorf("string offset %d past the string table (%d bytes)", o, len(r.strtab))
	}
	s := r.strtab[o:]
	if i := bytes.IndexByte(s, 0); i >= 0 {
		s = s[:i]
	}
	return string(s), nil
}

func (r *reader) int() int {
	v := r.ULEB128()
	if v > 1<<31 {
		r.Fail(fmt.Errorf("number %d out of range", v))
		return 0
	}
	return int(v)
}

func (r *reader) str() string {
	o := r.ULEB128()
	if r.Err() != nil {
		return ""
	}
	s, err := r.lookup(o)
	if err != nil {
		r.Fail(err)
	}
	return s
}

// path reads a string that names a file.
func (r *reader) path() string {
	return r.cleanPath(r.str())
}

// select_ reads a record's struct and member and, if keep rejects them,
// skips the rest of it; otherwise it leaves the reader at the record's
// start for access.
func (r *reader) select_(keep func(st, mem string) bool) (bool, error) {
	start := r.Offset()
	r.ULEB128() // function
	so, mo := r.ULEB128(), r.ULEB128()
	if err := r.Err(); err != nil {
		return false, err
	}
	// A unit names the same few structs and members in many records:
	// decide by their string offsets, reading the strings once.
	k := [2]uint64{so, mo}
	kept, seen := r.kept[k]
	if !seen {
		st, err1 := r.raw(so)
		mem, err2 := r.raw(mo)
		if err := errors.Join(err1, err2); err != nil {
			return false, err
		}
		kept = keep(st, mem)
		if r.kept == nil {
			r.kept = map[[2]uint64]bool{}
		}
		r.kept[k] = kept
	}
	if kept {
		r.Seek(start)
		return true, nil
	}
	flags := r.ULEB128()
	// mode, bit offset, bit size, file, line, col, stmt line, spelling
	// file, line, col, base kind, var, expr.
	for i := 0; i < 13; i++ {
		r.ULEB128()
	}
	r.SLEB128() // base offset
	r.ULEB128() // reason
	if flags&flagAnonType != 0 {
		r.ULEB128()
		r.ULEB128()
	}
	return false, r.Err()
}

func (r *reader) access(funcs []Function) (Access, error) {
	var a Access
	fi := r.ULEB128()
	a.Struct = r.str()
	a.Member = r.str()
	flags := r.ULEB128()
	mode := r.ULEB128()
	a.BitOffset = r.ULEB128()
	a.BitSize = r.ULEB128()
	a.File = r.path()
	a.Line = r.int()
	a.Col = r.int()
	a.StmtLine = r.int()
	a.SpellFile = r.path()
	a.SpellLine = r.int()
	a.SpellCol = r.int()
	kind := r.ULEB128()
	a.Base.Var = r.str()
	a.Base.Expr = r.str()
	a.Base.Offset = r.SLEB128()
	a.Base.Reason = r.str()
	if flags&flagAnonType != 0 {
		a.DeclFile = r.path()
		a.DeclLine = r.int()
	}
	if r.Err() != nil {
		return a, r.Err()
	}
	if fi >= uint64(len(funcs)) {
		return a, fmt.Errorf("function index %d out of range (%d functions)", fi, len(funcs))
	}
	if mode > uint64(Addr) {
		return a, fmt.Errorf("unknown mode %d", mode)
	}
	if kind > uint64(Unsupported) {
		return a, fmt.Errorf("unknown base kind %d", kind)
	}
	a.Function = funcs[fi]
	a.Mode = Mode(mode)
	a.Base.Kind = BaseKind(kind)
	a.Union = flags&flagUnion != 0
	a.ViaAnon = flags&flagViaAnon != 0
	a.Bitfield = flags&flagBitfield != 0
	a.AnonType = flags&flagAnonType != 0
	a.NoOffset = flags&flagNoOffset != 0
	a.Base.ContainerOf = flags&flagContainerOf != 0
	return a, nil
}

// Span is the member's bytes [off, off+size) in its struct; a
// bitfield's are those of the bits it covers; ok is false when the
// layout is not constant.
func (a *Access) Span() (off, size int64, ok bool) {
	if a.NoOffset {
		return 0, 0, false
	}
	off = int64(a.BitOffset / 8)
	switch {
	case a.Bitfield:
		size = int64((a.BitOffset%8 + a.BitSize + 7) / 8)
	case a.BitSize == 0:
		size = 1 << 20 // a flexible array
	default:
		size = int64((a.BitSize + 7) / 8)
	}
	return off, max(size, 1), true
}

// Fits says whether an instruction's use of memory fits the mode: a
// load or read-modify-write for a read, a store or read-modify-write for
// a write, any of the three for a read-write, a lea for an address.
func (m Mode) Fits(k x86code.MemKind) bool {
	switch m {
	case Read:
		return k == x86code.Load || k == x86code.RMW
	case Write:
		return k == x86code.Store || k == x86code.RMW
	case ReadWrite:
		return k == x86code.RMW || k == x86code.Load || k == x86code.Store
	case Addr:
		return k == x86code.Addr
	}
	return false
}

// ModeOf is the mode of an instruction's use of memory: a load reads, a
// store writes, a read-modify-write does both, a lea takes the address
// (how an access found in the code, not recorded by the plugin, is named).
func ModeOf(k x86code.MemKind) Mode {
	switch k {
	case x86code.Store:
		return Write
	case x86code.RMW:
		return ReadWrite
	case x86code.Addr:
		return Addr
	}
	return Read
}
