// Package bytereader reads the binary encodings klasy's parsers share:
// bytes, little-endian fixed-width integers, LEB128 numbers (DWARF's, the
// plugin's .debug_klasy records and the agent's payloads, whose Go varints
// are the same encoding), NUL-terminated strings and runs of bytes.
//
// A Reader never panics and never reads past its slice. The first problem
// (a value running past the end, a LEB128 number that does not fit in 64
// bits) sticks, as bufio.Scanner's does: every later read returns a zero
// value, and the caller checks Err once after a group of reads.
//
// LEB128 numbers take at most ten bytes, as Go's encoding/binary decodes
// them: the tenth byte may only carry bit 63 (or, signed, the sign), and
// anything longer is ErrOverflow. delve's dwarf/leb128 is not used
// because it panics on truncated input.
package bytereader

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
)

// Errors that an *Error wraps; test for them with errors.Is.
var (
	// ErrTruncated: the value runs past the end of the data.
	ErrTruncated = errors.New("truncated")
	// ErrOverflow: a LEB128 number does not fit in 64 bits.
	ErrOverflow = errors.New("does not fit in 64 bits")
)

// MaxLEB128Len is the longest LEB128 encoding of a 64-bit number.
const MaxLEB128Len = 10

// Error is the first problem a Reader met.
type Error struct {
	Off  int    // offset of the value in the data
	What string // the value: "LEB128 number", "4-byte integer", "string", "12 bytes"
	Err  error  // ErrTruncated or ErrOverflow
}

func (e *Error) Error() string { return fmt.Sprintf("%s at byte %d: %v", e.What, e.Off, e.Err) }

func (e *Error) Unwrap() error { return e.Err }

// Reader reads from a byte slice. The zero Reader reads nothing.
type Reader struct {
	b   []byte
	off int // next byte to read; len(b) once err is set
	err error
}

// New returns a Reader of b from its first byte.
func New(b []byte) *Reader { return &Reader{b: b} }

// Reset makes r read b from its first byte, with no error.
func (r *Reader) Reset(b []byte) { *r = Reader{b: b} }

// Err returns the first problem met, or nil.
func (r *Reader) Err() error { return r.err }

// Fail records err as the reader's problem, unless it has one already,
// and ends the data: later reads return zero values. Callers use it for
// errors of their own (a count out of range), so that one Err check
// covers both.
func (r *Reader) Fail(err error) {
	if r.err == nil {
		r.err = err
	}
	r.off = len(r.b)
}

// fail records a problem with the value at off.
func (r *Reader) fail(off int, what string, err error) {
	r.Fail(&Error{Off: off, What: what, Err: err})
}

// Offset is the offset of the next byte to read.
func (r *Reader) Offset() int { return r.off }

// Len is the number of bytes left to read.
func (r *Reader) Len() int { return len(r.b) - r.off }

// Seek moves to offset off of the data (0 <= off <= its length). It does
// nothing after a problem.
func (r *Reader) Seek(off int) {
	if r.err != nil {
		return
	}
	if off < 0 || off > len(r.b) {
		r.fail(off, "seek", ErrTruncated)
		return
	}
	r.off = off
}

// U8 reads a byte.
func (r *Reader) U8() uint8 {
	if r.off >= len(r.b) {
		r.fail(r.off, "1-byte integer", ErrTruncated)
		return 0
	}
	v := r.b[r.off]
	r.off++
	return v
}

// U16 reads a little-endian 16-bit integer.
func (r *Reader) U16() uint16 {
	if len(r.b)-r.off < 2 {
		r.fail(r.off, "2-byte integer", ErrTruncated)
		return 0
	}
	v := binary.LittleEndian.Uint16(r.b[r.off:])
	r.off += 2
	return v
}

// U32 reads a little-endian 32-bit integer.
func (r *Reader) U32() uint32 {
	if len(r.b)-r.off < 4 {
		r.fail(r.off, "4-byte integer", ErrTruncated)
		return 0
	}
	v := binary.LittleEndian.Uint32(r.b[r.off:])
	r.off += 4
	return v
}

// U64 reads a little-endian 64-bit integer.
func (r *Reader) U64() uint64 {
	if len(r.b)-r.off < 8 {
		r.fail(r.off, "8-byte integer", ErrTruncated)
		return 0
	}
	v := binary.LittleEndian.Uint64(r.b[r.off:])
	r.off += 8
	return v
}

