package dwarfmap

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/go-delve/delve/pkg/dwarf/op"
)

// operand formats of DWARF expression opcodes, as in delve's
// op/opcodes.table (s sleb, u uleb, 1/2/4/8 fixed, B uleb length + block,
// C DW_OP_const_type's uleb, size byte and block). delve's op package
// names and prints DWARF 2-4 opcodes; the DWARF 5 and GNU ones gcc 12
// emits for optimized kernels (entry values above all) are added here.
var exprArgs = func() [256]string {
	var a [256]string
	set := func(code byte, args string) { a[code] = args }
	for _, c := range []byte{0x08, 0x09, 0x15, 0x94, 0x95} {
		set(c, "1")
	}
	for _, c := range []byte{0x0a, 0x0b, 0x28, 0x2f, 0x98} {
		set(c, "2")
	}
	for _, c := range []byte{0x0c, 0x0d, 0x99, 0x9a, 0xfa, 0xfd} {
		set(c, "4")
	}
	for _, c := range []byte{0x03, 0x0e, 0x0f} {
		set(c, "8")
	}
	for _, c := range []byte{0x10, 0x23, 0x90, 0x93, 0xa1, 0xa2, 0xa8, 0xa9, 0xf7, 0xf9, 0xfb, 0xfc} {
		set(c, "u")
	}
	set(0x11, "s")
	set(0x91, "s")
	for c := 0x70; c <= 0x8f; c++ {
		set(byte(c), "s")
	}
	set(0x92, "us")
	set(0x9d, "uu")
	set(0x9e, "B")
	set(0xa0, "4s")
	set(0xf2, "4s")
	set(0xa3, "B")
	set(0xf3, "B")
	set(0xa4, "C")
	set(0xf4, "C")
	set(0xa5, "uu")
	set(0xf5, "uu")
	set(0xa6, "1u")
	set(0xa7, "1u")
	set(0xf6, "1u")
	return a
}()

var extraOpNames = map[byte]string{
	0xa0: "DW_OP_implicit_pointer", 0xa1: "DW_OP_addrx", 0xa2: "DW_OP_constx",
	0xa3: "DW_OP_entry_value", 0xa4: "DW_OP_const_type", 0xa5: "DW_OP_regval_type",
	0xa6: "DW_OP_deref_type", 0xa7: "DW_OP_xderef_type", 0xa8: "DW_OP_convert",
	0xa9: "DW_OP_reinterpret", 0xf2: "DW_OP_GNU_implicit_pointer", 0xf3: "DW_OP_GNU_entry_value",
	0xf4: "DW_OP_GNU_const_type", 0xf5: "DW_OP_GNU_regval_type", 0xf6: "DW_OP_GNU_deref_type",
	0xf7: "DW_OP_GNU_convert", 0xf9: "DW_OP_GNU_reinterpret", 0xfa: "DW_OP_GNU_parameter_ref",
	0xfb: "DW_OP_GNU_addr_index", 0xfc: "DW_OP_GNU_const_index", 0xfd: "DW_OP_GNU_variable_value",
	0x96: "DW_OP_nop", 0x97: "DW_OP_push_object_address", 0x9b: "DW_OP_form_tls_address",
	0x98: "DW_OP_call2", 0x99: "DW_OP_call4", 0x9a: "DW_OP_call_ref", 0x9d: "DW_OP_bit_piece",
}

// exprOp is one decoded operation.
type exprOp struct {
	code  byte
	raw   []byte // the whole operation, opcode included
	block []byte // the block operand of B/C forms
	u, s  int64  // first numeric operand
}

// decodeExpr splits expr into operations; ok is false if it runs off the
// end.
func decodeExpr(expr []byte) (ops []exprOp, ok bool) {
	for i := 0; i < len(expr); {
		start := i
		o := exprOp{code: expr[i]}
		i++
		for k, a := range exprArgs[o.code] {
			switch a {
			case '1', '2', '4', '8':
				n := int(a - '0')
				if i+n > len(expr) {
					return ops, false
				}
				var v uint64
				for j := n - 1; j >= 0; j-- {
					v = v<<8 | uint64(expr[i+j])
				}
				if k == 0 {
					o.u = int64(v)
				}
				i += n
			case 'u':
				v, n := ulebN(expr[i:])
				if k == 0 {
					o.u = int64(v)
				}
				i += n
			case 's':
				v, n := slebN(expr[i:])
				if k == 0 {
					o.s = v
				} else {
					o.s = v
				}
				i += n
			case 'B':
				v, n := ulebN(expr[i:])
				i += n
				if v > uint64(len(expr)-i) {
					return ops, false
				}
				o.block = expr[i : i+int(v)]
				i += int(v)
			case 'C':
				_, n := ulebN(expr[i:])
				i += n
				if i >= len(expr) || i+1+int(expr[i]) > len(expr) {
					return ops, false
				}
				o.block = expr[i+1 : i+1+int(expr[i])]
				i += 1 + int(expr[i])
			}
		}
		if i > len(expr) {
			return ops, false
		}
		o.raw = expr[start:i]
		ops = append(ops, o)
	}
	return ops, true
}

// prettyExpr prints expr: known DWARF 2-4 operations through delve's
// op.PrettyPrint, the others here.
func prettyExpr(expr []byte) (s string) {
	defer func() {
		if r := recover(); r != nil {
			s = fmt.Sprintf("% x", expr)
		}
	}()
	ops, ok := decodeExpr(expr)
	var parts []string
	for _, o := range ops {
		name, extra := extraOpNames[o.code]
		switch {
		case o.code == 0xa3 || o.code == 0xf3:
			parts = append(parts, name+"("+prettyExpr(o.block)+")")
		case extra:
			parts = append(parts, strings.TrimSpace(fmt.Sprintf("%s % x", name, o.raw[1:])))
		default:
			var b bytes.Buffer
			op.PrettyPrint(&b, o.raw, regName)
			parts = append(parts, strings.TrimSpace(b.String()))
		}
	}
	if !ok {
		parts = append(parts, "<truncated>")
	}
	return strings.Join(parts, " ")
}
