// Package loc reads where a variable's value is at a pc: DWARF location
// expressions (decoded, printed, and described as a Location a probe
// handler can act on), location lists, and the CFA rules of
// .debug_frame that turn a frame-base offset into a register offset.
package loc

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/go-delve/delve/pkg/dwarf/op"
	"github.com/go-delve/delve/pkg/dwarf/regnum"

	"github.com/klasy/klasy/internal/bytereader"
	"github.com/klasy/klasy/internal/mmapfile"
)

// DWARF 5 and GNU opcodes that delve's op package does not name (it
// stops at DW_OP_stack_value): gcc 12 emits them for optimized kernels,
// entry values above all. Values from DWARF 5, 7.7.1, and binutils'
// include/dwarf2.def.
const (
	DW_OP_implicit_pointer     op.Opcode = 0xa0
	DW_OP_addrx                op.Opcode = 0xa1
	DW_OP_constx               op.Opcode = 0xa2
	DW_OP_entry_value          op.Opcode = 0xa3
	DW_OP_const_type           op.Opcode = 0xa4
	DW_OP_regval_type          op.Opcode = 0xa5
	DW_OP_deref_type           op.Opcode = 0xa6
	DW_OP_xderef_type          op.Opcode = 0xa7
	DW_OP_convert              op.Opcode = 0xa8
	DW_OP_reinterpret          op.Opcode = 0xa9
	DW_OP_GNU_implicit_pointer op.Opcode = 0xf2
	DW_OP_GNU_entry_value      op.Opcode = 0xf3
	DW_OP_GNU_const_type       op.Opcode = 0xf4
	DW_OP_GNU_regval_type      op.Opcode = 0xf5
	DW_OP_GNU_deref_type       op.Opcode = 0xf6
	DW_OP_GNU_convert          op.Opcode = 0xf7
	DW_OP_GNU_reinterpret      op.Opcode = 0xf9
	DW_OP_GNU_parameter_ref    op.Opcode = 0xfa
	DW_OP_GNU_addr_index       op.Opcode = 0xfb
	DW_OP_GNU_const_index      op.Opcode = 0xfc
	DW_OP_GNU_variable_value   op.Opcode = 0xfd
)

// exprArgs gives the operand formats of each opcode, as delve's
// op/opcodes.table does for the ones it knows: s SLEB128, u ULEB128,
// 1/2/4/8 fixed size, B a ULEB128 length and a block, C
// DW_OP_const_type's ULEB128 type, size byte and block.
var exprArgs = func() [256]string {
	var a [256]string
	set := func(args string, codes ...op.Opcode) {
		for _, c := range codes {
			a[c] = args
		}
	}
	set("1", op.DW_OP_const1u, op.DW_OP_const1s, op.DW_OP_pick, op.DW_OP_deref_size, op.DW_OP_xderef_size)
	set("2", op.DW_OP_const2u, op.DW_OP_const2s, op.DW_OP_bra, op.DW_OP_skip, op.DW_OP_call2)
	set("4", op.DW_OP_const4u, op.DW_OP_const4s, op.DW_OP_call4, op.DW_OP_call_ref, DW_OP_GNU_parameter_ref, DW_OP_GNU_variable_value)
	set("8", op.DW_OP_addr, op.DW_OP_const8u, op.DW_OP_const8s)
	set("u", op.DW_OP_constu, op.DW_OP_plus_uconst, op.DW_OP_regx, op.DW_OP_piece, DW_OP_addrx, DW_OP_constx,
		DW_OP_convert, DW_OP_reinterpret, DW_OP_GNU_convert, DW_OP_GNU_reinterpret, DW_OP_GNU_addr_index, DW_OP_GNU_const_index)
	set("s", op.DW_OP_consts, op.DW_OP_fbreg)
	for c := op.DW_OP_breg0; c <= op.DW_OP_breg31; c++ {
		set("s", c)
	}
	set("us", op.DW_OP_bregx)
	set("uu", op.DW_OP_bit_piece, DW_OP_regval_type, DW_OP_GNU_regval_type)
	set("B", op.DW_OP_implicit_value, DW_OP_entry_value, DW_OP_GNU_entry_value)
	set("4s", DW_OP_implicit_pointer, DW_OP_GNU_implicit_pointer)
	set("C", DW_OP_const_type, DW_OP_GNU_const_type)
	set("1u", DW_OP_deref_type, DW_OP_xderef_type, DW_OP_GNU_deref_type)
	return a
}()

