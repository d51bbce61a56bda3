package loc

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/go-delve/delve/pkg/dwarf/op"
)

// expr assembles a DWARF expression from opcodes and operand bytes.
func expr(parts ...any) []byte {
	var b []byte
	for _, p := range parts {
		switch v := p.(type) {
		case op.Opcode:
			b = append(b, byte(v))
		case int:
			b = append(b, byte(v))
		case []byte:
			b = append(b, v...)
		}
	}
	return b
}

func uleb(v uint64) []byte { return binary.AppendUvarint(nil, v) }

func sleb(v int64) []byte {
	var b []byte
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v == 0 && c&0x40 == 0 || v == -1 && c&0x40 != 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

func TestDescribe(t *testing.T) {
	cfa := []byte{byte(op.DW_OP_call_frame_cfa)}
	rbp := []byte{byte(op.DW_OP_reg6)}
	other := expr(op.DW_OP_breg7, sleb(8))
	addr := make([]byte, 8)
	binary.LittleEndian.PutUint64(addr, 0xffffffff82a3c100)
	tests := []struct {
		name  string
		expr  []byte
		base  []byte // frame base; nil: no frame
		want  string
		kind  Kind
		avail bool
	}{
		{"register", expr(op.DW_OP_reg5), nil, "register rdi", Register, true},
		{"regx", expr(op.DW_OP_regx, uleb(17)), nil, "register xmm0", Register, true},
		{"stack slot, CFA unknown", expr(op.DW_OP_fbreg, sleb(-40)), cfa, "stack CFA-40", Stack, true},
		{"stack slot off rbp", expr(op.DW_OP_fbreg, sleb(-8)), rbp, "stack [rbp-8]", Stack, true},
		{"stack slot off another base", expr(op.DW_OP_fbreg, sleb(16)), other, "stack frame base+16 (frame base DW_OP_breg7(rsp) 0x8)", Stack, true},
		{"stack slot without a frame", expr(op.DW_OP_fbreg, sleb(4)), nil, "stack frame base+4 (frame base )", Stack, true},
		{"memory", expr(op.DW_OP_breg3, sleb(8)), nil, "memory [rbx+8]", Memory, true},
		{"global", expr(op.DW_OP_addr, addr), nil, "global 0xffffffff82a3c100", Global, true},
		{"implicit value", expr(op.DW_OP_implicit_value, 2, 0x34, 0x12), nil, "constant (DW_OP_implicit_value)", ImplicitValue, true},
		{"implicit pointer", expr(DW_OP_implicit_pointer, []byte{0x10, 0, 0, 0}, sleb(0)), nil, "pointer to a value that was optimized away (DW_OP_implicit_pointer)", ImplicitPointer, false},
		{"GNU implicit pointer", expr(DW_OP_GNU_implicit_pointer, []byte{0x10, 0, 0, 0}, sleb(8)), nil, "pointer to a value that was optimized away (DW_OP_implicit_pointer)", ImplicitPointer, false},
		{"entry value of a register", expr(DW_OP_entry_value, 1, op.DW_OP_reg4, op.DW_OP_stack_value), nil,
			"value rsi had at function entry (DW_OP_entry_value): not readable here", EntryValue, false},
		{"GNU entry value", expr(DW_OP_GNU_entry_value, 1, op.DW_OP_reg5, op.DW_OP_stack_value), nil,
			"value rdi had at function entry (DW_OP_entry_value): not readable here", EntryValue, false},
		{"entry value of memory", expr(DW_OP_entry_value, 2, op.DW_OP_breg5, 0, op.DW_OP_stack_value), nil,
			"value DW_OP_breg5(rdi) 0x0 had at function entry (DW_OP_entry_value): not readable here", EntryValue, false},
		{"computed from an entry value", expr(DW_OP_entry_value, 1, op.DW_OP_reg5, op.DW_OP_plus_uconst, 4, op.DW_OP_stack_value), nil,
			"computed from values at function entry (DW_OP_entry_value): not readable here", EntryComputed, false},
		{"literal", expr(op.DW_OP_lit3, op.DW_OP_stack_value), nil, "constant 3", Constant, true},
		{"const1s", expr(op.DW_OP_const1s, 0xfe, op.DW_OP_stack_value), nil, "constant -2", Constant, true},
		{"const2u", expr(op.DW_OP_const2u, 0x34, 0x12, op.DW_OP_stack_value), nil, "constant 4660", Constant, true},
		{"consts", expr(op.DW_OP_consts, sleb(-1000), op.DW_OP_stack_value), nil, "constant -1000", Constant, true},
		{"computed", expr(op.DW_OP_breg0, sleb(0), op.DW_OP_lit1, op.DW_OP_shl, op.DW_OP_stack_value), nil, "computed value", Computed, true},
		{"pieces", expr(op.DW_OP_reg0, op.DW_OP_piece, 8, op.DW_OP_reg1, op.DW_OP_piece, 8), nil, "in pieces", Pieces, true},
		{"bit pieces", expr(op.DW_OP_reg0, op.DW_OP_bit_piece, 4, 0), nil, "in pieces", Pieces, true},
		{"expression", expr(op.DW_OP_breg5, sleb(0), op.DW_OP_deref), nil, "expression", Expression, true},
		{"truncated", expr(op.DW_OP_addr, 1, 2), nil, "unknown (malformed expression)", Malformed, false},
		{"empty", nil, nil, "unknown (malformed expression)", Malformed, false},
	}
	for _, tt := range tests {
		var f *Frame
		if tt.base != nil {
			f = NewFrame(nil, 0x1000, tt.base)
		}
		l := Describe(tt.expr, f)
		if l.String() != tt.want || l.Kind != tt.kind || l.Available() != tt.avail {
			t.Errorf("%s: Describe(% x) = %q (kind %d, available %v), want %q (kind %d, available %v)",
				tt.name, tt.expr, l.String(), l.Kind, l.Available(), tt.want, tt.kind, tt.avail)
		}
	}
	// The structured form says what the text says.
	if l := Describe(expr(op.DW_OP_breg3, sleb(-24)), nil); l.Reg != 3 || l.Offset != -24 {
		t.Errorf("memory: %+v", l)
	}
	if l := Describe(expr(DW_OP_entry_value, 1, op.DW_OP_reg4, op.DW_OP_stack_value), nil); !l.EntryReg || l.Reg != 4 {
		t.Errorf("entry value: %+v", l)
	}
	if l := Describe(expr(op.DW_OP_fbreg, sleb(-8)), NewFrame(nil, 0, rbp)); l.Base != BaseRegister || l.BaseReg != 6 || l.Offset != -8 {
		t.Errorf("stack slot off rbp: %+v", l)
	}
}

func TestStringOfOtherKinds(t *testing.T) {
	for _, tt := range []struct {
		l    Location
		want string
	}{
		{Location{}, "optimized out"},
		{Location{Kind: Stack, Base: BaseCFA, Offset: -40, CFA: &CFA{Reg: 7, Offset: 56}}, "stack CFA-40 ([rsp+16] here)"},
		{Location{Kind: Constant, Bytes: []byte{1, 2}}, "constant [1 2]"},
		{Location{Kind: Malformed, Err: bytes.ErrTooLarge}, "unknown (bytes.Buffer: too large)"},
	} {
		if got := tt.l.String(); got != tt.want {
			t.Errorf("%+v: %q, want %q", tt.l, got, tt.want)
		}
	}
}

func TestPretty(t *testing.T) {
	for _, tt := range []struct {
		expr []byte
		want string
	}{
		{expr(op.DW_OP_reg5), "DW_OP_reg5(rdi)"},
		{expr(op.DW_OP_fbreg, sleb(-40)), "DW_OP_fbreg -0x28"},
		{expr(op.DW_OP_breg7, sleb(8), op.DW_OP_deref), "DW_OP_breg7(rsp) 0x8 DW_OP_deref"},
		{expr(DW_OP_entry_value, 1, op.DW_OP_reg4, op.DW_OP_stack_value), "DW_OP_entry_value(DW_OP_reg4(rsi)) DW_OP_stack_value"},
		{expr(DW_OP_GNU_entry_value, 1, op.DW_OP_reg5, op.DW_OP_stack_value), "DW_OP_GNU_entry_value(DW_OP_reg5(rdi)) DW_OP_stack_value"},
		{expr(DW_OP_implicit_pointer, []byte{0x10, 0, 0, 0}, sleb(0)), "DW_OP_implicit_pointer 10 00 00 00 00"},
		{expr(DW_OP_convert, uleb(0x2a)), "DW_OP_convert 2a"},
		{expr(op.DW_OP_lit1, op.DW_OP_addr, 1, 2), "DW_OP_lit1 <truncated>"},
	} {
		if got := Pretty(tt.expr); got != tt.want {
			t.Errorf("Pretty(% x) = %q, want %q", tt.expr, got, tt.want)
		}
	}
}

// FuzzDecode: any bytes decode into whole operations that cover a prefix
// of the input (all of it when ok), and printing and describing them
// does not panic.
func FuzzDecode(f *testing.F) {
	for _, seed := range [][]byte{
		expr(op.DW_OP_reg5),
		expr(op.DW_OP_fbreg, sleb(-40)),
		expr(DW_OP_entry_value, 1, op.DW_OP_reg4, op.DW_OP_stack_value),
		expr(DW_OP_const_type, uleb(0x30), 4, 1, 0, 0, 0),
		expr(op.DW_OP_bregx, uleb(3), sleb(-8), op.DW_OP_piece, 4),
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		ops, ok := Decode(in)
		var all []byte
		for _, o := range ops {
			all = append(all, o.Raw...)
		}
		if !bytes.HasPrefix(in, all) || ok && len(all) != len(in) || !ok && len(all) == len(in) {
			t.Fatalf("Decode(% x): ok %v, operations cover % x", in, ok, all)
		}
		Pretty(in)
		Describe(in, NewFrame(nil, 0, in))
	})
}
