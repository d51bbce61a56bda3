package inlexit

import (
	"slices"
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

// TestFindSharedExit: an exit the caller's code also reaches takes the
// hook on the copy's jmp to it; one the copy falls into refuses it.
func TestFindSharedExit(t *testing.T) {
	find := func(code []byte, ranges [][2]uint64) ([]Exit, error) {
		g := x86code.FuncGraph(0, []x86code.Range{{Addr: 0, Code: code}}, nil)
		return Find(g, func(lo, hi uint64) []x86code.Insn { return x86code.Decode(code[lo:hi], lo) }, ranges, ranges[0][0])
	}
	// test %edi,%edi; je 0xb; [mov $1,%eax; jmp 0x10]; mov $2,%eax; ret
	exits, err := find([]byte{0x85, 0xff, 0x74, 0x07, 0xb8, 1, 0, 0, 0, 0xeb, 0x05, 0xb8, 2, 0, 0, 0, 0xc3}, [][2]uint64{{4, 0xb}})
	if err != nil || len(exits) != 1 || exits[0].Addr != 0x10 || !slices.Equal(exits[0].Hooks(), []uint64{9}) {
		t.Errorf("a copy leaving by jmp for code the caller also reaches: %+v, %v; want its hook on the jmp at 0x9", exits, err)
	}
	// test %edi,%edi; je 0x9; [mov $1,%eax]; ret
	_, err = find([]byte{0x85, 0xff, 0x74, 0x05, 0xb8, 1, 0, 0, 0, 0xc3}, [][2]uint64{{4, 9}})
	if err == nil || !strings.Contains(err.Error(), "its exit 0x9 (from 0x4) is also reached from 0x2 outside the copy") {
		t.Errorf("a copy falling into code the caller also reaches: %v; want it refused", err)
	}
}
