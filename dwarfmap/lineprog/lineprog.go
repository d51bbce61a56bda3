// Package lineprog decodes one compilation unit's line-number program
// (.debug_line, DWARF 2 to 5) into index rows and the unit's file names,
// exactly as debug/dwarf's LineReader decodes it, but from the unit's
// DW_AT_stmt_list alone: an index build then needs neither dwarf.New,
// which parses every unit's header and abbreviations before the first
// line is read, nor a LineEntry per row and a LineFile per file. A
// Header reads a header alone and names its files as LineFile.Name,
// joining each when asked: accessinfer's scan names a few call files
// of a unit whose header lists hundreds.
package lineprog

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/klasy/klasy/dwarfmap/table"
	"github.com/klasy/klasy/internal/bytereader"
)

// Sections are the sections a line program reads.
type Sections struct{ Line, Str, LineStr []byte }

// Unit is what the program needs of its compilation unit.
type Unit struct {
	StmtList int64  // DW_AT_stmt_list, -1 if absent: no line table
	CompDir  string // DW_AT_comp_dir
	AddrSize int    // of the unit's header: DWARF 2-4 line tables do not say it
}

// Opcodes and forms, as DWARF 5 numbers them.
const (
	lnsCopy             = 1
	lnsAdvancePC        = 2
	lnsAdvanceLine      = 3
	lnsSetFile          = 4
	lnsSetColumn        = 5
	lnsNegateStmt       = 6
	lnsSetBasicBlock    = 7
	lnsConstAddPC       = 8
	lnsFixedAdvancePC   = 9
	lnsSetPrologueEnd   = 10
	lnsSetEpilogueBegin = 11
	lnsSetISA           = 12

	lneEndSequence      = 1
	lneSetAddress       = 2
	lneDefineFile       = 3
	lneSetDiscriminator = 4

	lnctPath           = 1
	lnctDirectoryIndex = 2

	formBlock    = 0x09
	formData1    = 0x0b
	formData2    = 0x05
	formData4    = 0x06
	formData8    = 0x07
	formData16   = 0x1e
	formString   = 0x08
	formStrp     = 0x0e
	formLineStrp = 0x1f
	formStrpSup  = 0x1d
	formStrx     = 0x1a
	formStrx1    = 0x25
	formStrx2    = 0x26
	formStrx3    = 0x27
	formStrx4    = 0x28
	formUdata    = 0x0f
)

// knownOpcodeLengths are the operand counts of standard opcodes that
// debug/dwarf checks a header against.
var knownOpcodeLengths = map[int]int{
	lnsCopy: 0, lnsAdvancePC: 1, lnsAdvanceLine: 1, lnsSetFile: 1, lnsNegateStmt: 0, lnsSetBasicBlock: 0,
	lnsConstAddPC: 0, lnsSetPrologueEnd: 0, lnsSetEpilogueBegin: 0, lnsSetISA: 1,
}

// ErrMalformed wraps what is wrong with a line table.
var ErrMalformed = errors.New("malformed line table")

// fileEntry is one entry of the file table; a nil one (entry 0 before
// DWARF 5) names no file.
type fileEntry struct {
	path  []byte // as the table gives it, in the section
	dir   string // its directory, "" if none (absolute, or none given)
	isNil bool
	slot  int32 // index into the files Decode returns, -1 until used
}

// Header is a line table's header: what its program needs, and its file
// table, each name joined to its directory only when asked (File). A
// Header is reused from unit to unit: its lists keep their memory.
type Header struct {
	version  int
	addrSize int
	dwarf64  bool
	dirs     []string
	entries  []fileEntry
	prog     program
	lnct     []lnctForm
	joined   []string // File's names, by entry
	done     []bool
}

type decoder struct {
	r       bytereader.Reader
	h       *Header // names.h
	files   []string
	nilSlot int32
	names   *Names
}

// Names are the file names of line tables, joined to their directories
// and cleaned, by directory and name: a kernel's units name the same
// headers in the same directories thousands of times, so one caller that
// decodes many units joins and cleans each name once (and keeps one copy
// of it), and reads their headers into one Header, whose lists keep
// their memory from unit to unit. A Names is not safe for concurrent use.
type Names struct {
	byDir map[string]map[string]string
	h     Header
}

// NewNames returns an empty Names.
func NewNames() *Names { return &Names{byDir: map[string]map[string]string{}} }

