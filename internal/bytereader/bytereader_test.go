package bytereader

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"math/big"
	"testing"
)

func TestLEB128(t *testing.T) {
	tests := []struct {
		in   []byte
		u    uint64 // as ULEB128
		s    int64  // as SLEB128
		uErr error  // ULEB128's error (nil: u and n hold)
		sErr error
		n    int // bytes the number takes; 0 if it runs past the end or past ten bytes
	}{
		// DWARF 5, 7.6, figures 22 and 23.
		{in: []byte{0x02}, u: 2, s: 2, n: 1},
		{in: []byte{0x7f}, u: 127, s: -1, n: 1},
		{in: []byte{0x7e}, u: 126, s: -2, n: 1},
		{in: []byte{0x80, 0x01}, u: 128, s: 128, n: 2},
		{in: []byte{0x81, 0x01}, u: 129, s: 129, n: 2},
		{in: []byte{0x82, 0x01}, u: 130, s: 130, n: 2},
		{in: []byte{0xb9, 0x64}, u: 12857, s: 12857 - 1<<14, n: 2},
		{in: []byte{0xff, 0x00}, u: 127, s: 127, n: 2},
		{in: []byte{0x81, 0x7f}, u: 0x3f81, s: -127, n: 2},
		{in: []byte{0x80, 0x7f}, u: 0x3f80, s: -128, n: 2},
		{in: []byte{0xff, 0x7e}, u: 0x3f7f, s: -129, n: 2},
		{in: []byte{0x00, 0xff}, u: 0, s: 0, n: 1}, // the next byte is not read
		// Padded: a continuation byte with no bits, as assemblers emit.
		{in: []byte{0x80, 0x00}, u: 0, s: 0, n: 2},
		// The extremes take ten bytes.
		{in: []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, u: math.MaxUint64, sErr: ErrOverflow, n: 10},
		{in: []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x7f}, uErr: ErrOverflow, s: math.MinInt64, n: 10},
		{in: []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x00}, u: math.MaxInt64, s: math.MaxInt64, n: 10},
		// Longer than ten bytes, or bits past 64.
		{in: []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00}, uErr: ErrOverflow, sErr: ErrOverflow},
		{in: []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02}, uErr: ErrOverflow, sErr: ErrOverflow, n: 10},
		{in: []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01}, u: 1 << 63, sErr: ErrOverflow, n: 10},
		// Running past the end.
		{in: nil, uErr: ErrTruncated, sErr: ErrTruncated},
		{in: []byte{0x80}, uErr: ErrTruncated, sErr: ErrTruncated},
		{in: []byte{0xff, 0xff}, uErr: ErrTruncated, sErr: ErrTruncated},
	}
	for _, tt := range tests {
		r := New(tt.in)
		u := r.ULEB128()
		if !errors.Is(r.Err(), tt.uErr) || tt.uErr == nil && r.Err() != nil {
			t.Errorf("ULEB128(% x): error %v, want %v", tt.in, r.Err(), tt.uErr)
		} else if tt.uErr == nil && (u != tt.u || r.Offset() != tt.n) {
			t.Errorf("ULEB128(% x) = %d after %d bytes, want %d after %d", tt.in, u, r.Offset(), tt.u, tt.n)
		} else if tt.uErr != nil && u != 0 {
			t.Errorf("ULEB128(% x) = %d with an error, want 0", tt.in, u)
		}
		r = New(tt.in)
		s := r.SLEB128()
		if !errors.Is(r.Err(), tt.sErr) || tt.sErr == nil && r.Err() != nil {
			t.Errorf("SLEB128(% x): error %v, want %v", tt.in, r.Err(), tt.sErr)
		} else if tt.sErr == nil && (s != tt.s || r.Offset() != tt.n) {
			t.Errorf("SLEB128(% x) = %d after %d bytes, want %d after %d", tt.in, s, r.Offset(), tt.s, tt.n)
		}
		// Skipping steps over the bytes of the number, without checking
		// its bits.
		r = New(tt.in)
		r.SkipLEB128()
		if (r.Err() != nil) != (tt.n == 0) || r.Err() == nil && r.Offset() != tt.n {
			t.Errorf("SkipLEB128(% x): error %v, at %d; want %d", tt.in, r.Err(), r.Offset(), tt.n)
		}
	}
}

