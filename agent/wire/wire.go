package wire

// The wire codec: frames and the fields inside their payloads. Nothing in
// this file knows what a request means; doc.go describes the format.

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/klasy/klasy/internal/bytereader"
)

const (
	// Version is the protocol version carried in every frame header.
	Version = 1
	// HeaderSize is the fixed size of a frame header in bytes.
	HeaderSize = 24
	// MaxPayload is the largest payload a frame may carry. A header that
	// announces more is rejected before any of the payload is buffered.
	MaxPayload = 16 << 20
)

// FlagDeflate in a header says the payload on the wire is a raw DEFLATE
// stream of the real payload (whose size is also bounded by MaxPayload).
// The checksums cover the bytes on the wire.
const FlagDeflate uint16 = 1

// compressMin is the smallest payload worth compressing.
const compressMin = 1024

// magic starts every frame. Its first byte is not ASCII so console text
// printed onto the line before the agent starts never looks like a frame.
var magic = [4]byte{0xA9, 'K', 'L', 'S'}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// MsgType says what a frame carries.
type MsgType uint8

// Requests (client to agent) are below 0x80, responses (agent to client)
// at or above it.
const (
	MsgPing         MsgType = 0x01
	MsgRun          MsgType = 0x02
	MsgWriteFile    MsgType = 0x03
	MsgReadFile     MsgType = 0x04
	MsgLoadModule   MsgType = 0x05
	MsgUnloadModule MsgType = 0x06
	MsgModules      MsgType = 0x07
	MsgStream       MsgType = 0x08
	MsgCancel       MsgType = 0x09 // stop the request with this id
	MsgStreamAck    MsgType = 0x0A // the client consumed stream or exec output chunks: more may be sent
	MsgExec         MsgType = 0x0B // run a command with its input and output streamed
	MsgStdin        MsgType = 0x0C // a chunk of an exec's standard input; empty: end of input
	MsgClock        MsgType = 0x0D // read the guest's CLOCK_MONOTONIC

	MsgResult     MsgType = 0x80 // success; payload depends on the request
	MsgError      MsgType = 0x81 // failure; payload is an encoded RemoteError
	MsgStreamData MsgType = 0x82 // one record of a stream
	MsgExecOutput MsgType = 0x83 // a chunk of an exec's standard output or error
	MsgStdinAck   MsgType = 0x84 // the command took stdin chunks: more may be sent
)

var msgNames = map[MsgType]string{
	MsgPing: "ping", MsgRun: "run", MsgWriteFile: "write-file", MsgReadFile: "read-file",
	MsgLoadModule: "load-module", MsgUnloadModule: "unload-module", MsgModules: "modules",
	MsgStream: "stream", MsgCancel: "cancel", MsgStreamAck: "stream-ack",
	MsgExec: "exec", MsgStdin: "stdin", MsgClock: "clock",
	MsgResult: "result", MsgError: "error", MsgStreamData: "stream-data",
	MsgExecOutput: "exec-output", MsgStdinAck: "stdin-ack",
}

// Continuation reports whether a client's frame of type t belongs to a
// request already in flight (rather than starting one).
func (t MsgType) Continuation() bool {
	return t == MsgCancel || t == MsgStreamAck || t == MsgStdin
}

// Final reports whether an agent's frame of type t is a request's last.
func (t MsgType) Final() bool { return t == MsgResult || t == MsgError }

func (t MsgType) String() string {
	if n, ok := msgNames[t]; ok {
		return n
	}
	return fmt.Sprintf("type-0x%02x", uint8(t))
}

// Frame is one decoded message.
type Frame struct {
	Type    MsgType
	ID      uint32
	Payload []byte
}

// Errors a FrameError wraps; test for them with errors.Is.
var (
	ErrCorruptFrame   = errors.New("corrupt frame")
	ErrFrameTooLarge  = errors.New("frame too large")
	ErrTruncatedFrame = errors.New("truncated frame")
	ErrBadVersion     = errors.New("unsupported protocol version")
)

// FrameError reports a frame that was detected as damaged and not
// delivered. HasID is true when the header was intact, so ID names the
// request the damaged frame belonged to.
type FrameError struct {
	Err    error // one of the Err*Frame values above
	HasID  bool
	ID     uint32
	Type   MsgType
	Detail string
}

