package x86code

import (
	"slices"
	"testing"

	"golang.org/x/arch/x86/x86asm"
)

// TestAccess classifies the memory operands of hand-assembled
// instructions (objdump -D -b binary -mi386:x86-64 -Mintel prints the
// disassembly given here).
func TestAccess(t *testing.T) {
	tests := []struct {
		code   []byte
		asm    string
		kind   MemKind
		base   x86asm.Reg
		index  x86asm.Reg
		disp   int64
		bytes  int
		branch bool
	}{
		{[]byte{0x8b, 0x47, 0x70}, "mov eax,[rdi+0x70]", Load, x86asm.RDI, 0, 0x70, 4, false},
		{[]byte{0x89, 0x47, 0x70}, "mov [rdi+0x70],eax", Store, x86asm.RDI, 0, 0x70, 4, false},
		{[]byte{0xc6, 0x47, 0x70, 0x05}, "mov byte [rdi+0x70],0x5", Store, x86asm.RDI, 0, 0x70, 1, false},
		{[]byte{0x83, 0x47, 0x70, 0x01}, "add dword [rdi+0x70],0x1", RMW, x86asm.RDI, 0, 0x70, 4, false},
		{[]byte{0xf0, 0xff, 0x47, 0x70}, "lock inc dword [rdi+0x70]", RMW, x86asm.RDI, 0, 0x70, 4, false},
		{[]byte{0x03, 0x47, 0x70}, "add eax,[rdi+0x70]", Load, x86asm.RDI, 0, 0x70, 4, false},
		{[]byte{0x48, 0x8d, 0x47, 0x70}, "lea rax,[rdi+0x70]", Addr, x86asm.RDI, 0, 0x70, 0, false},
		{[]byte{0x80, 0x7f, 0x7e, 0x00}, "cmp byte [rdi+0x7e],0x0", Load, x86asm.RDI, 0, 0x7e, 1, false},
		{[]byte{0x0f, 0xb7, 0x87, 0xb4, 0, 0, 0}, "movzx eax,word [rdi+0xb4]", Load, x86asm.RDI, 0, 0xb4, 2, false},
		{[]byte{0x0f, 0x94, 0x47, 0x70}, "sete byte [rdi+0x70]", Store, x86asm.RDI, 0, 0x70, 1, false},
		{[]byte{0x8b, 0x04, 0xcf}, "mov eax,[rdi+rcx*8]", Load, x86asm.RDI, x86asm.RCX, 0, 4, false},
		{[]byte{0x48, 0x8b, 0x05, 0x10, 0, 0, 0}, "mov rax,[rip+0x10]", Load, x86asm.RIP, 0, 0x10, 8, false},
		{[]byte{0xff, 0x50, 0x08}, "call [rax+0x8]", Load, x86asm.RAX, 0, 8, 8, true},
		{[]byte{0x41, 0xf6, 0x44, 0x24, 0x7e, 0x04}, "test byte [r12+0x7e],0x4", Load, x86asm.R12, 0, 0x7e, 1, false},
		// One operand, written (the default rule would read it).
		{[]byte{0x48, 0x0f, 0xae, 0x07}, "fxsave64 [rdi]", Store, x86asm.RDI, 0, 0, 0, false},
		{[]byte{0x48, 0x0f, 0xae, 0x27}, "xsave64 [rdi]", Store, x86asm.RDI, 0, 0, 0, false},
		{[]byte{0x0f, 0x01, 0x47, 0x10}, "sgdt [rdi+0x10]", Store, x86asm.RDI, 0, 0x10, 0, false},
		{[]byte{0x0f, 0xae, 0x5f, 0x08}, "stmxcsr dword [rdi+0x8]", Store, x86asm.RDI, 0, 8, 4, false},
		{[]byte{0xd9, 0x7f, 0x04}, "fnstcw word [rdi+0x4]", Store, x86asm.RDI, 0, 4, 2, false},
		{[]byte{0xd9, 0x5f, 0x08}, "fstp dword [rdi+0x8]", Store, x86asm.RDI, 0, 8, 4, false},
		{[]byte{0x48, 0x0f, 0xae, 0x0f}, "fxrstor64 [rdi]", Load, x86asm.RDI, 0, 0, 0, false},
		// 32-bit displacements sign-extended as the CPU does (x86asm
		// zero-extends them); a 64-bit moffs is whole.
		{[]byte{0x48, 0x8b, 0x87, 0x00, 0x00, 0xff, 0xff}, "mov rax,[rdi-0x10000]", Load, x86asm.RDI, 0, -0x10000, 8, false},
		{[]byte{0x48, 0x8d, 0x14, 0xc5, 0x30, 0x46, 0xe3, 0x81}, "lea rdx,[rax*8-0x7e1cb9d0]", Addr, 0, x86asm.RAX, -0x7e1cb9d0, 0, false},
		{[]byte{0x48, 0x8b, 0x05, 0x00, 0xff, 0xff, 0xff}, "mov rax,[rip-0x100]", Load, x86asm.RIP, 0, -0x100, 8, false},
		{[]byte{0xa1, 0x00, 0x10, 0x00, 0x80, 0, 0, 0, 0}, "mov eax,[0x80001000]", Load, 0, 0, 0x80001000, 4, false},
	}
	for _, tc := range tests {
		inst, err := decode(tc.code)
		if err != nil {
			t.Errorf("% x: %v", tc.code, err)
			continue
		}
		acc, ok := Access(&inst)
		if !ok {
			t.Errorf("%s: no memory operand", tc.asm)
			continue
		}
		// Insn.Access the same: decoded (its accCode from the
		// decoding; the Decoder's twice, the second from a template)
		// and made by hand.
		var d Decoder
		for _, in := range append(append(Decode(tc.code, 0), d.DecodeAppend(nil, tc.code, 0)...), d.DecodeAppend(nil, tc.code, 0)[0], Insn{Inst: inst}) {
			if got, ok := in.Access(); !ok || got != acc {
				t.Errorf("%s: Insn.Access gives %+v %v, Access %+v", tc.asm, got, ok, acc)
			}
		}
		if acc.Kind != tc.kind || acc.Mem.Base != tc.base || acc.Mem.Index != tc.index || acc.Mem.Disp != tc.disp ||
			acc.Bytes != tc.bytes || acc.Branch != tc.branch {
			t.Errorf("%s: %s [%v+%v+%#x] %d bytes branch %v; want %s [%v+%v+%#x] %d bytes branch %v",
				tc.asm, acc.Kind, acc.Mem.Base, acc.Mem.Index, acc.Mem.Disp, acc.Bytes, acc.Branch,
				tc.kind, tc.base, tc.index, tc.disp, tc.bytes, tc.branch)
		}
	}
	for _, code := range [][]byte{{0x89, 0xf8}, {0xc3}, {0x0f, 0x18, 0x47, 0x70}} { // mov eax,edi; ret; prefetchnta
		inst, err := x86asm.Decode(code, 64)
		if err != nil {
			t.Fatal(err)
		}
		if acc, ok := Access(&inst); ok {
			t.Errorf("%v: memory access %+v, want none", inst, acc)
		}
		if acc, ok := Decode(code, 0)[0].Access(); ok {
			t.Errorf("%v: Insn.Access: memory access %+v, want none", inst, acc)
		}
	}
}

