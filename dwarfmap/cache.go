package dwarfmap

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
	"runtime/debug"
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
//	sections the Index arrays verbatim, each 8-byte aligned
//
// Loading maps the file, checks the header and the table, and points the
// Index slices into the mapping. A query touches only the sections it
// reads: each is checked (CRC and cross-references) when first used, so
// `klasy funcs` never reads the 140 MB of line table. The line table and
// its two sort orders are checked by chunks of chunkSize bytes, each when
// first read (chunkCRCs holds their CRCs), so the lines of one function
// read a few chunks. A damaged section or chunk is never used: the index
// is rebuilt from the image and answers from then on (see use).
const (
	cacheMagic   = "KLASYDM\x00"
	cacheVersion = 8
	numSections  = 16
	chunkSize    = 256 << 10
	headerSize   = 8 + 4 + 4 + 64 + 8 + 4 + 4
	tableEntry   = 8 + 8 + 4 + 4
	tableSize    = numSections * tableEntry
)

// Section numbers, in file order (Index.sections).
const (
	secStrs = iota
	secFiles
	secUnits
	secRows
	secByAddr
	secByFile
	secFuncs
	secByName
	secInlines
	secInlName
	secRanges
	secSpans
	secStructs
	secInlRanges
	secInlSum
	secChunkCRCs
)

// chunked are the sections checked by chunks, in chunkCRCs order: they
// have no cross-references to check (row file ids and row numbers are
// bounds-checked where used).
var chunked = [...]int{secRows, secByAddr, secByFile}

func isChunked(i int) bool { return i == secRows || i == secByAddr || i == secByFile }

// Sets of sections the queries read. Every query reads names and files,
// so the small core sections are checked with any of them.
const (
	coreSecs   = 1<<secStrs | 1<<secFiles | 1<<secUnits | 1<<secChunkCRCs
	funcSecs   = 1<<secFuncs | 1<<secByName | 1<<secRanges | 1<<secInlSum
	inlineSecs = funcSecs | 1<<secInlines | 1<<secInlName | 1<<secInlRanges
	funcAtSecs = 1<<secSpans | 1<<secFuncs | 1<<secRanges
	// Lines of a function: its rows by address, less its inlined copies;
	// lines of a file: its rows by file, each with its function (FuncAt,
	// also used by the nearest-line rule).
	funcLineSecs = inlineSecs | funcAtSecs | 1<<secRows | 1<<secByAddr
	fileLineSecs = funcAtSecs | 1<<secRows | 1<<secByFile
	structSecs   = 1 << secStructs
	allSections  = 1<<numSections - 1
)

// IEEE, not Castagnoli: Go computes it with carry-less multiplication at
// about 26 GB/s here against 10 GB/s.
var crcTable = crc32.IEEETable

// ErrCacheInvalid is wrapped by decode errors.
var ErrCacheInvalid = errors.New("invalid dwarfmap cache")

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
		return nil, fmt.Errorf("%w: section of %d bytes is not a multiple of %d", ErrCacheInvalid, len(b), sz)
	}
	if len(b) == 0 {
		return nil, nil
	}
	if uintptr(unsafe.Pointer(&b[0]))%8 != 0 {
		return nil, fmt.Errorf("%w: misaligned section", ErrCacheInvalid)
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), len(b)/sz), nil
}

func (x *Index) sections() [numSections][]byte {
	return [numSections][]byte{
		x.t.Strs, asBytes(x.t.Files), asBytes(x.t.Units), asBytes(x.t.Rows), asBytes(x.t.ByAddr),
		asBytes(x.t.ByFile), asBytes(x.t.Funcs), asBytes(x.t.ByName), asBytes(x.t.Inlines),
		asBytes(x.t.InlName), asBytes(x.t.Ranges), asBytes(x.t.Spans), asBytes(x.t.Structs),
		asBytes(x.t.InlRanges), asBytes(x.t.InlSum), asBytes(x.t.ChunkCRCs),
	}
}

