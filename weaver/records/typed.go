package records

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/bits"
	"strconv"

	"github.com/klasy/klasy/internal/human"
)

// The kinds of typed blobs (klasy_rt.h, enum klasy_val_kind).
const (
	KindKString = 1 // a string read from kernel memory (STORE_STR)
	KindUString = 2 // a string read from user memory (STORE_USTR)
	KindKStack  = 3 // a kernel stack id (STORE_STACK): 8 bytes
)

// StrMax is KLASY_STR_MAX: the bytes of a string a record keeps, its
// NUL included.
const StrMax = 64

// Value is one value advice stored: an integer (Kind 0) or a typed blob,
// for the string kinds decoded into Str.
type Value struct {
	Int  int64
	Kind uint32
	Str  string
	// Truncated: the string was longer than the record kept.
	Truncated bool
	// Bad: the string's address could not be read.
	Bad bool
	// Raw holds a blob of a kind this klasy does not know, as stored.
	Raw []byte
	// KStack is a kernel stack's id (KindKStack), and Frames its frames,
	// innermost first, symbolized when the record was drained; Unkept:
	// the kernel's table had no room for them.
	KStack uint64
	Frames []Frame
	Unkept bool
}

// Ints makes integer values.
func Ints(vs ...int64) []Value {
	out := make([]Value, len(vs))
	for i, v := range vs {
		out[i] = Value{Int: v}
	}
	return out
}

// IsString says whether v is a string.
func (v Value) IsString() bool { return v.Kind == KindKString || v.Kind == KindUString }

// Integer returns v's integer, false for a typed value.
func (v Value) Integer() (int64, bool) { return v.Int, v.Kind == 0 }

// String returns v as klasy trace prints it: an integer as
// human.Value, a string quoted with "..." after it when truncated, a
// blob of another kind as kindN:0xHEX.
func (v Value) String() string {
	switch {
	case v.Kind == 0:
		return human.Value(v.Int)
	case v.Bad:
		return "(unreadable)"
	case v.IsString():
		s := strconv.Quote(v.Str)
		if v.Truncated {
			s += "..."
		}
		return s
	case v.Kind == KindKStack:
		// The frames follow the record's line (klasy trace).
		return fmt.Sprintf("kstack:%#x", v.KStack)
	}
	return fmt.Sprintf("kind%d:0x%x", v.Kind, v.Raw)
}

// MarshalJSON writes an integer as a number, a string as a JSON string
// (null when unreadable; truncation is in the record's "truncated"), a
// blob of another kind as {"kind": N, "hex": "..."}.
func (v Value) MarshalJSON() ([]byte, error) {
	switch {
	case v.Kind == 0:
		return strconv.AppendInt(nil, v.Int, 10), nil
	case v.Bad:
		return []byte("null"), nil
	case v.IsString():
		return json.Marshal(v.Str)
	case v.Kind == KindKStack:
		return json.Marshal(kstackJSON{ID: strconv.FormatUint(v.KStack, 10), Frames: v.Frames, Unkept: v.Unkept})
	}
	return json.Marshal(struct {
		Kind uint32 `json:"kind"`
		Hex  string `json:"hex"`
	}{v.Kind, hex.EncodeToString(v.Raw)})
}

// UnmarshalJSON reads what MarshalJSON wrote; a string comes back as a
// kernel string, its truncation from the record (MarkTruncated).
func (v *Value) UnmarshalJSON(b []byte) error {
	*v = Value{}
	switch {
	case string(b) == "null":
		*v = Value{Kind: KindKString, Bad: true}
		return nil
	case len(b) > 0 && b[0] == '"':
		v.Kind = KindKString
		return json.Unmarshal(b, &v.Str)
	case len(b) > 0 && b[0] == '{':
		var o struct {
			Kind uint32 `json:"kind"`
			Hex  string `json:"hex"`
			kstackJSON
		}
		if err := json.Unmarshal(b, &o); err != nil {
			return err
		}
		if o.ID != "" {
			id, err := strconv.ParseUint(o.ID, 10, 64)
			*v = Value{Kind: KindKStack, KStack: id, Frames: o.Frames, Unkept: o.Unkept}
			return err
		}
		raw, err := hex.DecodeString(o.Hex)
		v.Kind, v.Raw = o.Kind, raw
		return err
	}
	return json.Unmarshal(b, &v.Int)
}