// name is path.Clean(joinFile(dir, p)), as debug/dwarf names the file
// and the index cleans it.
func (n *Names) name(dir string, p []byte) string {
	byName := n.byDir[dir]
	if byName == nil {
		byName = map[string]string{}
		n.byDir[dir] = byName
	}
	if s, ok := byName[string(p)]; ok {
		return s
	}
	s := path.Clean(joinFile(dir, p))
	byName[string(p)] = s
	return s
}

// joinFile is debug/dwarf's name of the file at p in directory dir
// (LineFile.Name): joined unless dir or p is empty.
func joinFile(dir string, p []byte) string {
	if dir == "" || len(p) == 0 {
		return string(p)
	}
	return pathJoin(dir, string(p))
}

// Read reads the header of u's line table (none: no files). The file
// names are debug/dwarf's LineReader's (LineFile.Name, not cleaned), for
// a reader that wants a few names of a unit rather than its rows.
func (h *Header) Read(s Sections, u Unit) error {
	h.entries, h.prog.code = h.entries[:0], nil
	if s.Line == nil || u.StmtList < 0 {
		h.grow()
		return nil
	}
	if u.StmtList > int64(len(s.Line)) {
		h.grow()
		return fmt.Errorf("DW_AT_stmt_list %#x past .debug_line (%d bytes): %w", u.StmtList, len(s.Line), ErrMalformed)
	}
	var r bytereader.Reader
	r.Reset(s.Line[u.StmtList:])
	err := h.read(&r, s, u)
	if err != nil {
		h.entries = h.entries[:0]
		err = fmt.Errorf("line table at %#x: %w", u.StmtList, err)
	}
	h.grow()
	return err
}

// grow sizes File's names to the table, none joined yet.
func (h *Header) grow() {
	n := len(h.entries)
	if cap(h.joined) < n {
		h.joined, h.done = make([]string, n), make([]bool, n)
		return
	}
	h.joined, h.done = h.joined[:n], h.done[:n]
	clear(h.done)
}

// Files is the number of entries of the file table.
func (h *Header) Files() int { return len(h.entries) }

// File is the name of entry i of the file table, "" if none.
func (h *Header) File(i int) string {
	if i < 0 || i >= len(h.entries) {
		return ""
	}
	if !h.done[i] {
		e := &h.entries[i]
		h.joined[i], h.done[i] = joinFile(e.dir, e.path), true
	}
	return h.joined[i]
}

// Decode appends the rows of u's line program to rows, with names (nil:
// a new one) for its file names. Each row's File
// indexes the files returned: the header's file table in order, then
// the files the program defines or names out of the table, in the order
// rows first use them ("" for a file number outside the table); names
// are cleaned (path.Clean).
func Decode(s Sections, u Unit, rows []table.Row, names *Names) (files []string, _ []table.Row, err error) {
	if names == nil {
		names = NewNames()
	}
	d := &decoder{nilSlot: -1, names: names, h: &names.h}
	if err := d.h.Read(s, u); err != nil || d.h.prog.code == nil {
		return nil, rows, err
	}
	for k := range d.h.entries {
		d.fileOf(k)
	}
	rows, err = d.run(d.h.prog, rows)
	if err != nil {
		return nil, rows, fmt.Errorf("line table at %#x: %w", u.StmtList, err)
	}
	return d.files, rows, nil
}

func malformed(what string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(what, args...), ErrMalformed)
}

// program is what the header says of the opcodes that follow it.
type program struct {
	code          []byte
	minInstLen    int
	maxOps        int
	defaultIsStmt bool
	lineBase      int
	lineRange     int
	opcodeBase    int
	opcodeLengths []int
}

