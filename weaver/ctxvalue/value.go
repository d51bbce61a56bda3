package ctxvalue

import (
	"fmt"
	"slices"
	"strings"
)

// A Value says how a context variable is computed at a hook from the
// registers the kprobe saved: a small stack program translated from the
// variable's DWARF location at that address (DWARF 5 §2.5/2.6), with
// memory read only through copy_from_kernel_nofault.
type Value struct {
	Ops []ValueOp
	// Size is the variable's size in bytes (1 to 8).
	Size int
	// InMemory: the program leaves the variable's address; its Size bytes
	// are read from there. Otherwise the program leaves the value itself.
	InMemory bool
}

// ValueOpKind is one operation of a Value's program.
type ValueOpKind uint8

const (
	PushReg   ValueOpKind = iota // push the value of DWARF register Reg
	PushConst                    // push Arg
	AddConst                     // top += Arg
	Deref                        // top = *(Size bytes at top), unsigned
	Add                          // pop b, a; push a + b
	Sub                          // pop b, a; push a - b
	Mul                          // pop b, a; push a * b
	And                          // pop b, a; push a & b
	Or                           // pop b, a; push a | b
	Xor                          // pop b, a; push a ^ b
	Shl                          // pop b, a; push a << b
	Shr                          // pop b, a; push a >> b (logical)
	Shra                         // pop b, a; push a >> b (arithmetic)
	Neg                          // top = -top
	Not                          // top = ^top
	// PushAddr pushes Arg, an address in the kernel image, plus the
	// running kernel's KASLR slide (klasy_slide in the advice module).
	PushAddr
	// PushModAddr is Arg, an address of module Module's .ko as
	// elfimage lays it out: a static variable of the module. Where it is
	// depends on the module's load, so it has no C until Relocate has
	// made it a PushLoaded.
	PushModAddr
	// PushLoaded pushes Arg, a running address of module Module: a
	// relocated PushModAddr, right for the load it was relocated for.
	PushLoaded
)

// ValueOp is one step; Reg, Arg and Size are used by the ops above that
// name them.
type ValueOp struct {
	Kind   ValueOpKind
	Reg    int
	Arg    int64
	Size   int
	Module string // PushModAddr's and PushLoaded's module
}

// Reads reports whether computing v reads memory, which can fault.
func (v *Value) Reads() bool {
	if v.InMemory {
		return true
	}
	for _, op := range v.Ops {
		if op.Kind == Deref {
			return true
		}
	}
	return false
}

// ptRegs maps x86-64 DWARF register numbers (System V psABI, fig. 3.36)
// to struct pt_regs fields.
var ptRegs = [...]string{
	0: "ax", 1: "dx", 2: "cx", 3: "bx", 4: "si", 5: "di", 6: "bp", 7: "sp",
	8: "r8", 9: "r9", 10: "r10", 11: "r11", 12: "r12", 13: "r13", 14: "r14", 15: "r15",
	16: "ip",
}

// RegName is the pt_regs field of DWARF register n, or "" if the saved
// registers do not hold it.
func RegName(n int) string {
	if n < 0 || n >= len(ptRegs) {
		return ""
	}
	return ptRegs[n]
}

// binaryOps are the C operators of the two-operand ops.
var binaryOps = map[ValueOpKind]string{
	Add: "+", Sub: "-", Mul: "*", And: "&", Or: "|", Xor: "^", Shl: "<<", Shr: ">>",
}

// Check verifies the program is well formed: it never pops an empty
// stack, leaves exactly one value, and names only saved registers.
func (v *Value) Check() error {
	if v.Size < 1 || v.Size > 8 {
		return fmt.Errorf("a %d-byte value does not fit a register", v.Size)
	}
	depth := 0
	for _, op := range v.Ops {
		switch op.Kind {
		case PushReg:
			if RegName(op.Reg) == "" {
				return fmt.Errorf("DWARF register %d is not among the saved registers", op.Reg)
			}
			depth++
		case PushConst, PushAddr, PushModAddr, PushLoaded:
			depth++
		case AddConst, Neg, Not:
			if depth < 1 {
				return fmt.Errorf("malformed location: operation on an empty stack")
			}
		case Deref:
			if depth < 1 {
				return fmt.Errorf("malformed location: operation on an empty stack")
			}
			if op.Size < 1 || op.Size > 8 {
				return fmt.Errorf("malformed location: %d-byte dereference", op.Size)
			}
		case Add, Sub, Mul, And, Or, Xor, Shl, Shr, Shra:
			if depth < 2 {
				return fmt.Errorf("malformed location: operation on an empty stack")
			}
			depth--
		default:
			return fmt.Errorf("unknown value operation %d", op.Kind)
		}
	}
	if depth != 1 {
		return fmt.Errorf("malformed location: %d values left on the stack", depth)
	}
	return nil
}

