// Package cachefile is the file in which dwarfmap keeps an image's index
// tables (package table) between runs: its format, which holds the arrays
// byte for byte; its name and directory; writing it so that readers see a
// whole file or none; and reading it back mapped, each section checked
// when first used.
package cachefile

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/klasy/klasy/dwarfmap/elfimage"
	"github.com/klasy/klasy/dwarfmap/table"
	"github.com/klasy/klasy/internal/boundedread"
	"github.com/klasy/klasy/internal/cachedir"
	"github.com/klasy/klasy/internal/mmapfile"
)

// Cache file layout (little-endian, as the host; big-endian hosts always
// rebuild):
//
//	header   magic "KLASYDM\x00", version, section count, build-id (64
//	         bytes, hex, NUL padded), image size, CRC-32 of the header
//	         and the table
//	table    per section: offset, length in bytes, CRC-32 of its bytes
//	         (0 for the chunked ones)
//	sections the table.Tables arrays verbatim, each 8-byte aligned
//
// Loading maps the file, checks the header and the table, and points the
// Tables slices into the mapping. A query touches only the sections it
// reads: each is checked (CRC and cross-references) when first used
// (File.Need), so `klasy funcs` never reads the 140 MB of line table. The
// line table and its two sort orders are checked by chunks of chunkSize
// bytes, each when first read (File.ChunksOK; ChunkCRCs holds their
// CRCs), so the lines of one function read a few chunks. A damaged
// section or chunk is never used: the index is rebuilt from the image and
// answers from then on (File.Rebuild).
const (
	cacheMagic   = "KLASYDM\x00"
	cacheVersion = 8
	chunkSize    = 256 << 10
	tableSize    = NumSections * EntrySize
)

// Where a file's section table lies (tests and tools that damage files):
// it follows the header, an entry per section.
const (
	HeaderSize = 8 + 4 + 4 + 64 + 8 + 4 + 4
	EntrySize  = 8 + 8 + 4 + 4 // offset, length, CRC, padding
)

// Section numbers, in file order (sections): one per array of
// table.Tables. A query says which it reads (File.Need) as a mask of
// 1<<section bits.
const (
	SecStrs = iota
	SecFiles
	SecUnits
	SecRows
	SecByAddr
	SecByFile
	SecFuncs
	SecByName
	SecInlines
	SecInlName
	SecRanges
	SecSpans
	SecStructs
	SecInlRanges
	SecInlSum
	SecChunkCRCs
	NumSections
)

// chunked are the sections checked by chunks, in chunkCRCs order: they
// have no cross-references to check (row file ids and row numbers are
// bounds-checked where used).
var chunked = [...]int{SecRows, SecByAddr, SecByFile}

func isChunked(i int) bool { return i == SecRows || i == SecByAddr || i == SecByFile }

// Every query reads names and files, so the small core sections are
// checked with any of them.
const coreSecs = 1<<SecStrs | 1<<SecFiles | 1<<SecUnits | 1<<SecChunkCRCs

// IEEE, not Castagnoli: Go computes it with carry-less multiplication at
// about 26 GB/s here against 10 GB/s.
var crcTable = crc32.IEEETable

// ErrInvalid is wrapped by the errors of a file that cannot be used.
var ErrInvalid = errors.New("invalid dwarfmap cache")

func asBytes[T any](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	var z T
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(z)))
}

func fromBytes[T any](b []byte) ([]T, error) {
	var z T
	sz := int(unsafe.Sizeof(z))
	if len(b)%sz != 0 {
		return nil, fmt.Errorf("%w: section of %d bytes is not a multiple of %d", ErrInvalid, len(b), sz)
	}
	if len(b) == 0 {
		return nil, nil
	}
	if uintptr(unsafe.Pointer(&b[0]))%8 != 0 {
		return nil, fmt.Errorf("%w: misaligned section", ErrInvalid)
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), len(b)/sz), nil
}

func sections(x *table.Tables) [NumSections][]byte {
	return [NumSections][]byte{
		x.Strs, asBytes(x.Files), asBytes(x.Units), asBytes(x.Rows), asBytes(x.ByAddr),
		asBytes(x.ByFile), asBytes(x.Funcs), asBytes(x.ByName), asBytes(x.Inlines),
		asBytes(x.InlName), asBytes(x.Ranges), asBytes(x.Spans), asBytes(x.Structs),
		asBytes(x.InlRanges), asBytes(x.InlSum), asBytes(x.ChunkCRCs),
	}
}