// takeSection sets x's section i to src's.
func (x *Index) takeSection(src *Index, i int) {
	switch i {
	case secStrs:
		x.t.Strs = src.t.Strs
	case secFiles:
		x.t.Files = src.t.Files
	case secUnits:
		x.t.Units = src.t.Units
	case secRows:
		x.t.Rows = src.t.Rows
	case secByAddr:
		x.t.ByAddr = src.t.ByAddr
	case secByFile:
		x.t.ByFile = src.t.ByFile
	case secFuncs:
		x.t.Funcs = src.t.Funcs
	case secByName:
		x.t.ByName = src.t.ByName
	case secInlines:
		x.t.Inlines = src.t.Inlines
	case secInlName:
		x.t.InlName = src.t.InlName
	case secRanges:
		x.t.Ranges = src.t.Ranges
	case secSpans:
		x.t.Spans = src.t.Spans
	case secStructs:
		x.t.Structs = src.t.Structs
	case secInlRanges:
		x.t.InlRanges = src.t.InlRanges
	case secInlSum:
		x.t.InlSum = src.t.InlSum
	case secChunkCRCs:
		x.t.ChunkCRCs = src.t.ChunkCRCs
	}
}

// headerCRC covers the header fields before the CRC and the table (which
// holds the sections' CRCs).
func headerCRC(hdr []byte) uint32 {
	return crc32.Update(crc32.Checksum(hdr[:88], crcTable), crcTable, hdr[headerSize:headerSize+tableSize])
}