// Items decodes r's values: the integers and the typed blobs its typed
// bitmap marks (struct klasy_record in klasy_rt.h).
func (r Record) Items() ([]Value, error) {
	n := len(r.Values)
	if n < 32 && r.Typed>>n != 0 {
		return nil, fmt.Errorf("typed bit %d past the record's %d values", bits.Len32(r.Typed)-1, n)
	}
	var out []Value
	for i := 0; i < n; i++ {
		if r.Typed&(1<<i) == 0 {
			out = append(out, Value{Int: int64(r.Values[i])})
			continue
		}
		kind, size := uint32(r.Values[i]>>32), int(uint32(r.Values[i]))
		slots := (size + 7) / 8
		if slots > n-1-i {
			return nil, fmt.Errorf("value %d: a blob of %d bytes, %d values left", i, size, n-1-i)
		}
		if kind == 0 {
			return nil, fmt.Errorf("value %d: a blob of kind 0", i)
		}
		if data := r.Typed >> (i + 1) & (1<<slots - 1); data != 0 {
			return nil, fmt.Errorf("typed bit %d inside the blob at value %d", i+1+bits.TrailingZeros32(data), i)
		}
		b := make([]byte, 8*slots)
		for j := 0; j < slots; j++ {
			binary.LittleEndian.PutUint64(b[8*j:], r.Values[i+1+j])
		}
		b = b[:size]
		v := Value{Kind: kind}
		switch kind {
		case KindKString, KindUString:
			switch end := bytes.IndexByte(b, 0); {
			case size == 0:
				v.Bad = true
			case end < 0:
				v.Str, v.Truncated = string(b), true
			default:
				v.Str = string(b[:end])
			}
		case KindKStack:
			if size != 8 {
				return nil, fmt.Errorf("value %d: a kernel stack id of %d bytes, want 8", i, size)
			}
			v.KStack = binary.LittleEndian.Uint64(b)
		default:
			v.Raw = b
		}
		out = append(out, v)
		i += slots
	}
	return out, nil
}

// MarkTruncated sets Truncated on the values tr.Truncated numbers, as
// after reading tr back from JSON.
func (tr *TraceRecord) MarkTruncated() {
	for _, i := range tr.Truncated {
		if i >= 1 && i <= len(tr.Values) {
			tr.Values[i-1].Truncated = true
		}
	}
}

// AppendString appends to r a string value as STORE_STR writes it: the
// bytes of s with its NUL, at most StrMax, marked truncated past that.
func (r *Record) AppendString(kind uint32, s string) {
	b := append([]byte(s), 0)
	if len(b) > StrMax {
		b = b[:StrMax]
	}
	r.Typed |= 1 << len(r.Values)
	r.Values = append(r.Values, uint64(kind)<<32|uint64(len(b)))
	for len(b)%8 != 0 {
		b = append(b, 0)
	}
	for j := 0; j < len(b); j += 8 {
		r.Values = append(r.Values, binary.LittleEndian.Uint64(b[j:]))
	}
}

// Ints returns tr's values as integers, a typed one as 0.
func (tr TraceRecord) Ints() []int64 {
	out := make([]int64, len(tr.Values))
	for i, v := range tr.Values {
		out[i] = v.Int
	}
	return out
}

// kstackJSON is a kernel stack value in JSON: its id as a string
// (a 64-bit hash, beyond JSON's exact integers) and its frames.
type kstackJSON struct {
	ID     string  `json:"kstack,omitempty"`
	Frames []Frame `json:"frames,omitempty"`
	Unkept bool    `json:"unkept,omitempty"`
}

// KStacks returns the kernel stack values of rs, to fill their frames.
func KStacks(rs []TraceRecord) []*Value {
	var out []*Value
	for i := range rs {
		for j := range rs[i].Values {
			if rs[i].Values[j].Kind == KindKStack {
				out = append(out, &rs[i].Values[j])
			}
		}
	}
	return out
}
