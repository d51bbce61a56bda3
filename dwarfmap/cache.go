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
	"syscall"
	"unsafe"

	"github.com/klasy/klasy/internal/cachedir"
)

// Cache file layout (little-endian, as the host; big-endian hosts always
// rebuild):
//
//	header   magic "KLASYDM\x00", version, section count, build-id (64
//	         bytes, hex, NUL padded), image size, CRC-32 of everything
//	         after the header
//	table    per section: offset, length in bytes
//	sections the Index arrays verbatim, each 8-byte aligned
//
// Loading maps the file and points the Index slices into the mapping.
// The CRC and the bounds checks in decode make a damaged or foreign file
// an error (and so a rebuild), never an out-of-range index later.
const (
	cacheMagic   = "KLASYDM\x00"
	cacheVersion = 4
	numSections  = 13
	headerSize   = 8 + 4 + 4 + 64 + 8 + 4 + 4
	tableSize    = numSections * 16
)

// IEEE, not Castagnoli: Go computes it with carry-less multiplication at
// about 26 GB/s here against 10 GB/s, a third of a warm load.
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
		x.strs, asBytes(x.files), asBytes(x.units), asBytes(x.rows), asBytes(x.byAddr),
		asBytes(x.byFile), asBytes(x.funcs), asBytes(x.byName), asBytes(x.inlines),
		asBytes(x.inlName), asBytes(x.ranges), asBytes(x.spans), asBytes(x.structs),
	}
}

// WriteTo writes x in cache format.
func (x *Index) WriteTo(w io.Writer, imageSize int64) (int64, error) {
	secs := x.sections()
	hdr := make([]byte, headerSize+tableSize)
	copy(hdr, cacheMagic)
	binary.LittleEndian.PutUint32(hdr[8:], cacheVersion)
	binary.LittleEndian.PutUint32(hdr[12:], numSections)
	copy(hdr[16:80], x.BuildID)
	binary.LittleEndian.PutUint64(hdr[80:], uint64(imageSize))
	off := uint64(len(hdr))
	var pad [8]byte
	crc := crc32.New(crcTable)
	for i, s := range secs {
		off = (off + 7) &^ 7
		binary.LittleEndian.PutUint64(hdr[headerSize+16*i:], off)
		binary.LittleEndian.PutUint64(hdr[headerSize+16*i+8:], uint64(len(s)))
		off += uint64(len(s))
	}
	crc.Write(hdr[headerSize:])
	pos := uint64(len(hdr))
	// The CRC covers the table, the padding and the sections, in file order.
	for _, s := range secs {
		if n := ((pos + 7) &^ 7) - pos; n > 0 {
			crc.Write(pad[:n])
			pos += n
		}
		crc.Write(s)
		pos += uint64(len(s))
	}
	binary.LittleEndian.PutUint32(hdr[88:], crc.Sum32())
	n, err := w.Write(hdr)
	total := int64(n)
	if err != nil {
		return total, err
	}
	pos = uint64(len(hdr))
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

// decode points a new Index into data (which must stay alive and
// unmodified while the Index is used) after checking it completely.
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
	id := data[16:80]
	for len(id) > 0 && id[len(id)-1] == 0 {
		id = id[:len(id)-1]
	}
	h.BuildID = string(id)
	h.ImageSize = int64(binary.LittleEndian.Uint64(data[80:]))
	if got, want := crc32.Checksum(data[headerSize:], crcTable), binary.LittleEndian.Uint32(data[88:]); got != want {
		return nil, h, fmt.Errorf("%w: checksum mismatch (damaged or partly written file)", ErrCacheInvalid)
	}
	var secs [numSections][]byte
	for i := range secs {
		off := binary.LittleEndian.Uint64(data[headerSize+16*i:])
		n := binary.LittleEndian.Uint64(data[headerSize+16*i+8:])
		if off%8 != 0 || off > uint64(len(data)) || n > uint64(len(data))-off {
			return nil, h, fmt.Errorf("%w: section %d out of bounds", ErrCacheInvalid, i)
		}
		secs[i] = data[off : off+n]
	}
	x = &Index{BuildID: h.BuildID, strs: secs[0]}
	if x.files, err = fromBytes[strRef](secs[1]); err != nil {
		return nil, h, err
	}
	if x.units, err = fromBytes[Unit](secs[2]); err != nil {
		return nil, h, err
	}
	if x.rows, err = fromBytes[Row](secs[3]); err != nil {
		return nil, h, err
	}
	if x.byAddr, err = fromBytes[uint32](secs[4]); err != nil {
		return nil, h, err
	}
	if x.byFile, err = fromBytes[uint32](secs[5]); err != nil {
		return nil, h, err
	}
	if x.funcs, err = fromBytes[Func](secs[6]); err != nil {
		return nil, h, err
	}
	if x.byName, err = fromBytes[uint32](secs[7]); err != nil {
		return nil, h, err
	}
	if x.inlines, err = fromBytes[Inline](secs[8]); err != nil {
		return nil, h, err
	}
	if x.inlName, err = fromBytes[uint32](secs[9]); err != nil {
		return nil, h, err
	}
	if x.ranges, err = fromBytes[[2]uint64](secs[10]); err != nil {
		return nil, h, err
	}
	if x.spans, err = fromBytes[addrSpan](secs[11]); err != nil {
		return nil, h, err
	}
	if x.structs, err = fromBytes[Struct](secs[12]); err != nil {
		return nil, h, err
	}
	if err := x.validate(); err != nil {
		return nil, h, fmt.Errorf("%w: %v", ErrCacheInvalid, err)
	}
	return x, h, nil
}