// takeSection sets x's section i to src's.
func takeSection(x, src *table.Tables, i int) {
	switch i {
	case SecStrs:
		x.Strs = src.Strs
	case SecFiles:
		x.Files = src.Files
	case SecUnits:
		x.Units = src.Units
	case SecRows:
		x.Rows = src.Rows
	case SecByAddr:
		x.ByAddr = src.ByAddr
	case SecByFile:
		x.ByFile = src.ByFile
	case SecFuncs:
		x.Funcs = src.Funcs
	case SecByName:
		x.ByName = src.ByName
	case SecInlines:
		x.Inlines = src.Inlines
	case SecInlName:
		x.InlName = src.InlName
	case SecRanges:
		x.Ranges = src.Ranges
	case SecSpans:
		x.Spans = src.Spans
	case SecStructs:
		x.Structs = src.Structs
	case SecInlRanges:
		x.InlRanges = src.InlRanges
	case SecInlSum:
		x.InlSum = src.InlSum
	case SecChunkCRCs:
		x.ChunkCRCs = src.ChunkCRCs
	}
}

// headerCRC covers the header fields before the CRC and the table (which
// holds the sections' CRCs).
func headerCRC(hdr []byte) uint32 {
	return crc32.Update(crc32.Checksum(hdr[:88], crcTable), crcTable, hdr[HeaderSize:HeaderSize+tableSize])
}

// Encode writes the tables x of the image with build-id buildID and size
// imageSize in cache format, with the CRCs of their chunks (x.ChunkCRCs
// is not read).
func Encode(w io.Writer, x *table.Tables, buildID string, imageSize int64) (int64, error) {
	var crcs []uint32
	for _, i := range chunked {
		b := sections(x)[i]
		for off := 0; off < len(b); off += chunkSize {
			crcs = append(crcs, crc32.Checksum(b[off:min(off+chunkSize, len(b))], crcTable))
		}
	}
	secs := sections(x)
	secs[SecChunkCRCs] = asBytes(crcs)
	hdr := make([]byte, HeaderSize+tableSize)
	copy(hdr, cacheMagic)
	binary.LittleEndian.PutUint32(hdr[8:], cacheVersion)
	binary.LittleEndian.PutUint32(hdr[12:], NumSections)
	copy(hdr[16:80], buildID)
	binary.LittleEndian.PutUint64(hdr[80:], uint64(imageSize))
	off := uint64(len(hdr))
	for i, s := range secs {
		off = (off + 7) &^ 7
		e := hdr[HeaderSize+EntrySize*i:]
		binary.LittleEndian.PutUint64(e, off)
		binary.LittleEndian.PutUint64(e[8:], uint64(len(s)))
		if !isChunked(i) {
			binary.LittleEndian.PutUint32(e[16:], crc32.Checksum(s, crcTable))
		}
		off += uint64(len(s))
	}
	binary.LittleEndian.PutUint32(hdr[88:], headerCRC(hdr))
	n, err := w.Write(hdr)
	total := int64(n)
	if err != nil {
		return total, err
	}
	var pad [8]byte
	pos := uint64(len(hdr))
	for _, s := range secs {
		if k := ((pos + 7) &^ 7) - pos; k > 0 {
			n, err = w.Write(pad[:k])
			total += int64(n)
			if err != nil {
				return total, err
			}
			pos += k
		}
		n, err = w.Write(s)
		total += int64(n)
		if err != nil {
			return total, err
		}
		pos += uint64(len(s))
	}
	return total, nil
}

// Header is what Decode checks before trusting a file.
type Header struct {
	BuildID   string
	ImageSize int64
}

// File is a cache file's tables, mapped, with the sections not yet
// checked.
type File struct {
	// Rebuild, if set, makes another index answer in place of the file's
	// after a section or a chunk failed its check: it builds the index
	// again from the image (with f's lock held, so that queries wait for
	// it). Unset (no image, e.g. fuzzing), or if it fails, f answers
	// nothing and Need returns the error (also kept for Err).
	Rebuild func(cause error) error

	mu      sync.Mutex
	checked table.Tables  // the sections checked so far (Tables)
	done    atomic.Uint32 // sections checked and set in checked
	all     *table.Tables // every section, typed but unchecked
	crcs    [NumSections]uint32
	err     error // sticky: a damaged section that could not be rebuilt
	// replaced is set once Rebuild has made another index answer.
	replaced atomic.Bool
	// chunkOK[k][c] is set once chunk c of section chunked[k] is checked.
	chunkOK [len(chunked)][]atomic.Bool
	release func() error
}

