package loc

import (
	"fmt"

	"github.com/go-delve/delve/pkg/dwarf/frame"
	"github.com/go-delve/delve/pkg/dwarf/op"
)

// Kind says where a value is.
type Kind uint8

const (
	OptimizedOut    Kind = iota // no location at the pc
	Malformed                   // the location could not be read (Err says why, if not a bad expression)
	Register                    // in register Reg
	Stack                       // in the stack frame, Offset bytes from the frame base (Base)
	Memory                      // in memory at Reg+Offset
	Global                      // in memory at Addr
	ImplicitValue               // a constant the expression holds (DW_OP_implicit_value)
	ImplicitPointer             // a pointer to a value that was optimized away
	EntryValue                  // the value Entry (register Reg if EntryReg) had at function entry
	EntryComputed               // computed from values at function entry
	Constant                    // Value, or Bytes
	Computed                    // computed by the expression (DW_OP_stack_value)
	Pieces                      // in pieces (DW_OP_piece)
	Expression                  // another expression, evaluated to an address
)

// FrameBase says how a function's frame base, which Stack offsets are
// from, is computed.
type FrameBase uint8

const (
	BaseCFA      FrameBase = iota // DW_OP_call_frame_cfa, as gcc emits: the CFA
	BaseRegister                  // register BaseReg
	BaseOther                     // the expression BaseExpr
)

// CFA is the canonical frame address at a pc: register Reg plus Offset.
type CFA struct {
	Reg    uint64
	Offset int64
}

// Location is where a value is at one pc, as a probe handler there would
// read it. Registers are DWARF register numbers (RegName names them).
type Location struct {
	Kind   Kind
	Reg    uint64 // Register; Memory's base register; EntryValue's register if EntryReg
	Offset int64  // Stack, Memory
	Addr   uint64 // Global
	Value  int64  // Constant
	Bytes  []byte // Constant given as bytes (a DW_AT_const_value block)

	// For Stack: the frame base, and where the CFA is at the pc when the
	// base is the CFA and .debug_frame says (nil otherwise): the value is
	// then at [CFA.Reg + CFA.Offset + Offset].
	Base     FrameBase
	BaseReg  uint64
	BaseExpr []byte
	CFA      *CFA

	// For EntryValue: the expression evaluated at function entry.
	Entry    []byte
	EntryReg bool

	Err error // for Malformed, when the cause is not a bad expression
}

// Available reports whether a probe handler at the pc can read the value.
func (l Location) Available() bool {
	switch l.Kind {
	case OptimizedOut, Malformed, ImplicitPointer, EntryValue, EntryComputed:
		return false
	}
	return true
}

// String says where the value is: "register rdi", "stack CFA-40 ([rsp+16]
// here)", "memory [rbx+8]", "global 0x…", "constant 3", "value rdi had at
// function entry (DW_OP_entry_value): not readable here", ...
func (l Location) String() string {
	switch l.Kind {
	case OptimizedOut:
		return "optimized out"
	case Malformed:
		if l.Err != nil {
			return "unknown (" + l.Err.Error() + ")"
		}
		return "unknown (malformed expression)"
	case Register:
		return "register " + RegName(l.Reg)
	case Stack:
		switch l.Base {
		case BaseCFA:
			s := fmt.Sprintf("stack CFA%+d", l.Offset)
			if l.CFA != nil {
				s += fmt.Sprintf(" ([%s%+d] here)", RegName(l.CFA.Reg), l.CFA.Offset+l.Offset)
			}
			return s
		case BaseRegister:
			return fmt.Sprintf("stack [%s%+d]", RegName(l.BaseReg), l.Offset)
		}
		return fmt.Sprintf("stack frame base%+d (frame base %s)", l.Offset, Pretty(l.BaseExpr))
	case Memory:
		return fmt.Sprintf("memory [%s%+d]", RegName(l.Reg), l.Offset)
	case Global:
		return fmt.Sprintf("global %#x", l.Addr)
	case ImplicitValue:
		return "constant (DW_OP_implicit_value)"
	case ImplicitPointer:
		return "pointer to a value that was optimized away (DW_OP_implicit_pointer)"
	case EntryValue:
		what := Pretty(l.Entry)
		if l.EntryReg {
			what = RegName(l.Reg)
		}
		return "value " + what + " had at function entry (DW_OP_entry_value): not readable here"
	case EntryComputed:
		return "computed from values at function entry (DW_OP_entry_value): not readable here"
	case Constant:
		if l.Bytes != nil {
			return fmt.Sprintf("constant %v", l.Bytes)
		}
		return fmt.Sprintf("constant %d", l.Value)
	case Computed:
		return "computed value"
	case Pieces:
		return "in pieces"
	}
	return "expression"
}