func (e *FrameError) Error() string {
	s := e.Err.Error()
	if e.HasID {
		s += fmt.Sprintf(" (%s, id %d)", e.Type, e.ID)
	}
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

func (e *FrameError) Unwrap() error { return e.Err }

// Is lets errors.Is(err, io.ErrUnexpectedEOF) match a truncated frame.
func (e *FrameError) Is(target error) bool {
	return target == io.ErrUnexpectedEOF && e.Err == ErrTruncatedFrame
}

// AppendFrame appends the encoding of f to dst.
func AppendFrame(dst []byte, f Frame) ([]byte, error) {
	if len(f.Payload) > MaxPayload {
		return dst, fmt.Errorf("encoding %s frame: %w: payload %d bytes, limit %d", f.Type, ErrFrameTooLarge, len(f.Payload), MaxPayload)
	}
	return AppendFrameFlags(dst, f, 0), nil
}

// AppendFrameCompressed is AppendFrame with the payload DEFLATE-compressed
// when that saves at least an eighth of it. The host compresses what it
// sends: a serial line into a guest under TCG carries only tens of KB/s,
// and a kernel module shrinks about threefold.
func AppendFrameCompressed(dst []byte, f Frame) ([]byte, error) {
	if len(f.Payload) > MaxPayload {
		return dst, fmt.Errorf("encoding %s frame: %w: payload %d bytes, limit %d", f.Type, ErrFrameTooLarge, len(f.Payload), MaxPayload)
	}
	if len(f.Payload) >= compressMin {
		var buf bytes.Buffer
		zw, _ := flate.NewWriter(&buf, flate.BestSpeed) // only fails for a bad level
		zw.Write(f.Payload)
		zw.Close()
		if buf.Len() <= len(f.Payload)-len(f.Payload)/8 {
			return AppendFrameFlags(dst, Frame{Type: f.Type, ID: f.ID, Payload: buf.Bytes()}, FlagDeflate), nil
		}
	}
	return AppendFrameFlags(dst, f, 0), nil
}

// AppendFrameFlags appends f with the header flags given and its payload
// as it is: compressed already when flags has FlagDeflate. It is for a
// relay that forwards frames as a Raw reader returned them (the mux), so
// it checks no limit: the frame has passed the reader's.
func AppendFrameFlags(dst []byte, f Frame, flags uint16) []byte {
	var h [HeaderSize]byte
	copy(h[0:4], magic[:])
	h[4] = Version
	h[5] = byte(f.Type)
	binary.BigEndian.PutUint16(h[6:8], flags)
	binary.BigEndian.PutUint32(h[8:12], f.ID)
	binary.BigEndian.PutUint32(h[12:16], uint32(len(f.Payload)))
	binary.BigEndian.PutUint32(h[16:20], crc32.Checksum(f.Payload, castagnoli))
	binary.BigEndian.PutUint32(h[20:24], crc32.Checksum(h[:20], castagnoli))
	dst = append(dst, h[:]...)
	return append(dst, f.Payload...)
}

// FrameReader decodes frames from a byte stream that may carry garbage
// between frames (a serial line). It skips bytes until the next magic and
// accepts a frame only if its header CRC, version, length limit and
// payload CRC all check out.
type FrameReader struct {
	r    io.Reader
	max  int
	buf  []byte // buf[off:] holds bytes read but not yet consumed
	off  int
	skip int64 // payload bytes of an oversized frame still to discard

	// Skipped counts garbage bytes discarded while looking for a magic.
	Skipped int64

	// Raw leaves compressed payloads as they came (Flags says so), for
	// a relay such as the mux, which forwards frames without looking
	// inside them.
	Raw bool

	lastFlags uint16 // flags of the last frame returned
}

// NewFrameReader returns a reader that rejects payloads above max bytes
// (MaxPayload if max <= 0 or above it).
func NewFrameReader(r io.Reader, max int) *FrameReader {
	if max <= 0 || max > MaxPayload {
		max = MaxPayload
	}
	return &FrameReader{r: r, max: max}
}

// Flags returns the header flags of the last frame ReadFrame returned:
// FlagDeflate when its payload came compressed (and still is, if Raw).
func (fr *FrameReader) Flags() uint16 { return fr.lastFlags }

func (fr *FrameReader) avail() []byte { return fr.buf[fr.off:] }

// fill reads until at least n unconsumed bytes are buffered.
func (fr *FrameReader) fill(n int) error {
	for len(fr.buf)-fr.off < n {
		if fr.off > 0 && (fr.off >= len(fr.buf)/2 || cap(fr.buf)-len(fr.buf) < 4096) {
			m := copy(fr.buf, fr.buf[fr.off:])
			fr.buf = fr.buf[:m]
			fr.off = 0
		}
		want := n - len(fr.avail())
		if want < 32<<10 {
			want = 32 << 10
		}
		if cap(fr.buf)-len(fr.buf) < want {
			nb := make([]byte, len(fr.buf), len(fr.buf)+want)
			copy(nb, fr.buf)
			fr.buf = nb
		}
		k, err := fr.r.Read(fr.buf[len(fr.buf):cap(fr.buf)])
		fr.buf = fr.buf[:len(fr.buf)+k]
		if err != nil {
			if len(fr.buf)-fr.off >= n {
				return nil
			}
			return err
		}
	}
	return nil
}

// discard drops n buffered bytes (n <= len(avail)).
func (fr *FrameReader) discard(n int) {
	fr.off += n
	if fr.off == len(fr.buf) {
		fr.buf = fr.buf[:0]
		fr.off = 0
		if cap(fr.buf) > 1<<20 {
			// Do not hold a large frame's buffer in a small guest.
			fr.buf = nil
		}
	}
}

// ReadFrame returns the next intact frame. It returns io.EOF when the
// stream ends between frames (garbage without a magic counts as between
// frames), a *FrameError for a frame it detected as damaged (the reader
// stays usable: the next call continues after it), and other read errors
// as they come.
func (fr *FrameReader) ReadFrame() (Frame, error) {
	for fr.skip > 0 {
		if len(fr.avail()) == 0 {
			if err := fr.fill(1); err != nil {
				return Frame{}, err
			}
		}
		n := len(fr.avail())
		if int64(n) > fr.skip {
			n = int(fr.skip)
		}
		fr.discard(n)
		fr.skip -= int64(n)
	}
	// Find a magic: drop everything before it, keeping a possible
	// partial magic at the end of the buffer.
	for {
		a := fr.avail()
		i := indexMagic(a)
		if i >= 0 {
			fr.discard(i)
			fr.Skipped += int64(i)
			break
		}
		keep := partialMagicSuffix(a)
		fr.Skipped += int64(len(a) - keep)
		fr.discard(len(a) - keep)
		if err := fr.fill(len(fr.avail()) + 1); err != nil {
			if err == io.EOF {
				if k := len(fr.avail()); k > 0 {
					fr.Skipped += int64(k)
					fr.discard(k)
				}
			}
			return Frame{}, err
		}
	}
	if err := fr.fill(HeaderSize); err != nil {
		return Frame{}, fr.truncated(err, nil, len(fr.avail()), HeaderSize)
	}
	h := fr.avail()[:HeaderSize]
	if crc32.Checksum(h[:20], castagnoli) != binary.BigEndian.Uint32(h[20:24]) {
		// Not a header, or a damaged one: resynchronise on the next magic
		// after this one.
		fr.discard(1)
		fr.Skipped++
		return Frame{}, &FrameError{Err: ErrCorruptFrame, Detail: "header checksum mismatch"}
	}
	typ, id := MsgType(h[5]), binary.BigEndian.Uint32(h[8:12])
	length := int64(binary.BigEndian.Uint32(h[12:16]))
	pcrc := binary.BigEndian.Uint32(h[16:20])
	version, flags := h[4], binary.BigEndian.Uint16(h[6:8])
	if length > int64(fr.max) {
		// The header is authentic, so its length is too: skip exactly
		// the payload without buffering it.
		fr.discard(HeaderSize)
		fr.skip = length
		return Frame{}, &FrameError{Err: ErrFrameTooLarge, HasID: true, ID: id, Type: typ,
			Detail: fmt.Sprintf("payload %d bytes, limit %d", length, fr.max)}
	}
	total := HeaderSize + int(length)
	if err := fr.fill(total); err != nil {
		fe := fr.truncated(err, h, len(fr.avail()), total)
		return Frame{}, fe
	}
	frame := fr.avail()[:total]
	payload := frame[HeaderSize:]
	if crc32.Checksum(payload, castagnoli) != pcrc {
		fr.discard(total)
		return Frame{}, &FrameError{Err: ErrCorruptFrame, HasID: true, ID: id, Type: typ, Detail: "payload checksum mismatch"}
	}
	if version != Version || flags&^FlagDeflate != 0 {
		fr.discard(total)
		return Frame{}, &FrameError{Err: ErrBadVersion, HasID: true, ID: id, Type: typ,
			Detail: fmt.Sprintf("version %d flags %#x, this side speaks version %d", version, flags, Version)}
	}
	f := Frame{Type: typ, ID: id}
	fr.lastFlags = flags
	if flags&FlagDeflate != 0 && !fr.Raw {
		p, err := fr.inflate(payload)
		fr.discard(total)
		if err != nil {
			err.HasID, err.ID, err.Type = true, id, typ
			return Frame{}, err
		}
		f.Payload = p
	} else {
		f.Payload = append([]byte(nil), payload...)
		fr.discard(total)
	}
	return f, nil
}

// inflate decompresses a payload, refusing to produce more than the
// payload limit (a small frame must not expand into a huge one).
func (fr *FrameReader) inflate(z []byte) ([]byte, *FrameError) {
	zr := flate.NewReader(bytes.NewReader(z))
	defer zr.Close()
	var out bytes.Buffer
	n, err := io.Copy(&out, io.LimitReader(zr, int64(fr.max)+1))
	if err != nil {
		return nil, &FrameError{Err: ErrCorruptFrame, Detail: "inflating payload: " + err.Error()}
	}
	if n > int64(fr.max) {
		return nil, &FrameError{Err: ErrFrameTooLarge, Detail: fmt.Sprintf("payload inflates past the limit of %d bytes", fr.max)}
	}
	return out.Bytes(), nil
}

// truncated turns an end of stream inside a frame into a FrameError;
// other read errors pass through.
func (fr *FrameReader) truncated(err error, h []byte, got, want int) error {
	if err != io.EOF && err != io.ErrUnexpectedEOF {
		return err
	}
	fe := &FrameError{Err: ErrTruncatedFrame, Detail: fmt.Sprintf("stream ended after %d of %d bytes", got, want)}
	if h != nil {
		fe.HasID, fe.ID, fe.Type = true, binary.BigEndian.Uint32(h[8:12]), MsgType(h[5])
	}
	fr.discard(len(fr.avail()))
	return fe
}

func indexMagic(b []byte) int {
	for i := 0; i+len(magic) <= len(b); i++ {
		if b[i] == magic[0] && b[i+1] == magic[1] && b[i+2] == magic[2] && b[i+3] == magic[3] {
			return i
		}
	}
	return -1
}

// partialMagicSuffix returns how many bytes at the end of b could be the
// start of a magic completed by bytes not yet read.
func partialMagicSuffix(b []byte) int {
	for k := len(magic) - 1; k > 0; k-- {
		if len(b) >= k && string(b[len(b)-k:]) == string(magic[:k]) {
			return k
		}
	}
	return 0
}

// enc builds a payload: unsigned and signed varints and length-prefixed
// byte strings, in a fixed order per message type.
type enc struct{ b []byte }

func (e *enc) uint(v uint64)  { e.b = binary.AppendUvarint(e.b, v) }
func (e *enc) int(v int64)    { e.b = binary.AppendVarint(e.b, v) }
func (e *enc) bytes(p []byte) { e.uint(uint64(len(p))); e.b = append(e.b, p...) }
func (e *enc) str(s string)   { e.uint(uint64(len(s))); e.b = append(e.b, s...) }

// dec reads a payload built by enc. The first problem sticks in err and
// later reads return zero values, so callers check once at the end. The
// numbers are read by bytereader, which decodes Go's varints.
type dec struct {
	b   []byte
	err error
}

// ErrShortPayload is wrapped by a decoder's error for a payload that ends
// before its last field: an intact frame whose payload is not of the
// shape its type says.
var ErrShortPayload = errors.New("payload truncated")

func (d *dec) fail(err error) {
	if d.err == nil {
		d.err = err
	}
}

// read runs f on a reader of what is left, then moves past what f read.
func (d *dec) read(f func(r *bytereader.Reader)) {
	if d.err != nil {
		return
	}
	r := bytereader.New(d.b)
	f(r)
	if r.Err() != nil {
		d.fail(ErrShortPayload)
		return
	}
	d.b = d.b[r.Offset():]
}

func (d *dec) uint() (v uint64) {
	d.read(func(r *bytereader.Reader) { v = r.ULEB128() })
	return v
}

func (d *dec) int() (v int64) {
	d.read(func(r *bytereader.Reader) { v = r.Varint() })
	return v
}

func (d *dec) bytes() (p []byte) {
	n := d.uint()
	if d.err == nil && n > uint64(len(d.b)) {
		d.fail(fmt.Errorf("%w: field of %d bytes, %d left", ErrShortPayload, n, len(d.b)))
	}
	d.read(func(r *bytereader.Reader) { p = r.Bytes(n) })
	return p
}

func (d *dec) str() string { return string(d.bytes()) }

// done reports the first decoding error, or trailing bytes.
func (d *dec) done() error {
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%d unexpected bytes after the last field", len(d.b))
	}
	return d.err
}