// extraOpNames names the opcodes that delve's op.PrettyPrint does not
// print.
var extraOpNames = map[op.Opcode]string{
	DW_OP_implicit_pointer: "DW_OP_implicit_pointer", DW_OP_addrx: "DW_OP_addrx", DW_OP_constx: "DW_OP_constx",
	DW_OP_entry_value: "DW_OP_entry_value", DW_OP_const_type: "DW_OP_const_type", DW_OP_regval_type: "DW_OP_regval_type",
	DW_OP_deref_type: "DW_OP_deref_type", DW_OP_xderef_type: "DW_OP_xderef_type", DW_OP_convert: "DW_OP_convert",
	DW_OP_reinterpret: "DW_OP_reinterpret", DW_OP_GNU_implicit_pointer: "DW_OP_GNU_implicit_pointer", DW_OP_GNU_entry_value: "DW_OP_GNU_entry_value",
	DW_OP_GNU_const_type: "DW_OP_GNU_const_type", DW_OP_GNU_regval_type: "DW_OP_GNU_regval_type", DW_OP_GNU_deref_type: "DW_OP_GNU_deref_type",
	DW_OP_GNU_convert: "DW_OP_GNU_convert", DW_OP_GNU_reinterpret: "DW_OP_GNU_reinterpret", DW_OP_GNU_parameter_ref: "DW_OP_GNU_parameter_ref",
	DW_OP_GNU_addr_index: "DW_OP_GNU_addr_index", DW_OP_GNU_const_index: "DW_OP_GNU_const_index", DW_OP_GNU_variable_value: "DW_OP_GNU_variable_value",
	op.DW_OP_nop: "DW_OP_nop", op.DW_OP_push_object_address: "DW_OP_push_object_address", op.DW_OP_form_tls_address: "DW_OP_form_tls_address",
	op.DW_OP_call2: "DW_OP_call2", op.DW_OP_call4: "DW_OP_call4", op.DW_OP_call_ref: "DW_OP_call_ref", op.DW_OP_bit_piece: "DW_OP_bit_piece",
}

// Op is one operation of a DWARF expression.
type Op struct {
	Code op.Opcode
	Raw  []byte // the whole operation, opcode included
	// Block is the block operand of DW_OP_entry_value,
	// DW_OP_implicit_value and DW_OP_const_type.
	Block []byte
	U     int64 // the first unsigned or fixed-size operand
	S     int64 // the last signed operand
}

// Decode splits expr into operations; ok is false if an operand runs off
// the end (or a LEB128 operand past 64 bits): ops are those before it.
func Decode(expr []byte) (ops []Op, ok bool) {
	r := bytereader.New(expr)
	for r.Len() > 0 {
		start := r.Offset()
		o := Op{Code: op.Opcode(r.U8())}
		for k, a := range exprArgs[o.Code] {
			switch a {
			case '1', '2', '4', '8':
				if v := r.Uint(int(a - '0')); k == 0 {
					o.U = int64(v)
				}
			case 'u':
				if v := r.ULEB128(); k == 0 {
					o.U = int64(v)
				}
			case 's':
				o.S = r.SLEB128()
			case 'B':
				o.Block = r.Bytes(r.ULEB128())
			case 'C':
				r.SkipLEB128() // the base type DIE
				o.Block = r.Bytes(uint64(r.U8()))
			}
		}
		if r.Err() != nil {
			return ops, false
		}
		o.Raw = expr[start:r.Offset()]
		ops = append(ops, o)
	}
	return ops, true
}

// Pretty prints expr: the operations delve's op.PrettyPrint knows
// through it, the others here, and "<truncated>" after the last whole
// operation of an expression that runs off its end.
func Pretty(expr []byte) (s string) {
	defer func() {
		if r := recover(); r != nil {
			if mmapfile.IsFault(r) {
				panic(r) // the image changed: for the caller's mmapfile.Catch
			}
			s = fmt.Sprintf("% x", expr)
		}
	}()
	ops, ok := Decode(expr)
	var parts []string
	for _, o := range ops {
		name, extra := extraOpNames[o.Code]
		switch {
		case isEntryValue(o.Code):
			parts = append(parts, name+"("+Pretty(o.Block)+")")
		case extra:
			parts = append(parts, strings.TrimSpace(fmt.Sprintf("%s % x", name, o.Raw[1:])))
		default:
			var b bytes.Buffer
			op.PrettyPrint(&b, o.Raw, RegName)
			parts = append(parts, strings.TrimSpace(b.String()))
		}
	}
	if !ok {
		parts = append(parts, "<truncated>")
	}
	return strings.Join(parts, " ")
}

// RegName is the name of x86-64 DWARF register n, as the kernel's
// pt_regs and objdump spell it ("rdi", "r8").
func RegName(n uint64) string { return strings.ToLower(regnum.AMD64ToName(n)) }

func isEntryValue(c op.Opcode) bool { return c == DW_OP_entry_value || c == DW_OP_GNU_entry_value }

func isImplicitPointer(c op.Opcode) bool {
	return c == DW_OP_implicit_pointer || c == DW_OP_GNU_implicit_pointer
}

func isReg(c op.Opcode) bool { return c >= op.DW_OP_reg0 && c <= op.DW_OP_reg31 }

func isBreg(c op.Opcode) bool { return c >= op.DW_OP_breg0 && c <= op.DW_OP_breg31 }

func isLit(c op.Opcode) bool { return c >= op.DW_OP_lit0 && c <= op.DW_OP_lit31 }