// C writes statements that compute v into the u64 lvalue dst, reading
// registers through the struct pt_regs pointer regs; a memory read that
// faults jumps to fail. The stack lives in C locals named prefix0,
// prefix1..., and a read goes through prefix_m.
func (v *Value) C(w *strings.Builder, indent, dst, regs, prefix, fail string) error {
	if err := v.Check(); err != nil {
		return err
	}
	var body strings.Builder
	emit := func(format string, args ...any) {
		body.WriteString(indent)
		fmt.Fprintf(&body, format, args...)
		body.WriteByte('\n')
	}
	slot := func(i int) string { return fmt.Sprintf("%s%d", prefix, i) }
	mem := prefix + "_m"
	// Read into a zeroed u64: x86 is little-endian, so a narrower value
	// lands in the low bytes, zero-extended.
	read := func(addr string, size int) {
		emit("%s = 0;", mem)
		emit("if (copy_from_kernel_nofault(&%s, (const void *)%s, %d))", mem, addr, size)
		emit("\tgoto %s;", fail)
	}
	sp, depth, reads := 0, 0, false
	for _, op := range v.Ops {
		switch op.Kind {
		case PushReg:
			emit("%s = %s->%s;", slot(sp), regs, RegName(op.Reg))
			sp++
		case PushConst:
			emit("%s = (u64)%dLL;", slot(sp), op.Arg)
			sp++
		case PushAddr:
			emit("%s = (u64)%#xULL + klasy_slide;", slot(sp), uint64(op.Arg))
			sp++
		case PushModAddr:
			return fmt.Errorf("%#x of module %s is not relocated to where the module is loaded", uint64(op.Arg), op.Module)
		case PushLoaded:
			emit("%s = (u64)%#xULL; /* in %s as loaded */", slot(sp), uint64(op.Arg), op.Module)
			sp++
		case AddConst:
			emit("%s += (u64)%dLL;", slot(sp-1), op.Arg)
		case Neg:
			emit("%s = -%s;", slot(sp-1), slot(sp-1))
		case Not:
			emit("%s = ~%s;", slot(sp-1), slot(sp-1))
		case Deref:
			read(slot(sp-1), op.Size)
			emit("%s = %s;", slot(sp-1), mem)
			reads = true
		case Shra:
			emit("%s = (u64)((s64)%s >> %s);", slot(sp-2), slot(sp-2), slot(sp-1))
			sp--
		default:
			emit("%s = %s %s %s;", slot(sp-2), slot(sp-2), binaryOps[op.Kind], slot(sp-1))
			sp--
		}
		depth = max(depth, sp)
	}
	if v.InMemory {
		read(slot(0), v.Size)
		emit("%s = %s;", dst, mem)
		reads = true
	} else {
		emit("%s = %s;", dst, slot(0))
	}
	var decl []string
	for i := 0; i < depth; i++ {
		decl = append(decl, slot(i))
	}
	if reads {
		decl = append(decl, mem)
	}
	fmt.Fprintf(w, "%su64 %s;\n", indent, strings.Join(decl, ", "))
	w.WriteString(body.String())
	return nil
}

// String prints the program for reports and tests, e.g. "reg7 +8 deref8".
func (v *Value) String() string {
	var parts []string
	for _, op := range v.Ops {
		switch op.Kind {
		case PushReg:
			parts = append(parts, RegName(op.Reg))
		case PushConst:
			parts = append(parts, fmt.Sprint(op.Arg))
		case PushAddr:
			parts = append(parts, fmt.Sprintf("%#x+slide", uint64(op.Arg)))
		case PushModAddr:
			parts = append(parts, fmt.Sprintf("%s:%#x", op.Module, uint64(op.Arg)))
		case PushLoaded:
			parts = append(parts, fmt.Sprintf("%#x[%s]", uint64(op.Arg), op.Module))
		case AddConst:
			parts = append(parts, fmt.Sprintf("%+d", op.Arg))
		case Deref:
			parts = append(parts, fmt.Sprintf("deref%d", op.Size))
		case Neg:
			parts = append(parts, "neg")
		case Not:
			parts = append(parts, "not")
		case Shra:
			parts = append(parts, "shra")
		default:
			parts = append(parts, binaryOps[op.Kind])
		}
	}
	s := strings.Join(parts, " ")
	if v.InMemory {
		return fmt.Sprintf("[%s]%d", s, v.Size)
	}
	return fmt.Sprintf("%s:%d", s, v.Size)
}

// ValueOps is a program that leaves v's value itself.
func (v *Value) ValueOps() []ValueOp {
	ops := append([]ValueOp(nil), v.Ops...)
	if v.InMemory {
		ops = append(ops, ValueOp{Kind: Deref, Size: v.Size})
	}
	return ops
}

// Regs is the set of DWARF registers v reads, as a bit mask.
func (v *Value) Regs() uint32 {
	var m uint32
	for _, op := range v.Ops {
		if op.Kind == PushReg && op.Reg < 32 {
			m |= 1 << op.Reg
		}
	}
	return m
}

// ModuleAddrs are the addresses of module statics v pushes (PushModAddr),
// in order.
func (v *Value) ModuleAddrs() []ValueOp {
	var ops []ValueOp
	for _, op := range v.Ops {
		if op.Kind == PushModAddr {
			ops = append(ops, op)
		}
	}
	return ops
}

// Relocate returns v with each PushModAddr made a PushLoaded at the
// running address loaded gives it; v itself is not changed.
func (v *Value) Relocate(loaded func(module string, addr uint64) (uint64, error)) (*Value, error) {
	out := *v
	out.Ops = slices.Clone(v.Ops)
	for i, op := range out.Ops {
		if op.Kind != PushModAddr {
			continue
		}
		a, err := loaded(op.Module, uint64(op.Arg))
		if err != nil {
			return nil, err
		}
		out.Ops[i] = ValueOp{Kind: PushLoaded, Arg: int64(a), Module: op.Module}
	}
	return &out, nil
}
