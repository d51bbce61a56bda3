package wire

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"testing/iotest"
)

func mustFrame(t testing.TB, f Frame) []byte {
	t.Helper()
	b, err := AppendFrame(nil, f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// rawHeader builds a header by hand so tests can lie in any field while
// keeping (or not) the checksums valid.
func rawHeader(version, typ byte, flags uint16, id, length uint32, payload []byte) []byte {
	h := make([]byte, HeaderSize)
	copy(h, magic[:])
	h[4], h[5] = version, typ
	binary.BigEndian.PutUint16(h[6:8], flags)
	binary.BigEndian.PutUint32(h[8:12], id)
	binary.BigEndian.PutUint32(h[12:16], length)
	binary.BigEndian.PutUint32(h[16:20], crc32.Checksum(payload, castagnoli))
	binary.BigEndian.PutUint32(h[20:24], crc32.Checksum(h[:20], castagnoli))
	return h
}

func cat(bs ...[]byte) []byte { return bytes.Join(bs, nil) }

// deflated builds a compressed frame around any payload, even one over
// the limit, as a hostile or broken peer could.
func deflated(t testing.TB, payload []byte, id uint32) []byte {
	var z bytes.Buffer
	zw, _ := flate.NewWriter(&z, flate.BestSpeed)
	zw.Write(payload)
	zw.Close()
	return cat(rawHeader(Version, byte(MsgWriteFile), FlagDeflate, id, uint32(z.Len()), z.Bytes()), z.Bytes())
}

func TestCompressedFrames(t *testing.T) {
	module, err := os.ReadFile("../testdata/proc-modules")
	if err != nil {
		t.Fatal(err)
	}
	compressible := bytes.Repeat(module, 50)
	random := make([]byte, 8192)
	rand.NewChaCha8([32]byte{1}).Read(random)
	for _, tt := range []struct {
		name       string
		payload    []byte
		compressed bool
	}{
		{"small payload stays plain", []byte("tiny"), false},
		{"compressible payload is deflated", compressible, true},
		{"incompressible payload stays plain", random, false},
	} {
		b, err := AppendFrameCompressed(nil, Frame{Type: MsgWriteFile, ID: 3, Payload: tt.payload})
		if err != nil {
			t.Fatal(err)
		}
		flags := binary.BigEndian.Uint16(b[6:8])
		if (flags == FlagDeflate) != tt.compressed {
			t.Errorf("%s: flags %#x, %d bytes on the wire for %d", tt.name, flags, len(b), len(tt.payload))
		}
		f, err := NewFrameReader(bytes.NewReader(b), 0).ReadFrame()
		if err != nil || !bytes.Equal(f.Payload, tt.payload) || f.ID != 3 {
			t.Errorf("%s: decoded id %d, %d bytes, %v", tt.name, f.ID, len(f.Payload), err)
		}
		if tt.compressed {
			t.Logf("%d bytes deflated to %d", len(tt.payload), len(b)-HeaderSize)
		}
	}
}

func TestFrameRoundTrip(t *testing.T) {
	frames := []Frame{
		{Type: MsgPing, ID: 1},
		{Type: MsgRun, ID: 0xFFFFFFFF, Payload: RunRequest{Argv: []string{"uname", "-r"}}.Encode()},
		{Type: MsgStreamData, ID: 7, Payload: bytes.Repeat([]byte{0xA9, 'K', 'L', 'S'}, 1000)}, // magic inside a payload
		{Type: MsgResult, ID: 9, Payload: make([]byte, MaxPayload)},
	}
	var stream []byte
	for _, f := range frames {
		stream = append(stream, mustFrame(t, f)...)
	}
	// One byte per Read, as a slow serial line delivers them, for the
	// small frames; the whole stream in larger reads as well.
	for _, r := range []io.Reader{iotest.OneByteReader(bytes.NewReader(stream[:len(stream)-HeaderSize-MaxPayload])), bytes.NewReader(stream)} {
		fr := NewFrameReader(r, 0)
		for i := 0; ; i++ {
			f, err := fr.ReadFrame()
			if err == io.EOF {
				if i < 3 {
					t.Fatalf("EOF after %d frames", i)
				}
				break
			}
			if err != nil {
				t.Fatalf("frame %d: %v", i, err)
			}
			w := frames[i]
			if f.Type != w.Type || f.ID != w.ID || !bytes.Equal(f.Payload, w.Payload) {
				t.Fatalf("frame %d = %s id %d %d bytes, want %s id %d %d bytes", i, f.Type, f.ID, len(f.Payload), w.Type, w.ID, len(w.Payload))
			}
		}
		if fr.Skipped != 0 {
			t.Errorf("skipped %d bytes of a clean stream", fr.Skipped)
		}
	}
}

func TestAppendFrameRejectsOversizedPayload(t *testing.T) {
	_, err := AppendFrame(nil, Frame{Type: MsgWriteFile, ID: 1, Payload: make([]byte, MaxPayload+1)})
	if !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("AppendFrame(MaxPayload+1) = %v, want ErrFrameTooLarge", err)
	}
}

// step is what one ReadFrame call must return.
type step struct {
	id      uint32 // frame id expected, when err is nil
	err     error  // sentinel expected
	hasID   bool   // for a *FrameError: it names a request
	errID   uint32
	errText string // substring of the error message
}

func TestFrameReaderDamagedInput(t *testing.T) {
	good := func(id uint32) []byte {
		return mustFrame(t, Frame{Type: MsgReadFile, ID: id, Payload: EncodeString("/proc/version")})
	}
	ping := good(42)
	flip := func(b []byte, i int) []byte {
		c := append([]byte(nil), b...)
		c[i] ^= 0x40
		return c
	}
	payload := []byte("hello")
	tests := []struct {
		name    string
		in      []byte
		steps   []step
		skipped int64
	}{
		{name: "empty stream", in: nil, steps: []step{{err: io.EOF}}},
		{name: "console text before the first frame",
			in:      cat([]byte("[    1.234] Run /init as init process\r\nlogin: "), ping),
			steps:   []step{{id: 42}, {err: io.EOF}},
			skipped: int64(len("[    1.234] Run /init as init process\r\nlogin: "))},
		{name: "garbage between frames and after the last",
			in:      cat(good(1), []byte{0, 0xA9, 0xA9, 'K'}, good(2), []byte("trailing noise")),
			steps:   []step{{id: 1}, {id: 2}, {err: io.EOF}},
			skipped: 4 + int64(len("trailing noise"))},
		{name: "partial magic at end of stream",
			in: cat(good(3), magic[:3]), steps: []step{{id: 3}, {err: io.EOF}}, skipped: 3},
		{name: "truncated inside the header",
			in:    ping[:10],
			steps: []step{{err: ErrTruncatedFrame, errText: "stream ended after 10 of 24 bytes"}, {err: io.EOF}}},
		{name: "truncated inside the payload",
			in:    ping[:len(ping)-3],
			steps: []step{{err: ErrTruncatedFrame, hasID: true, errID: 42, errText: "read-file, id 42"}, {err: io.EOF}}},
		{name: "header checksum mismatch resynchronises on the next frame",
			in:    cat(flip(ping, 9), good(5)),
			steps: []step{{err: ErrCorruptFrame, errText: "header checksum mismatch"}, {id: 5}, {err: io.EOF}},
			// the damaged frame's bytes are garbage after its magic
			skipped: int64(len(ping))},
		{name: "damaged length is caught by the header checksum",
			in:      cat(flip(ping, 13), good(6)),
			steps:   []step{{err: ErrCorruptFrame, errText: "header checksum"}, {id: 6}, {err: io.EOF}},
			skipped: int64(len(ping))},
		{name: "payload checksum mismatch names the request",
			in:    cat(flip(ping, len(ping)-1), good(7)),
			steps: []step{{err: ErrCorruptFrame, hasID: true, errID: 42, errText: "payload checksum mismatch"}, {id: 7}, {err: io.EOF}}},
		{name: "oversized frame is skipped without buffering it",
			in: cat(rawHeader(Version, byte(MsgWriteFile), 0, 8, MaxPayload+1, nil), make([]byte, MaxPayload+1), good(9)),
			steps: []step{{err: ErrFrameTooLarge, hasID: true, errID: 8, errText: "payload 16777217 bytes, limit 16777216"},
				{id: 9}, {err: io.EOF}}},
		{name: "oversized frame cut short",
			in:    rawHeader(Version, byte(MsgWriteFile), 0, 8, 1<<31, nil),
			steps: []step{{err: ErrFrameTooLarge, hasID: true, errID: 8}, {err: io.EOF}}},
		{name: "unknown version",
			in:    cat(rawHeader(2, byte(MsgPing), 0, 10, uint32(len(payload)), payload), payload, good(11)),
			steps: []step{{err: ErrBadVersion, hasID: true, errID: 10, errText: "version 2"}, {id: 11}, {err: io.EOF}}},
		{name: "reserved flags set",
			in:    cat(rawHeader(Version, byte(MsgPing), 2, 12, 0, nil)),
			steps: []step{{err: ErrBadVersion, hasID: true, errID: 12, errText: "flags 0x2"}, {err: io.EOF}}},
		{name: "compressed payload that does not inflate",
			in:    cat(rawHeader(Version, byte(MsgWriteFile), FlagDeflate, 17, 5, []byte("hello")), []byte("hello"), good(18)),
			steps: []step{{err: ErrCorruptFrame, hasID: true, errID: 17, errText: "inflating payload"}, {id: 18}, {err: io.EOF}}},
		{name: "compressed payload that inflates past the limit",
			in:    cat(deflated(t, make([]byte, MaxPayload+1), 19), good(20)),
			steps: []step{{err: ErrFrameTooLarge, hasID: true, errID: 19, errText: "inflates past the limit"}, {id: 20}, {err: io.EOF}}},
		// This frame's header holds a 0x0A too, so the damage is caught
		// there and the whole frame (28 bytes + 1 inserted CR) is skipped.
		{name: "cooked tty rewrote LF to CRLF",
			in:    cat(bytes.ReplaceAll(mustFrame(t, Frame{Type: MsgResult, ID: 13, Payload: []byte("a\nb")}), []byte("\n"), []byte("\r\n")), good(14)),
			steps: []step{{err: ErrCorruptFrame, errText: "header checksum"}, {id: 14}, {err: io.EOF}}, skipped: 29},
		{name: "cooked tty rewrote LF to CRLF in the payload only",
			in:    cat(mustFrame(t, Frame{Type: MsgResult, ID: 15, Payload: []byte("a\nb")})[:HeaderSize], []byte("a\r\nb"), good(16)),
			steps: []step{{err: ErrCorruptFrame, hasID: true, errID: 15, errText: "payload checksum"}, {id: 16}, {err: io.EOF}}, skipped: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fr := NewFrameReader(bytes.NewReader(tt.in), 0)
			for i, want := range tt.steps {
				f, err := fr.ReadFrame()
				if want.err == nil {
					if err != nil || f.ID != want.id {
						t.Fatalf("step %d: got frame id %d, err %v; want frame id %d", i, f.ID, err, want.id)
					}
					continue
				}
				if !errors.Is(err, want.err) {
					t.Fatalf("step %d: got frame id %d, err %v; want %v", i, f.ID, err, want.err)
				}
				if want.err == io.EOF {
					continue
				}
				var fe *FrameError
				if !errors.As(err, &fe) {
					t.Fatalf("step %d: %T is not a *FrameError", i, err)
				}
				if fe.HasID != want.hasID || fe.ID != want.errID {
					t.Errorf("step %d: error names id %d (%v), want %d (%v)", i, fe.ID, fe.HasID, want.errID, want.hasID)
				}
				if !strings.Contains(err.Error(), want.errText) {
					t.Errorf("step %d: error %q does not say %q", i, err, want.errText)
				}
			}
			if fr.Skipped != tt.skipped {
				t.Errorf("skipped %d bytes, want %d", fr.Skipped, tt.skipped)
			}
		})
	}
}