// read reads the header at r's start into h (h.prog: the program).
func (h *Header) read(r *bytereader.Reader, s Sections, u Unit) error {
	h.dwarf64, h.entries = false, h.entries[:0]
	p := &h.prog
	length := uint64(r.U32())
	if length == 0xffffffff {
		h.dwarf64 = true
		length = r.U64()
	} else if length >= 0xfffffff0 {
		return malformed("unit length has reserved value %#x", length)
	}
	if length > uint64(r.Len()) {
		return malformed("line table end %d exceeds section size", uint64(r.Offset())+length)
	}
	end := uint64(r.Offset()) + length
	h.version = int(r.U16())
	if r.Err() == nil && (h.version < 2 || h.version > 5) {
		return malformed("unknown line table version %d", h.version)
	}
	h.addrSize = u.AddrSize
	if h.version >= 5 {
		h.addrSize = int(r.U8())
		r.U8() // segment selector size
	}
	var hdrLen uint64
	if h.dwarf64 {
		hdrLen = r.U64()
	} else {
		hdrLen = uint64(r.U32())
	}
	progOff := uint64(r.Offset()) + hdrLen
	if hdrLen > end || progOff > end {
		return malformed("program offset %d exceeds end offset %d", progOff, end)
	}
	p.minInstLen = int(r.U8())
	p.maxOps = 1
	if h.version >= 4 {
		p.maxOps = int(r.U8())
	}
	p.defaultIsStmt = r.U8() != 0
	p.lineBase = int(int8(r.U8()))
	p.lineRange = int(r.U8())
	if err := r.Err(); err != nil {
		return err
	}
	if p.maxOps == 0 {
		return malformed("invalid maximum operations per instruction: 0")
	}
	if p.lineRange == 0 {
		return malformed("invalid line range: 0")
	}
	p.opcodeBase = int(r.U8())
	p.opcodeLengths = resize(p.opcodeLengths, p.opcodeBase)
	for i := 1; i < p.opcodeBase; i++ {
		p.opcodeLengths[i] = int(r.U8())
	}
	if err := r.Err(); err != nil {
		return err
	}
	for i, n := range p.opcodeLengths {
		if known, ok := knownOpcodeLengths[i]; ok && known != n {
			return malformed("opcode %d expected to have length %d, but has length %d", i, known, n)
		}
	}
	if h.version < 5 {
		h.dirs = append(h.dirs[:0], u.CompDir)
		for {
			dir := string(r.CString())
			if err := r.Err(); err != nil {
				return err
			}
			if dir == "" {
				break
			}
			if !pathIsAbs(dir) {
				dir = pathJoin(u.CompDir, dir)
			}
			h.dirs = append(h.dirs, dir)
		}
		h.entries = append(h.entries[:0], fileEntry{isNil: true, slot: -1})
		for {
			done, err := h.fileEntry(r)
			if err != nil {
				return err
			}
			if done {
				break
			}
		}
	} else {
		dirFormat := h.lnctFormat(r)
		n := r.ULEB128()
		if n > uint64(r.Len()) {
			return malformed("%d directories in %d bytes", n, r.Len())
		}
		h.dirs = resize(h.dirs, int(n))
		for i := range h.dirs {
			dp, dir, err := h.lnctEntry(r, s, dirFormat)
			if err != nil {
				return err
			}
			h.dirs[i] = joinFile(dir, dp)
		}
		fileFormat := h.lnctFormat(r)
		n = r.ULEB128()
		if n > uint64(r.Len()) {
			return malformed("%d files in %d bytes", n, r.Len())
		}
		h.entries = resize(h.entries, int(n))
		for i := range h.entries {
			name, dir, err := h.lnctEntry(r, s, fileFormat)
			if err != nil {
				return err
			}
			h.entries[i] = fileEntry{path: name, dir: dir, slot: -1}
		}
	}
	if err := r.Err(); err != nil {
		return err
	}
	p.code = s.Line[uint64(u.StmtList)+progOff : uint64(u.StmtList)+end]
	return nil
}

// resize is s with n zero elements, in s's memory if it has room.
func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	s = s[:n]
	clear(s)
	return s
}

type lnctForm struct{ lnct, form uint64 }

// lnctFormat reads an entry format, into h.lnct: the directories' is
// done with when the files' is read.
func (h *Header) lnctFormat(r *bytereader.Reader) []lnctForm {
	h.lnct = resize(h.lnct, int(r.U8()))
	for i := range h.lnct {
		h.lnct[i].lnct = r.ULEB128()
		h.lnct[i].form = r.ULEB128()
	}
	return h.lnct
}

