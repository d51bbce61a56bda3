package records

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// goldenRecord is one record as the runtime writes it, spelled out byte
// by byte from klasy_rt.h's struct klasy_record (little-endian).
var goldenRecord = strings.Join([]string{
	"8877665544332211",                 // time_ns 0x1122334455667788
	"07000000",                         // aspect 7
	"0300",                             // hook 3
	"0200",                             // advice 2
	"39300000",                         // pid 12345
	"0100",                             // cpu 1
	"02",                               // nvals 2
	"05",                               // dropped 5
	"67657470706964000000000000000000", // comm "getppid"
	"feffffff",                         // flow -2
	"00000000",                         // typed: none
	"2a00000000000000",                 // 42
	"ffffffffffffffff",                 // ^0
}, "")

var goldenWant = Record{
	TimeNS: 0x1122334455667788, Aspect: 7, Hook: 3, Advice: 2, PID: 12345, CPU: 1,
	Dropped: 5, Comm: "getppid", Flow: -2, Values: []uint64{42, ^uint64(0)},
}

func mustHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDecodeGolden(t *testing.T) {
	b := mustHex(t, goldenRecord)
	if len(b) != HeaderSize+16 {
		t.Fatalf("golden record is %d bytes", len(b))
	}
	got, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || !reflect.DeepEqual(got[0], goldenWant) {
		t.Errorf("Decode(golden) = %+v\nwant %+v", got, goldenWant)
	}
	if enc := Append(nil, goldenWant); !bytes.Equal(enc, b) {
		t.Errorf("Append(%+v) =\n%x\nwant\n%x", goldenWant, enc, b)
	}
}

func TestDecode(t *testing.T) {
	golden := mustHex(t, goldenRecord)
	noVals := Record{TimeNS: 1, Aspect: 1, Comm: "swapper/0"}
	full := Record{Comm: "0123456789abcde", Values: make([]uint64, MaxValues)}
	for i := range full.Values {
		full.Values[i] = uint64(i) << 60
	}
	var stream []byte
	for _, r := range []Record{goldenWant, noVals, full} {
		stream = Append(stream, r)
	}
	withNvals := func(n byte) []byte {
		b := bytes.Clone(golden)
		b[offNvals] = n
		return b
	}
	oneVal := goldenWant
	oneVal.Values = oneVal.Values[:1]
	noNUL := bytes.Clone(golden)
	copy(noNUL[offComm:], "0123456789abcdef")
	typedPast := bytes.Clone(golden)
	typedPast[offTyped] = 4
	blobTooLong := bytes.Clone(golden)
	blobTooLong[offTyped] = 1
	copy(blobTooLong[offVals:], "\x09\x00\x00\x00\x01\x00\x00\x00") // a 9-byte string, 1 value left

	tests := []struct {
		name    string
		in      []byte
		want    []Record
		wantErr string // substring; "" for none
		trunc   bool   // errors.Is(err, ErrTruncated)
	}{
		{name: "empty", in: nil},
		{name: "golden", in: golden, want: []Record{goldenWant}},
		{name: "three", in: stream, want: []Record{goldenWant, noVals, full}},
		{name: "header cut", in: golden[:HeaderSize-1], wantErr: "record at byte 0: 47 bytes left", trunc: true},
		{name: "values cut", in: golden[:len(golden)-1], wantErr: "63 bytes left for a record of 2 values (64 bytes)", trunc: true},
		{name: "second cut", in: stream[:len(golden)+3], want: []Record{goldenWant}, wantErr: "record at byte 64: 3 bytes left", trunc: true},
		{name: "too many values", in: withNvals(MaxValues + 1), wantErr: "malformed record at byte 0: 17 values, at most 16"},
		{name: "too many values second", in: append(bytes.Clone(golden), withNvals(255)...), want: []Record{goldenWant}, wantErr: "malformed record at byte 64: 255 values"},
		{name: "comm without NUL", in: noNUL, wantErr: "comm not NUL-terminated"},
		{name: "typed bit past the values", in: typedPast, wantErr: "malformed record at byte 0: typed bit 2 past the record's 2 values"},
		{name: "blob past the values", in: blobTooLong, wantErr: "value 0: a blob of 9 bytes, 1 values left"},
		{name: "fewer values than bytes", in: withNvals(1), want: []Record{oneVal}, wantErr: "record at byte 56: 8 bytes left", trunc: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Decode(tt.in)
			if len(got) != len(tt.want) || (len(got) > 0 && !reflect.DeepEqual(got, tt.want)) {
				t.Errorf("Decode = %+v\nwant %+v", got, tt.want)
			}
			if tt.wantErr == "" {
				if err != nil {
					t.Errorf("Decode: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Decode error = %v, want one containing %q", err, tt.wantErr)
			}
			var fe *FormatError
			if errors.Is(err, ErrTruncated) != tt.trunc || errors.As(err, &fe) == tt.trunc {
				t.Errorf("Decode error %v: truncated %v, *FormatError %v; want truncated %v", err, errors.Is(err, ErrTruncated), errors.As(err, &fe), tt.trunc)
			}
		})
	}
}

func TestAppendLimits(t *testing.T) {
	r := Record{Comm: "a-name-longer-than-fifteen", Values: make([]uint64, MaxValues+3)}
	b := Append(nil, r)
	if len(b) != MaxSize {
		t.Fatalf("Append of %d values: %d bytes, want %d", len(r.Values), len(b), MaxSize)
	}
	got, n, err := DecodeRecord(b)
	if err != nil || n != MaxSize || got.Comm != r.Comm[:15] || len(got.Values) != MaxValues {
		t.Errorf("DecodeRecord(Append(long)) = %+v, %d, %v", got, n, err)
	}
}

