package wire

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// FuzzFrameReader feeds arbitrary bytes to the frame decoder. It must not
// panic or loop, every frame it accepts must re-encode to bytes found in
// the input (nothing is invented or altered), and the payload decoders
// must cope with whatever payload it accepts.
func FuzzFrameReader(f *testing.F) {
	ping, _ := AppendFrame(nil, Frame{Type: MsgPing, ID: 1})
	run, _ := AppendFrame(nil, Frame{Type: MsgRun, ID: 2, Payload: RunRequest{Argv: []string{"uname", "-r"}, Stdin: []byte("x")}.Encode()})
	mods, _ := AppendFrame(nil, Frame{Type: MsgResult, ID: 3, Payload: EncodeModules([]Module{{"e1000", 163840, 0}})})
	errf, _ := AppendFrame(nil, Frame{Type: MsgError, ID: 4, Payload: EncodeRemoteError(&RemoteError{Op: "x", Kind: KindErrno, Errno: 2, Msg: "m"})})
	f.Add(ping)
	f.Add(append([]byte("console noise\r\n"), run...))
	f.Add(append(append([]byte{}, mods...), errf...))
	f.Add(run[:len(run)-1])
	f.Add(append(magic[:], 0, 0, 0))
	big, _ := AppendFrameCompressed(nil, Frame{Type: MsgWriteFile, ID: 5, Payload: WriteFileRequest{Path: "/tmp/m.ko", Mode: 0o600, Data: bytes.Repeat([]byte("ELF"), 2000)}.Encode()})
	f.Add(big)
	exec, _ := AppendFrame(nil, Frame{Type: MsgExec, ID: 6, Payload: ExecRequest{Argv: []string{"cat"}, Stdin: true, Window: 16, StdinWindow: 16}.Encode()})
	out, _ := AppendFrame(nil, Frame{Type: MsgExecOutput, ID: 6, Payload: ExecOutput{FD: 2, Data: []byte("oops\n")}.Encode()})
	f.Add(append(exec, out...))
	clock, _ := AppendFrame(nil, Frame{Type: MsgClock, ID: 7})
	clockRes, _ := AppendFrame(nil, Frame{Type: MsgResult, ID: 7, Payload: EncodeInt(1_234_567_890_123)})
	f.Add(append(clock, clockRes...))
	f.Fuzz(func(t *testing.T, in []byte) {
		// The mux's reader leaves payloads compressed: whatever it
		// accepts, re-encoded with its flags, is bytes of the input.
		raw := NewFrameReader(bytes.NewReader(in), 1<<16)
		raw.Raw = true
		for i := 0; i <= len(in); i++ {
			fm, err := raw.ReadFrame()
			if err == io.EOF || errors.Is(err, ErrTruncatedFrame) {
				break
			}
			if err == nil && !bytes.Contains(in, AppendFrameFlags(nil, fm, raw.lastFlags)) {
				t.Fatalf("raw reader: accepted frame %s id %d does not appear in the input", fm.Type, fm.ID)
			}
			if i == len(in) {
				t.Fatalf("raw reader: more ReadFrame calls than input bytes without EOF")
			}
		}

		fr := NewFrameReader(bytes.NewReader(in), 1<<16)
		for i := 0; i <= len(in); i++ {
			fm, err := fr.ReadFrame()
			if err == io.EOF {
				return
			}
			var fe *FrameError
			if err != nil && !errors.As(err, &fe) {
				t.Fatalf("ReadFrame: unexpected error type %T: %v", err, err)
			}
			if errors.Is(err, ErrTruncatedFrame) {
				if _, err := fr.ReadFrame(); err != io.EOF {
					t.Fatalf("after a truncated frame: %v, want EOF", err)
				}
				return
			}
			if err != nil {
				continue
			}
			if fr.lastFlags == 0 {
				enc, err := AppendFrame(nil, fm)
				if err != nil {
					t.Fatalf("re-encoding an accepted frame: %v", err)
				}
				if !bytes.Contains(in, enc) {
					t.Fatalf("accepted frame %s id %d does not appear in the input", fm.Type, fm.ID)
				}
			}
			decodeAny(fm)
		}
		t.Fatalf("more ReadFrame calls than input bytes without EOF")
	})
}

// decodeAny runs every payload decoder on p; they must return, not panic.
func decodeAny(f Frame) {
	p := f.Payload
	DecodeRunRequest(p)
	DecodeRunResult(p)
	DecodeWriteFileRequest(p)
	DecodeString("s", p)
	DecodeBytes("b", p)
	DecodeLoadModuleRequest(p)
	DecodeModules(p)
	DecodeStreamRequest(p)
	DecodeUint("u", p)
	DecodeRemoteError(p)
	DecodeExecRequest(p)
	DecodeExecOutput(p)
	DecodeInt("i", p)
}

// FuzzDamagedFrame encodes a frame from fuzzed fields, damages one byte
// and checks the damaged frame is never accepted: CRC32C catches every
// error burst of up to 32 bits, so a one-byte change must be caught. It
// also runs the payload decoders on intact frames with fuzzed payloads.
func FuzzDamagedFrame(f *testing.F) {
	f.Add(uint8(MsgRun), uint32(1), RunRequest{Argv: []string{"ls"}}.Encode(), uint32(3), uint8(0x40), false)
	f.Add(uint8(MsgResult), uint32(7), []byte{}, uint32(30), uint8(1), false)
	f.Add(uint8(MsgResult), uint32(9), EncodeInt(-5_000_000_000), uint32(25), uint8(0x80), false)
	f.Add(uint8(MsgWriteFile), uint32(8), bytes.Repeat([]byte("abc"), 1000), uint32(40), uint8(2), true)
	f.Fuzz(func(t *testing.T, typ uint8, id uint32, payload []byte, pos uint32, xor uint8, compress bool) {
		appendFn := AppendFrame
		if compress {
			appendFn = AppendFrameCompressed
		}
		good, err := appendFn(nil, Frame{Type: MsgType(typ), ID: id, Payload: payload})
		if err != nil {
			return
		}
		fm, err := NewFrameReader(bytes.NewReader(good), 0).ReadFrame()
		if err != nil || fm.Type != MsgType(typ) || fm.ID != id || !bytes.Equal(fm.Payload, payload) {
			t.Fatalf("intact frame: got %s id %d, %v", fm.Type, fm.ID, err)
		}
		decodeAny(fm)
		if xor == 0 {
			return
		}
		bad := append([]byte(nil), good...)
		bad[int(pos)%len(bad)] ^= xor
		fr := NewFrameReader(bytes.NewReader(bad), 0)
		for calls := 0; ; calls++ {
			if calls > len(bad) {
				t.Fatalf("more ReadFrame calls than input bytes without EOF")
			}
			_, err := fr.ReadFrame()
			if err == io.EOF || errors.Is(err, ErrTruncatedFrame) {
				return
			}
			// A frame starting at offset 0 is the damaged one. (A frame
			// found later was nested in the payload: a real frame.)
			if err == nil && calls == 0 && fr.Skipped == 0 {
				t.Fatalf("damaged frame (byte %d ^ %#x) accepted", int(pos)%len(bad), xor)
			}
		}
	})
}