// Reseal makes every checksum in the cache file b (at least its header
// and table) match its bytes, as far as the table's bounds allow: b is
// then what a buggy or hostile writer could write, which only the
// structural checks can refuse (fuzzing).
func Reseal(b []byte) {
	sec := func(i int) []byte {
		e := b[HeaderSize+EntrySize*i:]
		off, n := binary.LittleEndian.Uint64(e), binary.LittleEndian.Uint64(e[8:])
		if off > uint64(len(b)) || n > uint64(len(b))-off {
			return nil
		}
		return b[off : off+n]
	}
	crcs := sec(SecChunkCRCs)
	for _, i := range chunked {
		s := sec(i)
		for off := 0; off < len(s) && len(crcs) >= 4; off += chunkSize {
			binary.LittleEndian.PutUint32(crcs, crc32.Checksum(s[off:min(off+chunkSize, len(s))], crcTable))
			crcs = crcs[4:]
		}
	}
	for i := 0; i < NumSections; i++ {
		if s := sec(i); s != nil && !isChunked(i) {
			binary.LittleEndian.PutUint32(b[HeaderSize+EntrySize*i+16:], crc32.Checksum(s, crcTable))
		}
	}
	binary.LittleEndian.PutUint32(b[88:], headerCRC(b))
}

// Decode points new tables into data (which must stay alive and
// unmodified while they are used) after checking its header and table;
// the sections are checked when first used (Need).
func Decode(data []byte) (_ *File, h Header, err error) {
	if len(data) < HeaderSize+tableSize {
		return nil, h, fmt.Errorf("%w: %d bytes is shorter than the header", ErrInvalid, len(data))
	}
	if string(data[:8]) != cacheMagic {
		return nil, h, fmt.Errorf("%w: bad magic", ErrInvalid)
	}
	if v := binary.LittleEndian.Uint32(data[8:]); v != cacheVersion {
		return nil, h, fmt.Errorf("%w: format version %d, want %d", ErrInvalid, v, cacheVersion)
	}
	if n := binary.LittleEndian.Uint32(data[12:]); n != NumSections {
		return nil, h, fmt.Errorf("%w: %d sections, want %d", ErrInvalid, n, NumSections)
	}
	if headerCRC(data) != binary.LittleEndian.Uint32(data[88:]) {
		return nil, h, fmt.Errorf("%w: header checksum mismatch (damaged file)", ErrInvalid)
	}
	id := data[16:80]
	for len(id) > 0 && id[len(id)-1] == 0 {
		id = id[:len(id)-1]
	}
	h.BuildID = string(id)
	h.ImageSize = int64(binary.LittleEndian.Uint64(data[80:]))
	lz := &File{}
	var secs [NumSections][]byte
	for i := range secs {
		e := data[HeaderSize+EntrySize*i:]
		off, n := binary.LittleEndian.Uint64(e), binary.LittleEndian.Uint64(e[8:])
		if off%8 != 0 || off > uint64(len(data)) || n > uint64(len(data))-off {
			return nil, h, fmt.Errorf("%w: section %d out of bounds", ErrInvalid, i)
		}
		secs[i] = data[off : off+n]
		lz.crcs[i] = binary.LittleEndian.Uint32(e[16:])
	}
	// Typing the sections reads none of their bytes.
	a := &table.Tables{Strs: secs[SecStrs]}
	if a.Files, err = fromBytes[table.StrRef](secs[SecFiles]); err != nil {
		return nil, h, err
	}
	if a.Units, err = fromBytes[table.Unit](secs[SecUnits]); err != nil {
		return nil, h, err
	}
	if a.Rows, err = fromBytes[table.Row](secs[SecRows]); err != nil {
		return nil, h, err
	}
	if a.ByAddr, err = fromBytes[uint32](secs[SecByAddr]); err != nil {
		return nil, h, err
	}
	if a.ByFile, err = fromBytes[uint32](secs[SecByFile]); err != nil {
		return nil, h, err
	}
	if a.Funcs, err = fromBytes[table.Func](secs[SecFuncs]); err != nil {
		return nil, h, err
	}
	if a.ByName, err = fromBytes[uint32](secs[SecByName]); err != nil {
		return nil, h, err
	}
	if a.Inlines, err = fromBytes[table.Inline](secs[SecInlines]); err != nil {
		return nil, h, err
	}
	if a.InlName, err = fromBytes[uint32](secs[SecInlName]); err != nil {
		return nil, h, err
	}
	if a.Ranges, err = fromBytes[[2]uint64](secs[SecRanges]); err != nil {
		return nil, h, err
	}
	if a.Spans, err = fromBytes[table.Span](secs[SecSpans]); err != nil {
		return nil, h, err
	}
	if a.Structs, err = fromBytes[table.Struct](secs[SecStructs]); err != nil {
		return nil, h, err
	}
	if a.InlRanges, err = fromBytes[[2]uint64](secs[SecInlRanges]); err != nil {
		return nil, h, err
	}
	if a.InlSum, err = fromBytes[table.InlineSum](secs[SecInlSum]); err != nil {
		return nil, h, err
	}
	if a.ChunkCRCs, err = fromBytes[uint32](secs[SecChunkCRCs]); err != nil {
		return nil, h, err
	}
	nchunks := 0
	for k, i := range chunked {
		n := (len(secs[i]) + chunkSize - 1) / chunkSize
		lz.chunkOK[k] = make([]atomic.Bool, n)
		nchunks += n
	}
	if nchunks != len(a.ChunkCRCs) {
		return nil, h, fmt.Errorf("%w: %d chunk checksums for %d chunks", ErrInvalid, len(a.ChunkCRCs), nchunks)
	}
	// The sort orders leave discarded code out.
	if len(a.ByAddr) > len(a.Rows) || len(a.ByFile) > len(a.Rows) || len(a.ByName) > len(a.Funcs) || len(a.InlName) > len(a.Inlines) {
		return nil, h, fmt.Errorf("%w: sort index sizes disagree", ErrInvalid)
	}
	lz.all = a
	return lz, h, nil
}

