package agent

import (
	"bytes"
	"testing"

	"github.com/klasy/klasy/agent/wire"
)

// Frames the tests send from a fake agent or client.

func mustFrame(t testing.TB, f wire.Frame) []byte {
	t.Helper()
	b, err := wire.AppendFrame(nil, f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// oversizedHeader is the intact header of a frame announcing one byte
// more than wire.MaxPayload.
func oversizedHeader(typ wire.MsgType, id uint32) []byte {
	return wire.AppendFrameFlags(nil, wire.Frame{Type: typ, ID: id, Payload: make([]byte, wire.MaxPayload+1)}, 0)[:wire.HeaderSize]
}

func cat(bs ...[]byte) []byte { return bytes.Join(bs, nil) }