func TestFixedAndBytes(t *testing.T) {
	data := []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 'h', 'i', 0, 'x'}
	r := New(data)
	type step struct {
		name string
		read func() uint64
		want uint64
	}
	for _, s := range []step{
		{"U8", func() uint64 { return uint64(r.U8()) }, 0x01},
		{"U16", func() uint64 { return uint64(r.U16()) }, 0x0302},
		{"U32", func() uint64 { return uint64(r.U32()) }, 0x07060504},
		{"Uint(3)", func() uint64 { return r.Uint(3) }, 0x0a0908},
		{"U64", func() uint64 { return r.U64() }, 0x6968100f0e0d0c0b},
		{"Uint(0)", func() uint64 { return r.Uint(0) }, 0},
	} {
		if got := s.read(); got != s.want || r.Err() != nil {
			t.Fatalf("%s = %#x, %v; want %#x", s.name, got, r.Err(), s.want)
		}
	}
	r.Seek(16)
	if s := r.CString(); string(s) != "hi" || r.Offset() != 19 || r.Len() != 1 {
		t.Fatalf("CString = %q, at %d with %d left", s, r.Offset(), r.Len())
	}
	r.Seek(2)
	if p := r.Bytes(3); !bytes.Equal(p, []byte{3, 4, 5}) || cap(p) != 3 {
		t.Fatalf("Bytes(3) = %v (cap %d)", p, cap(p))
	}
	r.Skip(14)
	if r.Len() != 1 || r.Err() != nil {
		t.Fatalf("after Skip(14): %d left, %v", r.Len(), r.Err())
	}
	if s := r.CString(); s != nil || !errors.Is(r.Err(), ErrTruncated) {
		t.Fatalf("CString without a NUL = %q, %v", s, r.Err())
	}
}

// TestSticky: after the first problem every read returns zero and the
// problem stays the first one.
func TestSticky(t *testing.T) {
	for _, tt := range []struct {
		name  string
		first func(r *Reader)
		what  string
	}{
		{"U32", func(r *Reader) { r.U32() }, "4-byte integer at byte 0: truncated"},
		{"Bytes", func(r *Reader) { r.Bytes(9) }, "9 bytes at byte 0: truncated"},
		{"Skip", func(r *Reader) { r.Skip(1 << 62) }, "4611686018427387904 bytes at byte 0: truncated"},
		{"Seek", func(r *Reader) { r.Seek(4) }, "seek at byte 4: truncated"},
		{"Uint(9)", func(r *Reader) { r.Uint(9) }, "9-byte integer at byte 0: does not fit in 64 bits"},
		{"Fail", func(r *Reader) { r.Fail(errors.New("count out of range")) }, "count out of range"},
	} {
		r := New([]byte{1, 0, 0})
		tt.first(r)
		first := r.Err()
		if first == nil || first.Error() != tt.what {
			t.Errorf("%s: error %v, want %q", tt.name, first, tt.what)
			continue
		}
		r.Seek(0)
		if v := r.U8(); v != 0 || r.Err() != first || r.Len() != 0 {
			t.Errorf("%s: U8 after the error = %d, error %v, %d left", tt.name, v, r.Err(), r.Len())
		}
		if v := r.ULEB128(); v != 0 || r.Err() != first {
			t.Errorf("%s: ULEB128 after the error = %d, error %v", tt.name, v, r.Err())
		}
	}
}

