package ctxvalue

import (
	"fmt"

	"github.com/go-delve/delve/pkg/dwarf/op"

	"github.com/klasy/klasy/dwarfmap"
	"github.com/klasy/klasy/dwarfmap/loc"
)

// constValue is the value a DW_OP_const* pushes: its fixed-size operand,
// sign-extended for the signed forms, or its LEB128 operand.
func constValue(o loc.Op) int64 {
	switch o.Code {
	case op.DW_OP_const1s:
		return int64(int8(o.U))
	case op.DW_OP_const2s:
		return int64(int16(o.U))
	case op.DW_OP_const4s:
		return int64(int32(o.U))
	case op.DW_OP_consts:
		return o.S
	}
	return o.U
}

// LocContext is what compiling a location needs beyond the expression.
type LocContext struct {
	VL dwarfmap.VarLoc
	// AtEntry: the hook is at the entry of the out-of-line function the
	// variable belongs to, where DW_OP_entry_value(X) is X itself.
	AtEntry bool
	// Module is the module the variable is in ("" for the kernel): its
	// static addresses are those of the .ko as elfimage lays it out, to
	// be relocated to where the module is loaded (PushModAddr).
	Module string
}

// CompileLocation turns a variable's DWARF location at a hook into a
// Value, or says why its value cannot be computed there.
func CompileLocation(lc LocContext) (*Value, error) {
	vl := lc.VL
	size := int(vl.Size)
	if size <= 0 {
		return nil, fmt.Errorf("its type has no known size")
	}
	if size > 8 {
		return nil, fmt.Errorf("it is %d bytes, more than a register; pass a pointer to it instead", size)
	}
	if vl.HasConst {
		return &Value{Ops: []ValueOp{{Kind: PushConst, Arg: vl.Const}}, Size: size}, nil
	}
	if len(vl.Expr) == 0 {
		return nil, fmt.Errorf("optimized out here")
	}
	v := &Value{Size: size, InMemory: true}
	if err := lc.compile(v, vl.Expr, 0); err != nil {
		return nil, err
	}
	if err := v.Check(); err != nil {
		return nil, err
	}
	return v, nil
}