// validate checks every cross-reference, so that no query can index out
// of range on a file that passed the checksum but was written by a buggy
// or hostile writer.
func (x *Index) validate() error {
	ns := uint64(len(x.strs))
	okStr := func(r strRef) bool { return uint64(r.Off)+uint64(r.Len) <= ns }
	nf, nr, nfn, nu := uint32(len(x.files)), uint32(len(x.rows)), uint32(len(x.funcs)), uint32(len(x.units))
	okFile := func(f uint32) bool { return f < nf || f == noFile }
	okRng := func(off, n uint32) bool { return uint64(off)+uint64(n) <= uint64(len(x.ranges)) }
	for _, f := range x.files {
		if !okStr(f) {
			return errors.New("file name out of range")
		}
	}
	for _, u := range x.units {
		if !okStr(u.Name) || !okStr(u.CompDir) || u.RowStart > u.RowEnd || u.RowEnd > nr || u.Off > u.End {
			return errors.New("bad unit")
		}
	}
	// Row file ids are not checked here (4.3 M rows for a vmlinux): every
	// use goes through Index.File, which bounds-checks.
	if len(x.byAddr) > len(x.rows) || len(x.byFile) != len(x.rows) || len(x.byName) != len(x.funcs) || len(x.inlName) != len(x.inlines) {
		return errors.New("sort index sizes disagree")
	}
	// Entries of byAddr and byFile are bounds-checked where used
	// (Index.row).
	// Sort orders are not re-checked (that is random access over 100 MB
	// on every load): the checksum vouches for what the writer wrote, and
	// a misordered index gives wrong answers, never out-of-range reads.
	for _, i := range x.byName {
		if i >= nfn {
			return errors.New("function index out of range")
		}
	}
	for _, f := range x.funcs {
		if !okStr(f.Name) || f.Unit >= nu || !okFile(f.DeclFile) || !okRng(f.RngOff, f.RngN) {
			return errors.New("bad function")
		}
	}
	for _, i := range x.inlName {
		if i >= uint32(len(x.inlines)) {
			return errors.New("inline index out of range")
		}
	}
	for _, f := range x.inlines {
		if !okStr(f.Name) || f.Unit >= nu || !okFile(f.CallFile) || !okFile(f.DeclFile) || !okRng(f.RngOff, f.RngN) || (f.Caller >= nfn && f.Caller != noFile) {
			return errors.New("bad inline")
		}
	}
	for i, s := range x.spans {
		if s.Func >= nfn || (i > 0 && x.spans[i-1].Lo > s.Lo) {
			return errors.New("bad address span")
		}
	}
	for i, s := range x.structs {
		if !okStr(s.Name) || s.Unit >= nu || (i > 0 && x.str(x.structs[i-1].Name) > x.str(s.Name)) {
			return errors.New("bad struct")
		}
	}
	return nil
}

// CacheDir is where indexes are kept: $KLASY_CACHE/dwarfmap, with
// KLASY_CACHE defaulting as in scripts/lib.sh.
func CacheDir() string { return filepath.Join(cachedir.Root(), "dwarfmap") }

// cacheKey names an image's cache file: its build-id, or for an image
// without one a hash of its path, size and modification time.
func cacheKey(img *Image) string {
	if img.BuildID != "" {
		return img.BuildID
	}
	st, _ := os.Stat(img.Path)
	abs, _ := filepath.Abs(img.Path)
	var mt int64
	if st != nil {
		mt = st.ModTime().UnixNano()
	}
	sum := sha256.Sum256(fmt.Appendf(nil, "%s\x00%d\x00%d", abs, img.Size, mt))
	return "nobuildid-" + hex.EncodeToString(sum[:16])
}

// loadCache maps the cache file at p and decodes it.
func loadCache(p string) (*Index, cacheHeader, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, cacheHeader{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, cacheHeader{}, err
	}
	if st.Size() < headerSize+tableSize {
		return nil, cacheHeader{}, fmt.Errorf("%w: %d bytes is shorter than the header", ErrCacheInvalid, st.Size())
	}
	data, err := syscall.Mmap(int(f.Fd()), 0, int(st.Size()), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, cacheHeader{}, fmt.Errorf("mapping %s: %w", p, err)
	}
	x, h, err := decode(data)
	if err != nil {
		syscall.Munmap(data)
		return nil, h, err
	}
	x.release = func() error { return syscall.Munmap(data) }
	return x, h, nil
}

// writeCache writes x next to p under a temporary name and renames it
// into place, so a reader sees either no file or a complete one, and two
// concurrent builders each rename a complete file.
func writeCache(p string, x *Index, imageSize int64) error {
	dir := filepath.Dir(p)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, filepath.Base(p)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // no-op after a successful rename
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