// Uint reads a little-endian unsigned integer of n bytes, 0 <= n <= 8
// (DWARF's address and offset sizes, its 3-byte DW_FORM_strx3).
func (r *Reader) Uint(n int) uint64 {
	switch n {
	case 1:
		return uint64(r.U8())
	case 2:
		return uint64(r.U16())
	case 4:
		return uint64(r.U32())
	case 8:
		return r.U64()
	}
	if n < 0 || n > 8 {
		r.fail(r.off, fmt.Sprintf("%d-byte integer", n), ErrOverflow)
		return 0
	}
	if len(r.b)-r.off < n {
		r.fail(r.off, fmt.Sprintf("%d-byte integer", n), ErrTruncated)
		return 0
	}
	var v uint64
	for i := n - 1; i >= 0; i-- {
		v = v<<8 | uint64(r.b[r.off+i])
	}
	r.off += n
	return v
}

// ULEB128 reads an unsigned LEB128 number (a Go unsigned varint).
func (r *Reader) ULEB128() uint64 {
	// One byte is the common case (DWARF abbreviation codes, small
	// counts).
	if r.off < len(r.b) {
		if c := r.b[r.off]; c < 0x80 {
			r.off++
			return uint64(c)
		}
	}
	return r.uleb128()
}

func (r *Reader) uleb128() uint64 {
	var v uint64
	for i, shift := r.off, uint(0); i < len(r.b); i, shift = i+1, shift+7 {
		c := r.b[i]
		if shift == 7*(MaxLEB128Len-1) && c > 1 {
			r.fail(r.off, "LEB128 number", ErrOverflow)
			return 0
		}
		v |= uint64(c&0x7f) << shift
		if c < 0x80 {
			r.off = i + 1
			return v
		}
	}
	r.fail(r.off, "LEB128 number", ErrTruncated)
	return 0
}

// SLEB128 reads a signed LEB128 number.
func (r *Reader) SLEB128() int64 {
	if r.off < len(r.b) {
		if c := r.b[r.off]; c < 0x80 {
			r.off++
			return int64(int8(c<<1)) >> 1 // bit 6 is the sign
		}
	}
	return r.sleb128()
}

func (r *Reader) sleb128() int64 {
	var v int64
	for i, shift := r.off, uint(0); i < len(r.b); i, shift = i+1, shift+7 {
		c := r.b[i]
		// The tenth byte holds bit 63, the sign: the rest of it must
		// repeat the sign, and it must be the last.
		if shift == 7*(MaxLEB128Len-1) && c != 0 && c != 0x7f {
			r.fail(r.off, "LEB128 number", ErrOverflow)
			return 0
		}
		v |= int64(c&0x7f) << shift
		if c < 0x80 {
			if shift += 7; shift < 64 && c&0x40 != 0 {
				v |= -1 << shift
			}
			r.off = i + 1
			return v
		}
	}
	r.fail(r.off, "LEB128 number", ErrTruncated)
	return 0
}

// Varint reads a Go signed varint: the zig-zag encoding of the number,
// as an unsigned LEB128 (encoding/binary's AppendVarint).
func (r *Reader) Varint() int64 {
	u := r.ULEB128()
	v := int64(u >> 1)
	if u&1 != 0 {
		v = ^v
	}
	return v
}

// SkipLEB128 steps over a LEB128 number, signed or not, without decoding
// it. A number running past the end or longer than ten bytes is an error;
// the bits of its tenth byte are not checked.
func (r *Reader) SkipLEB128() {
	if r.off < len(r.b) && r.b[r.off] < 0x80 {
		r.off++
		return
	}
	for i := r.off; i < len(r.b); i++ {
		if i-r.off == MaxLEB128Len-1 && r.b[i] >= 0x80 {
			r.fail(r.off, "LEB128 number", ErrOverflow)
			return
		}
		if r.b[i] < 0x80 {
			r.off = i + 1
			return
		}
	}
	r.fail(r.off, "LEB128 number", ErrTruncated)
}

// CString reads a NUL-terminated string and returns it without the NUL,
// as a slice of the data.
func (r *Reader) CString() []byte {
	i := bytes.IndexByte(r.b[r.off:], 0)
	if i < 0 {
		r.fail(r.off, "string", ErrTruncated)
		return nil
	}
	s := r.b[r.off : r.off+i : r.off+i]
	r.off += i + 1
	return s
}

// Bytes reads n bytes and returns them as a slice of the data (its
// capacity ends with them, so appending to it copies).
func (r *Reader) Bytes(n uint64) []byte {
	if n > uint64(len(r.b)-r.off) {
		r.short(n)
		return nil
	}
	end := r.off + int(n)
	p := r.b[r.off:end:end]
	r.off = end
	return p
}

// Skip steps over n bytes.
func (r *Reader) Skip(n uint64) {
	if n > uint64(len(r.b)-r.off) {
		r.short(n)
		return
	}
	r.off += int(n)
}

// short fails a run of n bytes that goes past the end. Out of line, it
// leaves Skip small enough to inline.
func (r *Reader) short(n uint64) {
	r.fail(r.off, fmt.Sprintf("%d bytes", n), ErrTruncated)
}