// FuzzLEB128 checks the readers against encoding/binary (unsigned and
// zig-zag varints, the agent's payload encoding) and against a decoding
// with unbounded integers (signed).
func FuzzLEB128(f *testing.F) {
	for _, seed := range [][]byte{{0x00}, {0x7f}, {0x80, 0x01}, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, {0x80, 0x7f}} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		r := New(in)
		u := r.ULEB128()
		want, n := binary.Uvarint(in)
		if n <= 0 && r.Err() == nil || n > 0 && (r.Err() != nil || u != want || r.Offset() != n) {
			t.Fatalf("ULEB128(% x) = %d after %d bytes, %v; binary.Uvarint: %d, %d", in, u, r.Offset(), r.Err(), want, n)
		}
		r = New(in)
		v := r.Varint()
		wantV, n := binary.Varint(in)
		if n <= 0 && r.Err() == nil || n > 0 && (r.Err() != nil || v != wantV || r.Offset() != n) {
			t.Fatalf("Varint(% x) = %d after %d bytes, %v; binary.Varint: %d, %d", in, v, r.Offset(), r.Err(), wantV, n)
		}
		r = New(in)
		s := r.SLEB128()
		ref, n, ok := bigSLEB128(in)
		fits := ok && ref.IsInt64() && n <= MaxLEB128Len
		switch {
		case !ok && len(in) < MaxLEB128Len && !errors.Is(r.Err(), ErrTruncated):
			t.Fatalf("SLEB128(% x): %v, want truncated", in, r.Err())
		case !ok && len(in) >= MaxLEB128Len && !errors.Is(r.Err(), ErrOverflow):
			// Ten bytes that all continue are too long, whatever follows.
			t.Fatalf("SLEB128(% x): %v, want an overflow", in, r.Err())
		case ok && !fits && !errors.Is(r.Err(), ErrOverflow):
			t.Fatalf("SLEB128(% x) = %d, %v; the number is %v in %d bytes: want an overflow", in, s, r.Err(), ref, n)
		case fits && (r.Err() != nil || s != ref.Int64() || r.Offset() != n):
			t.Fatalf("SLEB128(% x) = %d after %d bytes, %v; want %v after %d", in, s, r.Offset(), r.Err(), ref, n)
		}
	})
}

// bigSLEB128 decodes a signed LEB128 number of any length; ok is false
// if it runs past the end.
func bigSLEB128(in []byte) (v *big.Int, n int, ok bool) {
	v = new(big.Int)
	for i, c := range in {
		v.Or(v, new(big.Int).Lsh(big.NewInt(int64(c&0x7f)), uint(7*i)))
		if c < 0x80 {
			if c&0x40 != 0 {
				v.Sub(v, new(big.Int).Lsh(big.NewInt(1), uint(7*(i+1))))
			}
			return v, i + 1, true
		}
	}
	return nil, 0, false
}

// FuzzReader runs a program of reads, taken from the input's first bytes,
// over the rest: no panic, no read past the end, and a first error that
// sticks.
func FuzzReader(f *testing.F) {
	f.Add([]byte{2, 0, 1, 2, 3, 4, 5, 6, 7, 8, 'a', 0}) // one of each kind, over data that fits
	f.Add([]byte{0})
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) == 0 {
			return
		}
		nops := min(int(in[0]), len(in)-1)
		ops, data := in[1:1+nops], in[1+nops:]
		r := New(data)
		var first error
		for _, op := range ops {
			before := r.Offset()
			switch op % 13 {
			case 0:
				r.U8()
			case 1:
				r.U16()
			case 2:
				r.U32()
			case 3:
				r.U64()
			case 4:
				r.Uint(int(op/13) % 10)
			case 5:
				r.ULEB128()
			case 6:
				r.SLEB128()
			case 7:
				r.Varint()
			case 8:
				r.SkipLEB128()
			case 9:
				r.CString()
			case 10:
				r.Bytes(uint64(op / 13))
			case 11:
				r.Skip(uint64(op / 13))
			case 12:
				r.Seek(int(op/13) - 2)
			}
			if r.Offset() < 0 || r.Offset() > len(data) || r.Len() != len(data)-r.Offset() {
				t.Fatalf("op %d: offset %d of %d", op, r.Offset(), len(data))
			}
			if first != nil && (r.Err() != first || r.Offset() != len(data)) {
				t.Fatalf("op %d after error %v: error %v, offset %d", op, first, r.Err(), r.Offset())
			}
			if first == nil && r.Err() != nil {
				first = r.Err()
				var e *Error
				if !errors.As(first, &e) || e.Off != before && op%13 != 12 {
					t.Fatalf("op %d at %d: error %v does not say where", op, before, first)
				}
			}
		}
	})
}