// WriteTo writes x in cache format.
func (x *Index) WriteTo(w io.Writer, imageSize int64) (_ int64, err error) {
	defer mmapfile.Catch(&err, debug.SetPanicOnFault(true))
	x, err = x.use(allSections)
	if err != nil {
		return 0, err
	}
	if !x.chunksOK(secRows, 0, len(x.t.Rows)) || !x.chunksOK(secByAddr, 0, len(x.t.ByAddr)) || !x.chunksOK(secByFile, 0, len(x.t.ByFile)) {
		return x.WriteTo(w, imageSize) // found damaged: x answers from a rebuild now
	}
	if x.lazy == nil {
		x.t.ChunkCRCs = x.t.ChunkCRCs[:0]
		for _, i := range chunked {
			b := x.sections()[i]
			for off := 0; off < len(b); off += chunkSize {
				x.t.ChunkCRCs = append(x.t.ChunkCRCs, crc32.Checksum(b[off:min(off+chunkSize, len(b))], crcTable))
			}
		}
	}
	secs := x.sections()
	hdr := make([]byte, headerSize+tableSize)
	copy(hdr, cacheMagic)
	binary.LittleEndian.PutUint32(hdr[8:], cacheVersion)
	binary.LittleEndian.PutUint32(hdr[12:], numSections)
	copy(hdr[16:80], x.BuildID)
	binary.LittleEndian.PutUint64(hdr[80:], uint64(imageSize))
	off := uint64(len(hdr))
	for i, s := range secs {
		off = (off + 7) &^ 7
		e := hdr[headerSize+tableEntry*i:]
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

// cacheHeader is what decode checks before trusting a file.
type cacheHeader struct {
	BuildID   string
	ImageSize int64
}

// lazySections are the sections of a mapped cache file not yet checked.
type lazySections struct {
	mu   sync.Mutex
	done atomic.Uint32 // sections checked and set in the Index
	all  *Index        // every section, typed but unchecked
	crcs [numSections]uint32
	err  error // sticky: a damaged section that could not be rebuilt
	// rebuild builds the index again from the image after a section
	// failed its check (nil: no image, e.g. fuzzing).
	rebuild func(cause error) (*Index, error)
	// replacement is the rebuilt index, which answers once set.
	replacement atomic.Pointer[Index]
	// chunkOK[k][c] is set once chunk c of section chunked[k] is checked.
	chunkOK [len(chunked)][]atomic.Bool
}

// decode points a new Index into data (which must stay alive and
// unmodified while the Index is used) after checking its header and
// table; the sections are checked when first used.
func decode(data []byte) (x *Index, h cacheHeader, err error) {
	if len(data) < headerSize+tableSize {
		return nil, h, fmt.Errorf("%w: %d bytes is shorter than the header", ErrCacheInvalid, len(data))
	}
	if string(data[:8]) != cacheMagic {
		return nil, h, fmt.Errorf("%w: bad magic", ErrCacheInvalid)
	}
	if v := binary.LittleEndian.Uint32(data[8:]); v != cacheVersion {
		return nil, h, fmt.Errorf("%w: format version %d, want %d", ErrCacheInvalid, v, cacheVersion)
	}
	if n := binary.LittleEndian.Uint32(data[12:]); n != numSections {
		return nil, h, fmt.Errorf("%w: %d sections, want %d", ErrCacheInvalid, n, numSections)
	}
	if headerCRC(data) != binary.LittleEndian.Uint32(data[88:]) {
		return nil, h, fmt.Errorf("%w: header checksum mismatch (damaged file)", ErrCacheInvalid)
	}
	id := data[16:80]
	for len(id) > 0 && id[len(id)-1] == 0 {
		id = id[:len(id)-1]
	}
	h.BuildID = string(id)
	h.ImageSize = int64(binary.LittleEndian.Uint64(data[80:]))
	lz := &lazySections{}
	var secs [numSections][]byte
	for i := range secs {
		e := data[headerSize+tableEntry*i:]
		off, n := binary.LittleEndian.Uint64(e), binary.LittleEndian.Uint64(e[8:])
		if off%8 != 0 || off > uint64(len(data)) || n > uint64(len(data))-off {
			return nil, h, fmt.Errorf("%w: section %d out of bounds", ErrCacheInvalid, i)
		}
		secs[i] = data[off : off+n]
		lz.crcs[i] = binary.LittleEndian.Uint32(e[16:])
	}
	// Typing the sections reads none of their bytes.
	a := &Index{BuildID: h.BuildID, t: table.Tables{Strs: secs[secStrs]}}
	if a.t.Files, err = fromBytes[table.StrRef](secs[secFiles]); err != nil {
		return nil, h, err
	}
	if a.t.Units, err = fromBytes[Unit](secs[secUnits]); err != nil {
		return nil, h, err
	}
	if a.t.Rows, err = fromBytes[Row](secs[secRows]); err != nil {
		return nil, h, err
	}
	if a.t.ByAddr, err = fromBytes[uint32](secs[secByAddr]); err != nil {
		return nil, h, err
	}
	if a.t.ByFile, err = fromBytes[uint32](secs[secByFile]); err != nil {
		return nil, h, err
	}
	if a.t.Funcs, err = fromBytes[Func](secs[secFuncs]); err != nil {
		return nil, h, err
	}
	if a.t.ByName, err = fromBytes[uint32](secs[secByName]); err != nil {
		return nil, h, err
	}
	if a.t.Inlines, err = fromBytes[Inline](secs[secInlines]); err != nil {
		return nil, h, err
	}
	if a.t.InlName, err = fromBytes[uint32](secs[secInlName]); err != nil {
		return nil, h, err
	}
	if a.t.Ranges, err = fromBytes[[2]uint64](secs[secRanges]); err != nil {
		return nil, h, err
	}
	if a.t.Spans, err = fromBytes[table.Span](secs[secSpans]); err != nil {
		return nil, h, err
	}
	if a.t.Structs, err = fromBytes[Struct](secs[secStructs]); err != nil {
		return nil, h, err
	}
	if a.t.InlRanges, err = fromBytes[[2]uint64](secs[secInlRanges]); err != nil {
		return nil, h, err
	}
	if a.t.InlSum, err = fromBytes[table.InlineSum](secs[secInlSum]); err != nil {
		return nil, h, err
	}
	if a.t.ChunkCRCs, err = fromBytes[uint32](secs[secChunkCRCs]); err != nil {
		return nil, h, err
	}
	nchunks := 0
	for k, i := range chunked {
		n := (len(secs[i]) + chunkSize - 1) / chunkSize
		lz.chunkOK[k] = make([]atomic.Bool, n)
		nchunks += n
	}
	if nchunks != len(a.t.ChunkCRCs) {
		return nil, h, fmt.Errorf("%w: %d chunk checksums for %d chunks", ErrCacheInvalid, len(a.t.ChunkCRCs), nchunks)
	}
	// The sort orders leave discarded code out.
	if len(a.t.ByAddr) > len(a.t.Rows) || len(a.t.ByFile) > len(a.t.Rows) || len(a.t.ByName) > len(a.t.Funcs) || len(a.t.InlName) > len(a.t.Inlines) {
		return nil, h, fmt.Errorf("%w: sort index sizes disagree", ErrCacheInvalid)
	}
	lz.all = a
	return &Index{BuildID: h.BuildID, lazy: lz}, h, nil
}

// need makes sure the sections in mask (and the core ones) have been
// checked and set in x. A section that fails its check is never used:
// the index is rebuilt from the image and its sections replace those not
// yet in use (a build of the same image gives the same bytes). Without an
// image, or if the rebuild fails, x answers nothing and need returns the
// error (also kept for Err).
func (x *Index) need(mask uint32) error {
	lz := x.lazy
	if lz == nil {
		return nil
	}
	mask |= coreSecs
	if lz.done.Load()&mask == mask {
		return nil
	}
	lz.mu.Lock()
	defer lz.mu.Unlock()
	if lz.err != nil {
		return lz.err
	}
	if lz.replacement.Load() != nil {
		return nil
	}
	// Core sections first: checks of the others read names.
	for _, m := range []uint32{coreSecs, mask} {
		for i := 0; i < numSections; i++ {
			bit := uint32(1) << i
			if m&bit == 0 || lz.done.Load()&bit != 0 {
				continue
			}
			if err := lz.all.checkSection(i, lz.crcs[i]); err != nil {
				return x.replaceDamaged(fmt.Errorf("%w: section %d: %v", ErrCacheInvalid, i, err))
			}
			x.takeSection(lz.all, i)
			lz.done.Or(bit)
		}
	}
	return nil
}

// use checks the sections in mask (see need) and returns the index to
// query: x, or the index rebuilt after damage was found. Every exported
// query starts with it, for all the sections it reads.
func (x *Index) use(mask uint32) (*Index, error) {
	if x.lazy == nil {
		return x, nil
	}
	if err := x.need(mask); err != nil {
		return nil, err
	}
	if y := x.lazy.replacement.Load(); y != nil {
		return y, nil
	}
	return x, nil
}

// replaced returns the rebuilt index if damage was found (also during a
// query that was running on x, which then runs again on it), else nil.
func (x *Index) replaced() *Index {
	if x.lazy == nil {
		return nil
	}
	return x.lazy.replacement.Load()
}

// chunksOK checks the chunks holding elements [lo, hi) of chunked section
// sec (of elements of size bytes), reporting false if one is damaged (x
// is then replaced).
func (x *Index) chunksOK(sec, lo, hi int) bool {
	lz := x.lazy
	if lz == nil || lo >= hi {
		return true
	}
	k := slices.Index(chunked[:], sec)
	size := 4
	if sec == secRows {
		size = int(unsafe.Sizeof(Row{}))
	}
	for c := lo * size / chunkSize; c <= (hi*size-1)/chunkSize; c++ {
		if !lz.chunkOK[k][c].Load() && !x.checkChunk(k, c) {
			return false
		}
	}
	return true
}

// checkChunk checks chunk c of section chunked[k].
func (x *Index) checkChunk(k, c int) bool {
	lz := x.lazy
	lz.mu.Lock()
	defer lz.mu.Unlock()
	if lz.replacement.Load() != nil || lz.err != nil {
		return false
	}
	idx := c // in chunkCRCs
	for j := range k {
		idx += len(lz.chunkOK[j])
	}
	b := lz.all.sections()[chunked[k]]
	if crc32.Checksum(b[c*chunkSize:min((c+1)*chunkSize, len(b))], crcTable) != lz.all.t.ChunkCRCs[idx] {
		x.replaceDamaged(fmt.Errorf("%w: section %d: checksum mismatch in chunk %d (damaged or partly written file)", ErrCacheInvalid, chunked[k], c))
		return false
	}
	lz.chunkOK[k][c].Store(true)
	return true
}

// replaceDamaged handles a section that failed its check (lz.mu held).
func (x *Index) replaceDamaged(cause error) error {
	lz := x.lazy
	if lz.rebuild == nil {
		lz.err = cause
		return cause
	}
	y, err := lz.rebuild(cause)
	if err != nil {
		lz.err = fmt.Errorf("rebuilding the index after %v: %w", cause, err)
		return lz.err
	}
	lz.replacement.Store(y)
	return nil
}

// Err returns the error that left x unable to answer (a damaged cache
// section that could not be rebuilt), nil normally. Queries without an
// error result return nothing then; callers check Err after them.
func (x *Index) Err() error {
	if x.lazy == nil {
		return nil
	}
	x.lazy.mu.Lock()
	defer x.lazy.mu.Unlock()
	return x.lazy.err
}

// checkSection checks section i of x (all sections typed; core sections
// already checked when i is not one) against its CRC and checks its
// cross-references, so that no query can index out of range on a file
// that passed the checksum but was written by a buggy or hostile writer.
func (x *Index) checkSection(i int, crc uint32) error {
	if !isChunked(i) && crc32.Checksum(x.sections()[i], crcTable) != crc {
		return errors.New("checksum mismatch (damaged or partly written file)")
	}
	ns := uint64(len(x.t.Strs))
	okStr := func(r table.StrRef) bool { return uint64(r.Off)+uint64(r.Len) <= ns }
	nf, nr, nfn, nu := uint32(len(x.t.Files)), uint32(len(x.t.Rows)), uint32(len(x.t.Funcs)), uint32(len(x.t.Units))
	okFile := func(f uint32) bool { return f < nf || f == table.NoFile }
	okRng := func(rs [][2]uint64, off, n uint32) bool { return uint64(off)+uint64(n) <= uint64(len(rs)) }
	switch i {
	case secFiles:
		for _, f := range x.t.Files {
			if !okStr(f) {
				return errors.New("file name out of range")
			}
		}
	case secUnits:
		for _, u := range x.t.Units {
			if !okStr(u.Name) || !okStr(u.CompDir) || u.RowStart > u.RowEnd || u.RowEnd > nr || u.Off > u.End {
				return errors.New("bad unit")
			}
		}
	// Row file ids are not checked (4.3 M rows for a vmlinux): every use
	// goes through Index.File, which bounds-checks. Entries of byAddr and
	// byFile are bounds-checked where used (Index.row). Sort orders are
	// not re-checked: the checksum vouches for what the writer wrote, and
	// a misordered index gives wrong answers, never out-of-range reads.
	case secByName:
		for _, i := range x.t.ByName {
			if i >= nfn {
				return errors.New("function index out of range")
			}
		}
	case secFuncs:
		for _, f := range x.t.Funcs {
			if !okStr(f.Name) || f.Unit >= nu || !okFile(f.DeclFile) || !okRng(x.t.Ranges, f.RngOff, f.RngN) {
				return errors.New("bad function")
			}
		}
	case secInlName:
		for _, i := range x.t.InlName {
			if i >= uint32(len(x.t.Inlines)) {
				return errors.New("inline index out of range")
			}
		}
	case secInlines:
		for _, f := range x.t.Inlines {
			if !okStr(f.Name) || f.Unit >= nu || !okFile(f.CallFile) || !okFile(f.DeclFile) || !okRng(x.t.InlRanges, f.RngOff, f.RngN) || (f.Caller >= nfn && f.Caller != table.NoFile) {
				return errors.New("bad inline")
			}
		}
	case secSpans:
		for i, s := range x.t.Spans {
			if s.Func >= nfn || (i > 0 && x.t.Spans[i-1].Lo > s.Lo) {
				return errors.New("bad address span")
			}
		}
	case secInlSum:
		for _, s := range x.t.InlSum {
			if !okStr(s.Name) || !okFile(s.DeclFile) {
				return errors.New("bad inline summary")
			}
		}
	case secStructs:
		for i, s := range x.t.Structs {
			if !okStr(s.Name) || s.Unit >= nu || (i > 0 && x.t.Str(x.t.Structs[i-1].Name) > x.t.Str(s.Name)) {
				return errors.New("bad struct")
			}
		}
	}
	return nil
}

// CacheDir is where indexes are kept: $KLASY_CACHE/dwarfmap, with
// KLASY_CACHE defaulting as in scripts/lib.sh.
func CacheDir() string { return filepath.Join(cachedir.Root(), "dwarfmap") }

// cacheName names an image's cache file: its build-id, or for an image
// without one a hash of its path, size and modification time; its size,
// so that two images of one build-id (a vmlinux and its copy with
// compressed debug sections) each keep theirs; and the format version,
// so that klasys of two versions sharing a cache each keep theirs.
func cacheName(img *elfimage.Image) string {
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

// loadCache maps the cache file at p, which must be a regular file, and
// decodes it.
func loadCache(p string) (*Index, cacheHeader, error) {
	m, err := mmapfile.Open(p)
	if err != nil {
		return nil, cacheHeader{}, err
	}
	if m.Size() < headerSize+tableSize {
		m.Close()
		return nil, cacheHeader{}, fmt.Errorf("%w: %d bytes is shorter than the header", ErrCacheInvalid, m.Size())
	}
	x, h, err := decode(m.Data)
	if err != nil {
		m.Close()
		return nil, h, err
	}
	x.release = m.Close
	return x, h, nil
}

// writeCache writes x next to p under a temporary name and renames it
// into place, so a reader sees either no file or a complete one, and two
// concurrent builders each rename a complete file. The temporary file is
// locked while it is written, so that removeStaleTemps leaves it alone.
func writeCache(p string, x *Index, imageSize int64) error {
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
	if _, err := x.WriteTo(tmp, imageSize); err != nil {
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

// tmpInfix marks writeCache's temporary files: NAME.idx.tmp-RANDOM.
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

// removeStaleTemps removes the temporary files in the cache directory
// dir that no writer will finish, and returns their names.
func removeStaleTemps(dir string) []string {
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