// FuzzDecode: Decode never panics, fails only with ErrTruncated or a
// *FormatError, and what it accepts re-encodes to the bytes it read
// (bytes after comm's NUL aside).
func FuzzDecode(f *testing.F) {
	golden := mustHex(f, goldenRecord)
	f.Add(golden)
	f.Add(Append(bytes.Clone(golden), Record{Comm: "x"}))
	f.Add(golden[:HeaderSize+3])
	f.Fuzz(func(t *testing.T, in []byte) {
		rs, err := Decode(in)
		var fe *FormatError
		if err != nil && !errors.Is(err, ErrTruncated) && !errors.As(err, &fe) {
			t.Fatalf("Decode error of type %T: %v", err, err)
		}
		var enc []byte
		for _, r := range rs {
			enc = Append(enc, r)
		}
		if len(enc) > len(in) {
			t.Fatalf("%d records re-encode to %d bytes, more than the %d read", len(rs), len(enc), len(in))
		}
		for off, i := 0, 0; i < len(rs); off, i = off+rs[i].Size(), i+1 {
			a, b := bytes.Clone(in[off:off+rs[i].Size()]), enc[off:off+rs[i].Size()]
			clear(a[offComm+len(rs[i].Comm) : offComm+commLen])
			if !bytes.Equal(a, b) {
				t.Fatalf("record %d at byte %d re-encodes to\n%x\nread from\n%x", i, off, b, a)
			}
		}
		if err == nil && len(enc) != len(in) {
			t.Fatalf("Decode accepted %d bytes but its records cover %d", len(in), len(enc))
		}
	})
}

func TestDecodeTyped(t *testing.T) {
	var r Record
	r.Values = []uint64{42}
	r.AppendString(KindKString, "dd")
	r.AppendString(KindUString, strings.Repeat("/tmp/a", 20))
	r.Typed |= 1 << len(r.Values)
	r.Values = append(r.Values, 9<<32|8, 0x1122) // a kind this klasy does not know
	r.Typed |= 1 << len(r.Values)
	r.Values = append(r.Values, KindKStack<<32|8, 0xfedcba9876543210)
	b := Append(nil, r)
	if got := hex.EncodeToString(b[offTyped : offTyped+4]); got != "0a500000" {
		t.Errorf("typed bitmap %s, want 0a500000 (values 1, 3, 12, 14)", got)
	}
	if got := hex.EncodeToString(b[offVals+8 : offVals+24]); got != "0300000001000000"+"6464000000000000" {
		t.Errorf("kernel string blob %s, want length 3 kind 1, then dd NUL", got)
	}
	rs, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	tr := Symbolize(&Status{}, rs[0])
	var text []string
	for _, v := range tr.Values {
		text = append(text, v.String())
	}
	long := strings.Repeat("/tmp/a", 20)[:StrMax]
	want := []string{"42", `"dd"`, strconv.Quote(long) + "...", "kind9:0x2211000000000000", "kstack:0xfedcba9876543210"}
	if !reflect.DeepEqual(text, want) {
		t.Errorf("values %q, want %q", text, want)
	}
	if !reflect.DeepEqual(tr.Truncated, []int{3}) {
		t.Errorf("truncated %v, want [3]", tr.Truncated)
	}
	js, err := json.Marshal(tr)
	if err != nil {
		t.Fatal(err)
	}
	wantJS := `"values":[42,"dd","` + long + `",{"kind":9,"hex":"2211000000000000"},{"kstack":"18364758544493064720"}],"truncated":[3]`
	if !strings.Contains(string(js), wantJS) {
		t.Errorf("JSON %s\nwant it to hold %s", js, wantJS)
	}
	var back TraceRecord
	if err := json.Unmarshal(js, &back); err != nil {
		t.Fatal(err)
	}
	back.MarkTruncated()
	var text2 []string
	for _, v := range back.Values {
		text2 = append(text2, v.String())
	}
	if !reflect.DeepEqual(text2, want) {
		t.Errorf("values read back %q, want %q", text2, want)
	}
}

func TestDecodeTypedErrors(t *testing.T) {
	for _, tt := range []struct {
		name  string
		typed uint32
		vals  []uint64
		err   string
	}{
		{"bit inside a blob", 0b11, []uint64{1<<32 | 3, 0x6464}, "typed bit 1 inside the blob at value 0"},
		{"kind 0", 0b1, []uint64{3, 0x6464}, "a blob of kind 0"},
		{"blob past the end", 0b1, []uint64{1<<32 | 16, 0x6464}, "a blob of 16 bytes, 1 values left"},
	} {
		b := Append(nil, Record{Comm: "x", Typed: tt.typed, Values: tt.vals})
		if _, err := Decode(b); err == nil || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("%s: Decode error %v, want %q", tt.name, err, tt.err)
		}
	}
	// An unreadable string: length 0.
	b := Append(nil, Record{Comm: "x", Typed: 1, Values: []uint64{2 << 32}})
	rs, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if tr := Symbolize(&Status{}, rs[0]); tr.Values[0].String() != "(unreadable)" {
		t.Errorf("a 0-byte string prints %s, want (unreadable)", tr.Values[0])
	}
}