// lnct reads one directory or file entry of a DWARF 5 header: its path
// and its directory's ("" if none).
func (h *Header) lnctEntry(r *bytereader.Reader, s Sections, format []lnctForm) (p []byte, dir string, err error) {
	for _, lf := range format {
		var str []byte
		var val uint64
		switch lf.form {
		case formString:
			str = r.CString()
		case formStrp, formLineStrp:
			var off uint64
			if h.dwarf64 {
				off = r.U64()
			} else {
				off = uint64(r.U32())
			}
			sec, name := s.Str, ".debug_str"
			if lf.form == formLineStrp {
				sec, name = s.LineStr, ".debug_line_str"
			}
			sr := bytereader.Reader{}
			if off > uint64(len(sec)) {
				return nil, "", malformed("string at %#x past %s", off, name)
			}
			sr.Reset(sec[off:])
			str = sr.CString()
			if err := sr.Err(); err != nil {
				return nil, "", fmt.Errorf("%s: %w", name, err)
			}
		case formStrpSup:
			if h.dwarf64 {
				r.U64()
			} else {
				r.U32()
			}
		case formStrx, formUdata:
			val = r.ULEB128()
			if lf.form == formStrx {
				val = 0
			}
		case formStrx1:
			r.U8()
		case formStrx2:
			r.U16()
		case formStrx3:
			r.Uint(3)
		case formStrx4:
			r.U32()
		case formData1:
			val = uint64(r.U8())
		case formData2:
			val = uint64(r.U16())
		case formData4:
			val = uint64(r.U32())
		case formData8:
			val = r.U64()
		case formData16:
			r.Skip(16)
		case formBlock:
			r.Skip(r.ULEB128())
		}
		switch lf.lnct {
		case lnctPath:
			p = str
		case lnctDirectoryIndex:
			if val >= uint64(len(h.dirs)) {
				return nil, "", malformed("directory index %d out of range", val)
			}
			dir = h.dirs[val]
		}
	}
	return p, dir, r.Err()
}

// fileEntry reads a DWARF 2-4 file entry (of the header, or of
// DW_LNE_define_file); done at the table's empty name.
func (h *Header) fileEntry(r *bytereader.Reader) (done bool, err error) {
	name := r.CString()
	if err := r.Err(); err != nil {
		return false, err
	}
	if len(name) == 0 {
		return true, nil
	}
	dirIndex := r.ULEB128()
	dir := ""
	if !pathIsAbs(string(name)) {
		if dirIndex >= uint64(len(h.dirs)) {
			return false, malformed("directory index %d too large", dirIndex)
		}
		dir = h.dirs[dirIndex]
	}
	r.ULEB128() // mtime
	r.ULEB128() // length
	h.entries = append(h.entries, fileEntry{path: name, dir: dir, slot: -1})
	return false, r.Err()
}

// fileOf returns the index in d.files of file table entry k (-1 or past
// the table: no file).
func (d *decoder) fileOf(k int) uint32 {
	if k < 0 || k >= len(d.h.entries) || d.h.entries[k].isNil {
		if d.nilSlot < 0 {
			d.nilSlot = int32(len(d.files))
			d.files = append(d.files, "")
		}
		return uint32(d.nilSlot)
	}
	e := &d.h.entries[k]
	if e.slot < 0 {
		e.slot = int32(len(d.files))
		d.files = append(d.files, d.names.name(e.dir, e.path))
	}
	return uint32(e.slot)
}