// Tables returns the tables of f: those sections checked so far (Need),
// the others nil.
func (f *File) Tables() *table.Tables { return &f.checked }

// Stats reports how many records the tables hold, without reading the
// sections.
func (f *File) Stats() table.Stats { return f.all.Stats() }

// Need makes sure the sections in mask (1<<section bits, and the core
// ones) have been checked and set in f's Tables. A section that fails its
// check is never used: Rebuild makes the index built again from the
// image answer (a build of the same image gives the same bytes). Without
// Rebuild, or if it fails, f answers nothing and Need returns the error
// (also kept for Err).
func (f *File) Need(mask uint32) error {
	mask |= coreSecs
	if f.done.Load()&mask == mask {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return f.err
	}
	if f.replaced.Load() {
		return nil
	}
	// Core sections first: checks of the others read names.
	for _, m := range []uint32{coreSecs, mask} {
		for i := 0; i < NumSections; i++ {
			bit := uint32(1) << i
			if m&bit == 0 || f.done.Load()&bit != 0 {
				continue
			}
			if err := checkSection(f.all, i, f.crcs[i]); err != nil {
				return f.replaceDamaged(fmt.Errorf("%w: section %d: %v", ErrInvalid, i, err))
			}
			takeSection(&f.checked, f.all, i)
			f.done.Or(bit)
		}
	}
	return nil
}

// ChunksOK checks the chunks holding elements [lo, hi) of chunked section
// sec (SecRows, SecByAddr or SecByFile), reporting false if one is
// damaged (f is then replaced: see Rebuild).
func (f *File) ChunksOK(sec, lo, hi int) bool {
	if lo >= hi {
		return true
	}
	k := slices.Index(chunked[:], sec)
	size := 4
	if sec == SecRows {
		size = int(unsafe.Sizeof(table.Row{}))
	}
	for c := lo * size / chunkSize; c <= (hi*size-1)/chunkSize; c++ {
		if !f.chunkOK[k][c].Load() && !f.checkChunk(k, c) {
			return false
		}
	}
	return true
}

