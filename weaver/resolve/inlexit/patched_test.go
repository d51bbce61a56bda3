package inlexit

import (
	"strings"
	"testing"

	"github.com/klasy/klasy/x86code"
)

// TestCheckPatched: an alternative inside a copy whose replacement
// jumps out of it, or returns, refuses the copy; one that calls, or
// jumps inside the copy or inside itself, does not.
func TestCheckPatched(t *testing.T) {
	const site, repl = 0x1000, 0x9000
	ranges := [][2]uint64{{0x1000, 0x1040}}
	for _, c := range []struct {
		name string
		code []byte
		want string
	}{
		{"call", []byte{0xe8, 0x00, 0x01, 0x00, 0x00}, ""},                      // call repl+5+0x100
		{"nops", []byte{0x0f, 0x1f, 0x44, 0x00, 0x00}, ""},                      // nopl
		{"jmp inside the copy", []byte{0xe9, 0x1b, 0x80, 0xff, 0xff}, ""},       // jmp 0x1020
		{"jmp inside itself", []byte{0xeb, 0x00, 0x90}, ""},                     // jmp repl+2
		{"jmp out", []byte{0xe9, 0x00, 0x10, 0x00, 0x00}, "leaves its code"},    // jmp repl+5+0x1000
		{"jcc out", []byte{0x0f, 0x84, 0x00, 0x10, 0x00, 0x00}, "branches out"}, // je repl+6+0x1000
		{"ret", []byte{0xc3}, "leaves its code"},
	} {
		insns := x86code.Decode(c.code, repl)
		err := CheckPatched(site, insns, repl+uint64(len(c.code)), ranges)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: %v; want %q", c.name, err, c.want)
		}
	}
}
