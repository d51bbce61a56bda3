// Package records reads what klasy's runtime module shows in debugfs
// (see weaver/runtime): the records file, whole records of what advice
// stored (Decode), and the status file, the runtime's aspects and hooks
// with their hits, misses and lost records (ParseStatus). It touches no
// kernel: callers hand it the bytes they read.
package records

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
)

// The layout of struct klasy_record in klasy_rt.h: a 48-byte header, then
// nvals little-endian u64 values. weaver/runtime's tests check it against
// the header compiled by the kernel's own build.
const (
	HeaderSize = 48
	MaxValues  = 16 // KLASY_MAX_VALUES
	MaxSize    = HeaderSize + 8*MaxValues
	commLen    = 16
)

// Field is one member of the record header: its name in klasy_rt.h,
// offset and size in bytes.
type Field struct {
	Name         string
	Offset, Size int
}

const (
	offTime    = 0
	offAspect  = 8
	offHook    = 12
	offAdvice  = 14
	offPID     = 16
	offCPU     = 20
	offNvals   = 22
	offDropped = 23
	offComm    = 24
	offFlow    = 40
	offTyped   = 44
	offVals    = 48
)

// Fields returns the header's layout as Decode reads it, in member order.
func Fields() []Field {
	return []Field{
		{"time_ns", offTime, 8},
		{"aspect", offAspect, 4},
		{"hook", offHook, 2},
		{"advice", offAdvice, 2},
		{"pid", offPID, 4},
		{"cpu", offCPU, 2},
		{"nvals", offNvals, 1},
		{"dropped", offDropped, 1},
		{"comm", offComm, commLen},
		{"flow", offFlow, 4},
		{"typed", offTyped, 4},
		{"vals", offVals, 0},
	}
}

// Record is what one advice stored during one hit of one hook.
type Record struct {
	TimeNS  uint64 // ktime_get_mono_fast_ns() at the hit (CLOCK_MONOTONIC)
	Aspect  uint32 // the aspect's id in status
	Hook    uint16 // the hook's index within its aspect
	Advice  uint16 // the advice's number, 1-based in the aspect file
	PID     uint32 // the task that hit the hook (its thread id)
	CPU     uint16
	Dropped uint8 // values stored past MaxValues, saturating at 255
	Comm    string
	Flow    int32 // the flow ID the advice ran for (xflow), 0 for none
	// Typed marks the values that start a typed blob (Items).
	Typed  uint32
	Values []uint64 // as stored: a typed blob takes several
}

// Size returns the length of r's encoding.
func (r Record) Size() int { return HeaderSize + 8*len(r.Values) }

// ErrTruncated is the error for bytes that end inside a record.
var ErrTruncated = errors.New("truncated record")

// FormatError is a record that the runtime cannot have written.
type FormatError struct {
	Offset int // of the record in the bytes given to Decode
	Msg    string
}

func (e *FormatError) Error() string {
	return fmt.Sprintf("malformed record at byte %d: %s", e.Offset, e.Msg)
}

// DecodeRecord decodes the record at the start of data and returns it
// with its length.
func DecodeRecord(data []byte) (Record, int, error) {
	if len(data) < HeaderSize {
		return Record{}, 0, fmt.Errorf("%d bytes left for a %d-byte record header: %w", len(data), HeaderSize, ErrTruncated)
	}
	le := binary.LittleEndian
	r := Record{
		TimeNS:  le.Uint64(data[offTime:]),
		Aspect:  le.Uint32(data[offAspect:]),
		Hook:    le.Uint16(data[offHook:]),
		Advice:  le.Uint16(data[offAdvice:]),
		PID:     le.Uint32(data[offPID:]),
		CPU:     le.Uint16(data[offCPU:]),
		Dropped: data[offDropped],
		Flow:    int32(le.Uint32(data[offFlow:])),
	}
	n := int(data[offNvals])
	if n > MaxValues {
		return Record{}, 0, &FormatError{Msg: fmt.Sprintf("%d values, at most %d", n, MaxValues)}
	}
	r.Typed = le.Uint32(data[offTyped:])
	comm := data[offComm : offComm+commLen]
	end := bytes.IndexByte(comm, 0)
	if end < 0 {
		return Record{}, 0, &FormatError{Msg: "comm not NUL-terminated"}
	}
	r.Comm = string(comm[:end])
	size := HeaderSize + 8*n
	if len(data) < size {
		return Record{}, 0, fmt.Errorf("%d bytes left for a record of %d values (%d bytes): %w", len(data), n, size, ErrTruncated)
	}
	if n > 0 {
		r.Values = make([]uint64, n)
		for i := range r.Values {
			r.Values[i] = le.Uint64(data[offVals+8*i:])
		}
	}
	if _, err := r.Items(); err != nil {
		return Record{}, 0, &FormatError{Msg: err.Error()}
	}
	return r, size, nil
}

// Decode decodes a read of the records file: whole records, back to
// back. On error it returns the records before the bad one, and the
// error says at which byte (ErrTruncated or a *FormatError).
func Decode(data []byte) ([]Record, error) {
	var rs []Record
	for off := 0; off < len(data); {
		r, n, err := DecodeRecord(data[off:])
		if err != nil {
			var fe *FormatError
			if errors.As(err, &fe) {
				fe.Offset = off
				return rs, fe
			}
			return rs, fmt.Errorf("record at byte %d: %w", off, err)
		}
		rs = append(rs, r)
		off += n
	}
	return rs, nil
}

// Append appends r encoded as the runtime writes it (Comm cut to 15
// bytes, at most MaxValues values) and returns the extended slice.
func Append(b []byte, r Record) []byte {
	vals := r.Values
	if len(vals) > MaxValues {
		vals = vals[:MaxValues]
	}
	var h [HeaderSize]byte
	le := binary.LittleEndian
	le.PutUint64(h[offTime:], r.TimeNS)
	le.PutUint32(h[offAspect:], r.Aspect)
	le.PutUint16(h[offHook:], r.Hook)
	le.PutUint16(h[offAdvice:], r.Advice)
	le.PutUint32(h[offPID:], r.PID)
	le.PutUint16(h[offCPU:], r.CPU)
	h[offNvals] = byte(len(vals))
	h[offDropped] = r.Dropped
	copy(h[offComm:offComm+commLen-1], r.Comm)
	le.PutUint32(h[offFlow:], uint32(r.Flow))
	le.PutUint32(h[offTyped:], r.Typed)
	b = append(b, h[:]...)
	for _, v := range vals {
		b = le.AppendUint64(b, v)
	}
	return b
}