func TestTruncatedFrameIsUnexpectedEOF(t *testing.T) {
	ping := mustFrame(t, Frame{Type: MsgPing, ID: 1})
	_, err := NewFrameReader(bytes.NewReader(ping[:HeaderSize-1]), 0).ReadFrame()
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("err = %v, want it to match io.ErrUnexpectedEOF", err)
	}
}

func TestFrameReaderPassesReadErrors(t *testing.T) {
	boom := errors.New("boom")
	_, err := NewFrameReader(iotest.ErrReader(boom), 0).ReadFrame()
	if err != boom {
		t.Fatalf("err = %v, want %v", err, boom)
	}
}

func TestPayloadDecodersRejectTruncationAndTrailingBytes(t *testing.T) {
	type codec struct {
		name   string
		good   []byte
		decode func([]byte) error
	}
	codecs := []codec{
		{"run request", RunRequest{Argv: []string{"cat", "/proc/version"}, Stdin: []byte("x")}.Encode(),
			func(p []byte) error { _, err := DecodeRunRequest(p); return err }},
		{"run result", RunResult{Stdout: []byte("6.1.0\n"), ExitCode: -1}.Encode(),
			func(p []byte) error { _, err := DecodeRunResult(p); return err }},
		{"write file", WriteFileRequest{Path: "/tmp/x", Mode: 0o644, Data: []byte("data")}.Encode(),
			func(p []byte) error { _, err := DecodeWriteFileRequest(p); return err }},
		{"load module", LoadModuleRequest{Image: []byte("\x7fELF"), Params: "a=1"}.Encode(),
			func(p []byte) error { _, err := DecodeLoadModuleRequest(p); return err }},
		{"modules", EncodeModules([]Module{{"e1000", 1 << 17, 0}, {"virtio", 16384, -1}}),
			func(p []byte) error { _, err := DecodeModules(p); return err }},
		{"stream", StreamRequest{Path: "/dev/kmsg", Window: 4}.Encode(),
			func(p []byte) error { _, err := DecodeStreamRequest(p); return err }},
		{"error", EncodeRemoteError(&RemoteError{Op: "read file", Kind: KindErrno, Errno: 2, Msg: "open /x: no such file"}),
			func(p []byte) error { _, err := DecodeRemoteError(p); return err }},
	}
	for _, c := range codecs {
		if err := c.decode(c.good); err != nil {
			t.Errorf("%s: decoding its own encoding: %v", c.name, err)
		}
		for n := 0; n < len(c.good); n++ {
			if err := c.decode(c.good[:n]); err == nil {
				t.Errorf("%s: %d of %d bytes decoded without error", c.name, n, len(c.good))
			}
		}
		if err := c.decode(append(append([]byte(nil), c.good...), 0)); err == nil || !strings.Contains(err.Error(), "unexpected bytes") {
			t.Errorf("%s: trailing byte: err = %v", c.name, err)
		}
	}
}

func TestDecodeRejectsHugeCounts(t *testing.T) {
	var e enc
	e.uint(1 << 40) // a count no payload of this size can hold
	if _, err := DecodeRunRequest(e.b); err == nil {
		t.Error("run request with 2^40 arguments decoded")
	}
	if _, err := DecodeModules(e.b); err == nil {
		t.Error("module list of 2^40 entries decoded")
	}
	if _, err := DecodeStreamRequest(StreamRequest{Path: "/x", Window: MaxWindow + 1}.Encode()); err == nil {
		t.Error("stream window above the limit accepted")
	}
}