func TestDWARFReg(t *testing.T) {
	for r, want := range map[x86asm.Reg]int{x86asm.RAX: 0, x86asm.RDX: 1, x86asm.RCX: 2, x86asm.RBX: 3, x86asm.RSI: 4,
		x86asm.RDI: 5, x86asm.RBP: 6, x86asm.RSP: 7, x86asm.R8: 8, x86asm.R15: 15, x86asm.EDI: 5, x86asm.R12L: 12,
		x86asm.RIP: -1, x86asm.AX: -1} {
		if got := DWARFReg(r); got != want {
			t.Errorf("DWARFReg(%v) = %d, want %d", r, got, want)
		}
	}
}

func TestDecodeAndLeadersOf(t *testing.T) {
	const base = 0x1000
	for _, code := range [][]byte{small, {0x90, 0x06, 0x90, 0xc3}, {0xeb, 0x01, 0xb8, 0x01, 0x00, 0x00, 0x00, 0xc3}} {
		insns := Decode(code, base)
		for _, in := range insns {
			if ok, _ := IsBoundary(code, base, in.PC); !ok {
				t.Errorf("% x: Decode gives %#x, not a boundary", code, in.PC)
			}
		}
		if got, want := LeadersOf(insns, base, base+uint64(len(code))), Leaders(code, base); !slices.Equal(got, want) {
			t.Errorf("% x: LeadersOf = %x, Leaders = %x", code, got, want)
		}
		starts, leaders := Scan(code, base)
		var want []uint64
		for _, in := range insns {
			want = append(want, in.PC)
		}
		if !slices.Equal(starts, want) || !slices.Equal(leaders, Leaders(code, base)) {
			t.Errorf("% x: Scan = %x, %x; want %x, %x", code, starts, leaders, want, Leaders(code, base))
		}
	}
}