// compile appends expr's operations to v. A register location
// (DW_OP_regN) or DW_OP_stack_value makes v a value rather than an
// address.
func (lc *LocContext) compile(v *Value, expr []byte, depth int) error {
	ops, ok := loc.Decode(expr)
	if !ok {
		return fmt.Errorf("its location expression is malformed (% x)", expr)
	}
	push := func(k ValueOpKind, reg int, arg int64) { v.Ops = append(v.Ops, ValueOp{Kind: k, Reg: reg, Arg: arg}) }
	for i, o := range ops {
		c := o.Code
		switch {
		case c >= op.DW_OP_reg0 && c <= op.DW_OP_reg31, c == op.DW_OP_regx:
			reg := int(c - op.DW_OP_reg0)
			if c == op.DW_OP_regx {
				reg = int(o.U)
			}
			if len(ops) != 1 {
				return fmt.Errorf("it is split across registers (DW_OP_piece)")
			}
			if RegName(reg) == "" {
				return fmt.Errorf("it is in DWARF register %d, which a kprobe does not save", reg)
			}
			push(PushReg, reg, 0)
			v.InMemory = false
		case c >= op.DW_OP_breg0 && c <= op.DW_OP_breg31, c == op.DW_OP_bregx:
			reg := int(c - op.DW_OP_breg0)
			if c == op.DW_OP_bregx {
				reg = int(o.U)
			}
			push(PushReg, reg, 0)
			if o.S != 0 {
				push(AddConst, 0, o.S)
			}
		case c == op.DW_OP_fbreg:
			if err := lc.frameBase(v); err != nil {
				return err
			}
			if o.S != 0 {
				push(AddConst, 0, o.S)
			}
		case c == op.DW_OP_call_frame_cfa:
			if err := lc.cfa(v); err != nil {
				return err
			}
		case c >= op.DW_OP_lit0 && c <= op.DW_OP_lit31:
			push(PushConst, 0, int64(c-op.DW_OP_lit0))
		case c >= op.DW_OP_const1u && c <= op.DW_OP_consts:
			push(PushConst, 0, constValue(o))
		case c == op.DW_OP_addr:
			if lc.Module != "" {
				v.Ops = append(v.Ops, ValueOp{Kind: PushModAddr, Arg: int64(o.U), Module: lc.Module})
				continue
			}
			push(PushAddr, 0, int64(o.U))
		case c == op.DW_OP_plus_uconst:
			push(AddConst, 0, int64(o.U))
		case c == op.DW_OP_deref:
			v.Ops = append(v.Ops, ValueOp{Kind: Deref, Size: 8})
		case c == op.DW_OP_deref_size:
			v.Ops = append(v.Ops, ValueOp{Kind: Deref, Size: int(o.U)})
		case c == op.DW_OP_plus:
			push(Add, 0, 0)
		case c == op.DW_OP_minus:
			push(Sub, 0, 0)
		case c == op.DW_OP_mul:
			push(Mul, 0, 0)
		case c == op.DW_OP_and:
			push(And, 0, 0)
		case c == op.DW_OP_or:
			push(Or, 0, 0)
		case c == op.DW_OP_xor:
			push(Xor, 0, 0)
		case c == op.DW_OP_shl:
			push(Shl, 0, 0)
		case c == op.DW_OP_shr:
			push(Shr, 0, 0)
		case c == op.DW_OP_shra:
			push(Shra, 0, 0)
		case c == op.DW_OP_neg:
			push(Neg, 0, 0)
		case c == op.DW_OP_not:
			push(Not, 0, 0)
		case c == op.DW_OP_stack_value:
			if i != len(ops)-1 {
				return fmt.Errorf("its location is in pieces")
			}
			v.InMemory = false
		case c == op.DW_OP_piece:
			// One piece covering the whole variable is the variable.
			if i == len(ops)-1 && int(o.U) >= v.Size && i > 0 {
				continue
			}
			return fmt.Errorf("it is split into pieces (DW_OP_piece)")
		case c == loc.DW_OP_entry_value || c == loc.DW_OP_GNU_entry_value:
			if !lc.AtEntry || depth > 0 {
				return fmt.Errorf("it is only known as a value at function entry (DW_OP_entry_value), which is gone here")
			}
			// At the function's entry the entry value of a register is
			// the register (DWARF 5 §2.5.1.7).
			inner := &Value{Size: v.Size}
			if err := lc.compile(inner, o.Block, depth+1); err != nil {
				return err
			}
			v.Ops = append(v.Ops, inner.Ops...)
		case c == loc.DW_OP_implicit_pointer || c == loc.DW_OP_GNU_implicit_pointer:
			return fmt.Errorf("it points to a value that was optimized away (DW_OP_implicit_pointer)")
		case c == loc.DW_OP_GNU_parameter_ref:
			return fmt.Errorf("its value is only known in the caller (DW_OP_GNU_parameter_ref)")
		default:
			return fmt.Errorf("its location uses DWARF operation %#x, which klasy does not compute", o.Code)
		}
	}
	return nil
}

// frameBase pushes the function's frame base: gcc's is the CFA.
func (lc *LocContext) frameBase(v *Value) error {
	fb := lc.VL.FrameBase
	if len(fb) == 1 && op.Opcode(fb[0]) == op.DW_OP_call_frame_cfa {
		return lc.cfa(v)
	}
	if len(fb) == 1 && op.Opcode(fb[0]) >= op.DW_OP_reg0 && op.Opcode(fb[0]) <= op.DW_OP_reg31 {
		reg := int(fb[0] - byte(op.DW_OP_reg0))
		if RegName(reg) == "" {
			return fmt.Errorf("its frame base is DWARF register %d, which a kprobe does not save", reg)
		}
		v.Ops = append(v.Ops, ValueOp{Kind: PushReg, Reg: reg})
		return nil
	}
	return fmt.Errorf("its function's frame base (% x) is not one klasy computes", fb)
}

// cfa pushes the canonical frame address at the hook from the call frame
// information: register + offset.
func (lc *LocContext) cfa(v *Value) error {
	if !lc.VL.HasCFA {
		return fmt.Errorf("the call frame information gives no CFA rule here")
	}
	reg := int(lc.VL.CFAReg)
	if RegName(reg) == "" {
		return fmt.Errorf("the CFA is relative to DWARF register %d, which a kprobe does not save", reg)
	}
	v.Ops = append(v.Ops, ValueOp{Kind: PushReg, Reg: reg})
	if lc.VL.CFAOffset != 0 {
		v.Ops = append(v.Ops, ValueOp{Kind: AddConst, Arg: lc.VL.CFAOffset})
	}
	return nil
}