// run executes the program, appending a row per row it emits.
func (d *decoder) run(p program, rows []table.Row) ([]table.Row, error) {
	r := &d.r
	r.Reset(p.code)
	// Sized once: kernels' programs take 3 to 4 bytes a row.
	rows = slices.Grow(rows, len(p.code)/3+16)
	var (
		addr                                 uint64
		opIndex, line, column, discriminator int
		fileIndex, file                      int
		slot                                 int64 // fileOf(file), -1 until a row asks
		isStmt, basicBlock, prologueEnd      bool
		epilogueBegin                        bool
	)
	// file is the entry fileIndex named when last set (-1: none), as
	// debug/dwarf's state.File is.
	updateFile := func() {
		file, slot = -1, -1
		if fileIndex >= 0 && fileIndex < len(d.h.entries) {
			file = fileIndex
		}
	}
	reset := func() {
		addr, opIndex, line, column, discriminator = 0, 0, 1, 0, 0
		isStmt, basicBlock, prologueEnd, epilogueBegin = p.defaultIsStmt, false, false, false
		fileIndex = 1
		updateFile()
	}
	emit := func(endSeq bool) {
		var fl uint16
		if isStmt {
			fl |= table.RowStmt
		}
		if endSeq {
			fl |= table.RowEndSequence
		}
		if prologueEnd {
			fl |= table.RowPrologueEnd
		}
		if epilogueBegin {
			fl |= table.RowEpilogueBegin
		}
		if basicBlock {
			fl |= table.RowBasicBlock
		}
		if slot < 0 {
			slot = int64(d.fileOf(file))
		}
		rows = append(rows, table.Row{Addr: addr, File: uint32(slot), Line: uint32(line),
			Discriminator: uint32(discriminator), Column: uint16(min(column, 0xffff)), Flags: fl})
		basicBlock, prologueEnd, epilogueBegin, discriminator = false, false, false, 0
	}
	advancePC := func(ops int) {
		i := opIndex + ops
		addr += uint64(p.minInstLen * (i / p.maxOps))
		opIndex = i % p.maxOps
	}
	reset()
	for r.Len() > 0 {
		op := int(r.U8())
		if op >= p.opcodeBase {
			adj := op - p.opcodeBase
			advancePC(adj / p.lineRange)
			line += p.lineBase + adj%p.lineRange
			emit(false)
			continue
		}
		switch op {
		case 0:
			n := r.ULEB128()
			start := r.Offset()
			switch r.U8() {
			case lneEndSequence:
				emit(true)
				reset()
			case lneSetAddress:
				switch d.h.addrSize {
				case 1, 2, 4, 8:
					addr = r.Uint(d.h.addrSize)
				default:
					return rows, malformed("unknown address size %d", d.h.addrSize)
				}
			case lneDefineFile:
				done, err := d.h.fileEntry(r)
				if err != nil {
					return rows, err
				}
				if done {
					return rows, malformed("malformed DW_LNE_define_file operation")
				}
				updateFile()
			case lneSetDiscriminator:
				discriminator = int(r.ULEB128())
			}
			used := uint64(r.Offset() - start)
			if n < used {
				return rows, malformed("extended opcode at %#x longer than its length %d", start, n)
			}
			r.Skip(n - used)
		case lnsCopy:
			emit(false)
		case lnsAdvancePC:
			advancePC(int(r.ULEB128()))
		case lnsAdvanceLine:
			line += int(r.SLEB128())
		case lnsSetFile:
			fileIndex = int(r.ULEB128())
			updateFile()
		case lnsSetColumn:
			column = int(r.ULEB128())
		case lnsNegateStmt:
			isStmt = !isStmt
		case lnsSetBasicBlock:
			basicBlock = true
		case lnsConstAddPC:
			advancePC((255 - p.opcodeBase) / p.lineRange)
		case lnsFixedAdvancePC:
			addr += uint64(r.U16())
		case lnsSetPrologueEnd:
			prologueEnd = true
		case lnsSetEpilogueBegin:
			epilogueBegin = true
		case lnsSetISA:
			r.ULEB128()
		default:
			for i := 0; i < p.opcodeLengths[op]; i++ {
				r.ULEB128()
			}
		}
		if err := r.Err(); err != nil {
			return rows, err
		}
	}
	return rows, r.Err()
}

// pathIsAbs and pathJoin are debug/dwarf's (line.go), so that file names
// come out as its LineReader gives them.
func pathIsAbs(path string) bool {
	_, path = splitDrive(path)
	return len(path) > 0 && (path[0] == '/' || path[0] == '\\')
}

func pathJoin(dirname, filename string) string {
	if len(dirname) == 0 {
		return filename
	}
	drive, dirname := splitDrive(dirname)
	if drive == "" {
		return path.Join(dirname, filename)
	}
	drive2, filename := splitDrive(filename)
	if drive2 != "" {
		if !strings.EqualFold(drive, drive2) {
			return drive2 + filename
		}
	}
	if !(strings.HasSuffix(dirname, "/") || strings.HasSuffix(dirname, `\`)) && dirname != "" {
		sep := `\`
		if strings.HasPrefix(dirname, "/") {
			sep = `/`
		}
		dirname += sep
	}
	return drive + dirname + filename
}

func splitDrive(path string) (drive, rest string) {
	if len(path) >= 2 && path[1] == ':' {
		if c := path[0]; 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' {
			return path[:2], path[2:]
		}
	}
	if len(path) > 3 && (path[0] == '\\' || path[0] == '/') && (path[1] == '\\' || path[1] == '/') {
		npath := strings.ReplaceAll(path, "/", `\`)
		slash1 := strings.IndexByte(npath[2:], '\\') + 2
		if slash1 > 2 {
			slash2 := strings.IndexByte(npath[slash1+1:], '\\') + slash1 + 1
			if slash2 > slash1 {
				return path[:slash2], path[slash2:]
			}
		}
	}
	return "", path
}