// checkChunk checks chunk c of section chunked[k].
func (f *File) checkChunk(k, c int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.replaced.Load() || f.err != nil {
		return false
	}
	idx := c // in ChunkCRCs
	for j := range k {
		idx += len(f.chunkOK[j])
	}
	b := sections(f.all)[chunked[k]]
	if crc32.Checksum(b[c*chunkSize:min((c+1)*chunkSize, len(b))], crcTable) != f.all.ChunkCRCs[idx] {
		f.replaceDamaged(fmt.Errorf("%w: section %d: checksum mismatch in chunk %d (damaged or partly written file)", ErrInvalid, chunked[k], c))
		return false
	}
	f.chunkOK[k][c].Store(true)
	return true
}

// replaceDamaged handles a section that failed its check (f.mu held).
func (f *File) replaceDamaged(cause error) error {
	if f.Rebuild == nil {
		f.err = cause
		return cause
	}
	if err := f.Rebuild(cause); err != nil {
		f.err = fmt.Errorf("rebuilding the index after %v: %w", cause, err)
		return f.err
	}
	f.replaced.Store(true)
	return nil
}

// Err returns the error that left f unable to answer (a damaged section
// that could not be rebuilt), nil normally.
func (f *File) Err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// checkSection checks section i of x (all sections typed; core sections
// already checked when i is not one) against its CRC and checks its
// cross-references, so that no query can index out of range on a file
// that passed the checksum but was written by a buggy or hostile writer.
func checkSection(x *table.Tables, i int, crc uint32) error {
	if !isChunked(i) && crc32.Checksum(sections(x)[i], crcTable) != crc {
		return errors.New("checksum mismatch (damaged or partly written file)")
	}
	ns := uint64(len(x.Strs))
	okStr := func(r table.StrRef) bool { return uint64(r.Off)+uint64(r.Len) <= ns }
	nf, nr, nfn, nu := uint32(len(x.Files)), uint32(len(x.Rows)), uint32(len(x.Funcs)), uint32(len(x.Units))
	okFile := func(f uint32) bool { return f < nf || f == table.NoFile }
	okRng := func(rs [][2]uint64, off, n uint32) bool { return uint64(off)+uint64(n) <= uint64(len(rs)) }
	switch i {
	case SecFiles:
		for _, f := range x.Files {
			if !okStr(f) {
				return errors.New("file name out of range")
			}
		}
	case SecUnits:
		for _, u := range x.Units {
			if !okStr(u.Name) || !okStr(u.CompDir) || u.RowStart > u.RowEnd || u.RowEnd > nr || u.Off > u.End {
				return errors.New("bad unit")
			}
		}
	// Row file ids are not checked (4.3 M rows for a vmlinux): every use
	// goes through dwarfmap's Index.File, which bounds-checks. Entries of
	// ByAddr and ByFile are bounds-checked where used (Index.row). Sort
	// orders are not re-checked: the checksum vouches for what the writer
	// wrote, and a misordered index gives wrong answers, never
	// out-of-range reads.
	case SecByName:
		for _, i := range x.ByName {
			if i >= nfn {
				return errors.New("function index out of range")
			}
		}
	case SecFuncs:
		for _, f := range x.Funcs {
			if !okStr(f.Name) || f.Unit >= nu || !okFile(f.DeclFile) || !okRng(x.Ranges, f.RngOff, f.RngN) {
				return errors.New("bad function")
			}
		}
	case SecInlName:
		for _, i := range x.InlName {
			if i >= uint32(len(x.Inlines)) {
				return errors.New("inline index out of range")
			}
		}
	case SecInlines:
		for _, f := range x.Inlines {
			if !okStr(f.Name) || f.Unit >= nu || !okFile(f.CallFile) || !okFile(f.DeclFile) || !okRng(x.InlRanges, f.RngOff, f.RngN) || (f.Caller >= nfn && f.Caller != table.NoFile) {
				return errors.New("bad inline")
			}
		}
	case SecSpans:
		for i, s := range x.Spans {
			if s.Func >= nfn || (i > 0 && x.Spans[i-1].Lo > s.Lo) {
				return errors.New("bad address span")
			}
		}
	case SecInlSum:
		for _, s := range x.InlSum {
			if !okStr(s.Name) || !okFile(s.DeclFile) {
				return errors.New("bad inline summary")
			}
		}
	case SecStructs:
		for i, s := range x.Structs {
			if !okStr(s.Name) || s.Unit >= nu || (i > 0 && x.Str(x.Structs[i-1].Name) > x.Str(s.Name)) {
				return errors.New("bad struct")
			}
		}
	}
	return nil
}