// Describe says where the location expression expr puts a value at the
// pc of f (nil: a function without a frame base).
func Describe(expr []byte, f *Frame) Location {
	ops, ok := Decode(expr)
	if !ok || len(ops) == 0 {
		return Location{Kind: Malformed}
	}
	o := ops[0]
	if len(ops) == 1 {
		switch {
		case isReg(o.Code):
			return Location{Kind: Register, Reg: uint64(o.Code - op.DW_OP_reg0)}
		case o.Code == op.DW_OP_regx:
			return Location{Kind: Register, Reg: uint64(o.U)}
		case o.Code == op.DW_OP_fbreg:
			return f.stackSlot(o.S)
		case isBreg(o.Code):
			return Location{Kind: Memory, Reg: uint64(o.Code - op.DW_OP_breg0), Offset: o.S}
		case o.Code == op.DW_OP_addr:
			return Location{Kind: Global, Addr: uint64(o.U)}
		case o.Code == op.DW_OP_implicit_value:
			return Location{Kind: ImplicitValue, Bytes: o.Block}
		case isImplicitPointer(o.Code):
			return Location{Kind: ImplicitPointer}
		}
	}
	entry := false
	for _, p := range ops {
		if isEntryValue(p.Code) {
			entry = true
		}
	}
	last := ops[len(ops)-1].Code
	switch {
	case entry && len(ops) == 2 && last == op.DW_OP_stack_value:
		l := Location{Kind: EntryValue, Entry: o.Block}
		if in, ok := Decode(o.Block); ok && len(in) == 1 && isReg(in[0].Code) {
			l.Reg, l.EntryReg = uint64(in[0].Code-op.DW_OP_reg0), true
		}
		return l
	case entry:
		return Location{Kind: EntryComputed}
	case len(ops) == 2 && last == op.DW_OP_stack_value && isConst(o):
		return Location{Kind: Constant, Value: constValue(o)}
	case last == op.DW_OP_stack_value:
		return Location{Kind: Computed}
	}
	for _, p := range ops {
		if p.Code == op.DW_OP_piece || p.Code == op.DW_OP_bit_piece {
			return Location{Kind: Pieces}
		}
	}
	return Location{Kind: Expression}
}

// stackSlot locates DW_OP_fbreg off. With gcc's frame base
// DW_OP_call_frame_cfa the slot is CFA+off; .debug_frame says what the
// CFA is at this pc (rsp+N when there is no frame pointer, as in Debian's
// kernel), which is what a kprobe handler can compute from pt_regs.
func (f *Frame) stackSlot(off int64) Location {
	l := Location{Kind: Stack, Offset: off, Base: BaseOther}
	var base []byte
	if f != nil {
		base = f.Base
	}
	switch {
	case len(base) == 1 && op.Opcode(base[0]) == op.DW_OP_call_frame_cfa:
		l.Base = BaseCFA
		if r, _ := f.CFA(); r != nil && r.Rule == frame.RuleCFA {
			l.CFA = &CFA{Reg: r.Reg, Offset: r.Offset}
		}
	case len(base) == 1 && isReg(op.Opcode(base[0])):
		l.Base, l.BaseReg = BaseRegister, uint64(op.Opcode(base[0])-op.DW_OP_reg0)
	default:
		l.BaseExpr = base
	}
	return l
}

// isConst reports whether o pushes a constant: DW_OP_lit*, DW_OP_const*.
func isConst(o Op) bool {
	return isLit(o.Code) || o.Code >= op.DW_OP_const1u && o.Code <= op.DW_OP_consts
}

func constValue(o Op) int64 {
	switch {
	case isLit(o.Code):
		return int64(o.Code - op.DW_OP_lit0)
	case o.Code == op.DW_OP_const1s:
		return int64(int8(o.U))
	case o.Code == op.DW_OP_const2s:
		return int64(int16(o.U))
	case o.Code == op.DW_OP_const4s:
		return int64(int32(o.U))
	case o.Code == op.DW_OP_consts:
		return o.S
	}
	return o.U
}