// Dir is where indexes are kept: $KLASY_CACHE/dwarfmap, with
// KLASY_CACHE defaulting as in scripts/lib.sh.
func Dir() string { return filepath.Join(cachedir.Root(), "dwarfmap") }

// Name names an image's cache file: its build-id, or for an image
// without one a hash of its path, size and modification time; its size,
// so that two images of one build-id (a vmlinux and its copy with
// compressed debug sections) each keep theirs; and the format version,
// so that klasys of two versions sharing a cache each keep theirs.
func Name(img *elfimage.Image) string {
	key := img.BuildID
	if key == "" {
		st, _ := os.Stat(img.Path)
		abs, _ := filepath.Abs(img.Path)
		var mt int64
		if st != nil {
			mt = st.ModTime().UnixNano()
		}
		sum := sha256.Sum256(fmt.Appendf(nil, "%s\x00%d\x00%d", abs, img.Size, mt))
		key = "nobuildid-" + hex.EncodeToString(sum[:16])
	}
	if img.Rel {
		// A module's addresses are those elfimage lays its sections at.
		key += "-" + elfimage.ModuleLayout
	}
	return fmt.Sprintf("%s-%d.v%d.idx", key, img.Size, cacheVersion)
}

// Open maps the cache file at p, which must be a regular file, and
// decodes it (Decode). Close the File when its tables are no longer
// used.
func Open(p string) (*File, Header, error) {
	m, err := mmapfile.Open(p)
	if err != nil {
		return nil, Header{}, err
	}
	if m.Size() < HeaderSize+tableSize {
		m.Close()
		return nil, Header{}, fmt.Errorf("%w: %d bytes is shorter than the header", ErrInvalid, m.Size())
	}
	f, h, err := Decode(m.Data)
	if err != nil {
		m.Close()
		return nil, h, err
	}
	f.release = m.Close
	return f, h, nil
}

// Close releases the mapping behind f (if any). f's tables must not be
// used afterwards.
func (f *File) Close() error {
	if f.release != nil {
		return f.release()
	}
	return nil
}

// Write writes the tables x of the image with build-id buildID and size
// imageSize (Encode) next to p under a temporary name and renames it into
// place, so a reader sees either no file or a complete one, and two
// concurrent builders each rename a complete file. The temporary file is
// locked while it is written, so that RemoveStale leaves it alone.
func Write(p string, x *table.Tables, buildID string, imageSize int64) error {
	dir := filepath.Dir(p)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, filepath.Base(p)+tmpInfix+"*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // no-op after a successful rename
	// Without locks (some network file systems), the file is protected by
	// its age alone.
	syscall.Flock(int(tmp.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if _, err := Encode(tmp, x, buildID, imageSize); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), p)
}

// tmpInfix marks Write's temporary files: NAME.idx.tmp-RANDOM.
const tmpInfix = ".tmp-"

// Temporary files that a build killed while writing left behind (25-128
// MB each) are removed by the next build once their writer is gone (no
// lock on them) and they are older than staleTmpAge, which covers the
// instant between a writer creating its file and locking it. Where locks
// are not supported, age alone decides, after staleTmpAgeNoLock.
const (
	staleTmpAge       = time.Minute
	staleTmpAgeNoLock = time.Hour
)

// RemoveStale removes the temporary files in the cache directory dir
// that no writer will finish, and returns their names.
func RemoveStale(dir string) []string {
	names, _ := filepath.Glob(filepath.Join(dir, "*.idx"+tmpInfix+"*"))
	var removed []string
	for _, name := range names {
		f, fi, err := boundedread.OpenRegular(name) // not ours if not a file
		if err != nil {
			continue
		}
		age := time.Since(fi.ModTime())
		var stale bool
		switch err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); {
		case err == nil:
			stale = age > staleTmpAge
		case errors.Is(err, syscall.EWOULDBLOCK):
			stale = false // a writer holds it
		default:
			stale = age > staleTmpAgeNoLock
		}
		if stale && os.Remove(name) == nil {
			removed = append(removed, name)
		}
		f.Close()
	}
	return removed
}
