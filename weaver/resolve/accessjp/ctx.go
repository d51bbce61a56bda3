package accessjp

import (
	"fmt"
	"slices"

	"golang.org/x/arch/x86/x86asm"

	"github.com/klasy/klasy/aspect"
	"github.com/klasy/klasy/debugklasy"
	"github.com/klasy/klasy/dwarfmap"
	"github.com/klasy/klasy/weaver/baseexpr"
	"github.com/klasy/klasy/weaver/ctxvalue"
	"github.com/klasy/klasy/weaver/joinpoint"
	"github.com/klasy/klasy/x86code"
)

// bind computes the advice's context values at an access join point's
// hook: target(x), the accessed struct, and each local_var(v, x). A
// parameter another AND-group binds passes NULL. inScope is false when a
// local_var's variable is not in scope at the hook: the join point is
// not selected there. A value that cannot be computed skips the join
// point with the reason; none is ever guessed.
func (ag *Group) bind(b *dwarfmap.Batch, s *site, inst dwarfmap.Instance, a debugklasy.Access, jp *joinpoint.JoinPoint, addr uint64, span hookSpan, tgt *ctxvalue.Value) (args []joinpoint.Arg, skip string, inScope bool) {
	if len(ag.Params) == 0 {
		return nil, "", true
	}
	module := s.im.Module
	out := make([]joinpoint.Arg, len(ag.Params))
	for i, p := range ag.Params {
		out[i] = joinpoint.Arg{Param: p}
		if ag.Target != nil && ag.Target.Var.Value == p {
			out[i].Var, out[i].ByValue = "target", true
			v := tgt
			if v == nil {
				var err error
				if v, err = ag.targetAt(b, inst, a, addr, span, module); err != nil {
					if skip == "" {
						skip = fmt.Sprintf("target(%s): %v", p, err)
					}
					continue
				}
			}
			out[i].Value = v
			continue
		}
		for _, lv := range ag.Locals {
			if lv.Var.Value != p {
				continue
			}
			out[i].Var = lv.Local.Value
			v, why, ok := LocalVarValue(b, addr, lv, scopeOf(inst), module)
			if !ok {
				return nil, "", false
			}
			if why != "" {
				if skip == "" {
					skip = why
				}
				continue
			}
			out[i].Value = v
		}
	}
	if skip != "" {
		return nil, skip, true
	}
	return out, "", true
}

// LocalVarValue computes local_var(v, x) at addr: &v, v the innermost
// variable of that name in scope there (of scope if one is). inScope is
// false when no v is in scope: the join point is not selected there. A
// value that cannot be computed says why.
func LocalVarValue(b *dwarfmap.Batch, addr uint64, lv *aspect.LocalVar, scope string, module string) (v *ctxvalue.Value, skip string, inScope bool) {
	vl, ok, err := varAt(b, addr, lv.Local.Value, scope)
	if err != nil {
		return nil, fmt.Sprintf("local_var(%s, %s): reading the variables there: %v", lv.Local.Value, lv.Var.Value, err), true
	}
	if !ok {
		return nil, "", false
	}
	v, err = ctxvalue.CompileLocation(ctxvalue.LocContext{VL: vl, Module: module})
	if err != nil {
		return nil, fmt.Sprintf("local_var(%s, %s): %v", lv.Local.Value, lv.Var.Value, err), true
	}
	return v, "", true
}

// targetAt computes the accessed struct's address at a line-level hook
// from the base expression the plugin recorded and the DWARF locations
// of its variables there. The hook is not on the accessing instruction,
// so the value must hold there and through the line's code up to (or
// from) the hook: a register it reads that the line's code writes makes
// it unknown.
func (ag *Group) targetAt(b *dwarfmap.Batch, inst dwarfmap.Instance, a debugklasy.Access, addr uint64, span hookSpan, module string) (*ctxvalue.Value, error) {
	base, err := ag.baseOf(b, inst, a, addr)
	if err != nil {
		return nil, err
	}
	v, err := ag.program(b, inst, base, addr, module)
	if err == nil {
		err = v.Check()
	}
	if err == nil {
		err = ag.unchanged(b, inst, a, base, v, addr, span)
	}
	if err != nil {
		// The instructions that may be the access name the struct by
		// their base register: if they all use one, unchanged between
		// them and the hook, it holds the struct at the hook too.
		if rv := ag.fromCandidates(b, base, addr, span); rv != nil {
			return rv, nil
		}
		return nil, err
	}
	return v, nil
}

// fromCandidates is the target at addr read from the base register of
// the candidate instructions of the line, when they agree and nothing
// between them and the hook (in one basic block) writes it.
func (ag *Group) fromCandidates(b *dwarfmap.Batch, base baseexpr.SVal, addr uint64, span hookSpan) *ctxvalue.Value {
	if len(span.cands) == 0 || base.Kind == baseexpr.SVConst {
		return nil
	}
	code, err := b.Code(addr)
	if err != nil {
		return nil
	}
	blo, bhi := code.Block(addr)
	reg := span.cands[0].reg
	for _, c := range span.cands {
		if c.reg != reg || c.reg < 0 || c.pc < blo || c.pc >= bhi {
			return nil
		}
		lo, hi := addr, c.pc // before: the hook runs first
		if ag.Timing == joinpoint.After {
			lo, hi = c.pc, addr // after: the access and what follows it
		}
		if hi < lo {
			return nil
		}
		for _, in := range b.Insns(lo, hi) {
			if writtenRegs(&in.Inst)&(1<<reg) != 0 {
				return nil
			}
		}
	}
	return ctxvalue.RegValue(reg, base.Off)
}

// unchanged checks that the registers v reads keep their value through
// the line's code the hook stands for.
func (ag *Group) unchanged(b *dwarfmap.Batch, inst dwarfmap.Instance, a debugklasy.Access, base baseexpr.SVal, v *ctxvalue.Value, addr uint64, span hookSpan) error {
	// The code whose writes matter: from the hook to the line's end for
	// before advice, from the line's start to the hook for after advice;
	// when the instructions that may be the access are known, only up to
	// the last of them after the hook (its own write comes after its
	// read), or from the first of them before the hook.
	var lo, hi uint64
	if ag.Timing == joinpoint.After {
		lo, hi = min(span.lo, addr), addr
		if c := slices.IndexFunc(span.cands, func(c cand) bool { return c.pc >= lo && c.pc < hi }); c >= 0 {
			lo = span.cands[c].pc
		}
	} else {
		lo, hi = addr, max(span.hi, addr)
		last := uint64(0)
		for _, c := range span.cands {
			if c.pc >= lo && c.pc < hi {
				last = max(last, c.pc)
			}
		}
		if last != 0 {
			hi = last
		}
	}
	if hi > lo && base.Kind == baseexpr.SVVar {
		// A variable: follow it through the code by its DWARF locations.
		return ag.varUnchanged(b, inst, a, base.Name, lo, hi)
	}
	if hi > lo {
		reads := v.Regs()
		for _, in := range b.Insns(lo, hi) {
			if w := writtenRegs(&in.Inst) & reads; w != 0 {
				return fmt.Errorf("%s is computed from %s, which the line's code writes at %#x (%v), so at the hook it may not hold the accessed struct", a.Base.Expr, ctxvalue.RegNames(w), in.PC, in.Inst)
			}
			if v.Reads() && writesStack(&in.Inst) {
				return fmt.Errorf("%s is read from the stack, which the line's code writes at %#x (%v)", a.Base.Expr, in.PC, in.Inst)
			}
		}
	}
	return nil
}

// varUnchanged checks that variable name keeps its value through the
// code in [lo, hi). An instruction that writes where DWARF locates the
// variable before it changes the variable, unless DWARF locates it
// elsewhere after it (the register was reused: a call's clobbered ones,
// an argument set up for a call) and the instruction writes that place
// only to copy the variable there. Where DWARF loses the variable (no
// location after a use), no later code of the line reads it.
func (ag *Group) varUnchanged(b *dwarfmap.Batch, inst dwarfmap.Instance, a debugklasy.Access, name string, lo, hi uint64) error {
	where := func(pc uint64) (reg int, ok bool) {
		vl, found, err := varAt(b, pc, name, scopeOf(inst))
		if err != nil || !found || len(vl.Expr) == 0 {
			return -1, false
		}
		if r, isReg := ctxvalue.RegLocation(vl.Expr); isReg {
			return r, true
		}
		return -1, true // in memory (or computed)
	}
	for _, in := range b.Insns(lo, hi) {
		before, ok := where(in.PC)
		if !ok {
			continue
		}
		if before < 0 {
			if writesStack(&in.Inst) {
				return fmt.Errorf("%s is on the stack, which the line's code writes at %#x (%v)", name, in.PC, in.Inst)
			}
			continue
		}
		w := writtenRegs(&in.Inst)
		if w&(1<<before) == 0 {
			continue
		}
		after, ok := where(in.End())
		switch {
		case !ok:
			continue // dead from here
		case after == before:
			return fmt.Errorf("%s is assigned on the line (at %#x, %v), so at the hook it may not hold the accessed struct", name, in.PC, in.Inst)
		case after >= 0 && w&(1<<after) != 0 && !isCopy(&in.Inst, after, before):
			return fmt.Errorf("%s is assigned on the line (at %#x, %v), so at the hook it may not hold the accessed struct", name, in.PC, in.Inst)
		}
	}
	return nil
}

// isCopy reports whether inst is a register move of DWARF register src
// into dst.
func isCopy(inst *x86asm.Inst, dst, src int) bool {
	if inst.Op != x86asm.MOV {
		return false
	}
	d, ok1 := inst.Args[0].(x86asm.Reg)
	s, ok2 := inst.Args[1].(x86asm.Reg)
	return ok1 && ok2 && x86code.DWARFReg(d) == dst && x86code.DWARFReg(s) == src
}

// program turns a symbolic base into a Value computed at addr.
func (ag *Group) program(b *dwarfmap.Batch, inst dwarfmap.Instance, sv baseexpr.SVal, addr uint64, module string) (*ctxvalue.Value, error) {
	var v *ctxvalue.Value
	switch sv.Kind {
	case baseexpr.SVVar, baseexpr.SVVarAddr:
		vl, ok, err := varAt(b, addr, sv.Name, scopeOf(inst))
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, fmt.Errorf("%s is not in scope here", sv.Name)
		}
		if sv.Kind == baseexpr.SVVar && vl.Size != 8 {
			return nil, fmt.Errorf("%s is %d bytes, not a pointer", sv.Name, vl.Size)
		}
		if v, err = ctxvalue.CompileLocation(ctxvalue.LocContext{VL: vl, Module: module}); err != nil {
			return nil, fmt.Errorf("%s: %v", sv.Name, err)
		}
		if sv.Kind == baseexpr.SVVarAddr {
			if !v.InMemory {
				return nil, fmt.Errorf("%s is in a register here, so it has no address", sv.Name)
			}
			v.InMemory = false
		}
		v.Size = 8
	case baseexpr.SVLoad:
		sub, err := ag.program(b, inst, *sv.Sub, addr, module)
		if err != nil {
			return nil, err
		}
		v = &ctxvalue.Value{Ops: append(sub.ValueOps(), ctxvalue.ValueOp{Kind: ctxvalue.Deref, Size: sv.Size}), Size: 8}
	case baseexpr.SVCall:
		return nil, fmt.Errorf("the struct's address is the result of %s, only known at the accessing instruction", sv.Name)
	default:
		return nil, fmt.Errorf("the struct is not reached through a variable (%s)", sv)
	}
	if sv.Off != 0 {
		v.Ops = append(v.ValueOps(), ctxvalue.ValueOp{Kind: ctxvalue.AddConst, Arg: sv.Off})
		v.InMemory = false
	}
	return v, nil
}

// callClobbered are the registers a call may change (System V psABI):
// rax, rdx, rcx, rsi, rdi, r8–r11 in DWARF numbers.
const callClobbered = 1<<0 | 1<<1 | 1<<2 | 1<<4 | 1<<5 | 1<<8 | 1<<9 | 1<<10 | 1<<11

// writtenRegs is the set of registers an instruction may write.
func writtenRegs(inst *x86asm.Inst) uint32 {
	switch inst.Op {
	case x86asm.CALL, x86asm.LCALL:
		return callClobbered
	case x86asm.CMP, x86asm.TEST, x86asm.BT, x86asm.JMP, x86asm.NOP, x86asm.UCOMISS, x86asm.UCOMISD,
		x86asm.COMISS, x86asm.COMISD:
		return 0
	case x86asm.PUSH, x86asm.POP, x86asm.RET, x86asm.LEAVE, x86asm.ENTER:
		// The stack pointer moves; the CFA rule of each address says
		// where it is, so only a popped register changes.
		if r, ok := inst.Args[0].(x86asm.Reg); ok && inst.Op == x86asm.POP {
			return regBit(r)
		}
		if inst.Op == x86asm.LEAVE {
			return 1<<6 | 1<<7
		}
		return 0
	case x86asm.MUL, x86asm.IMUL, x86asm.DIV, x86asm.IDIV, x86asm.CQO, x86asm.CDQ, x86asm.CWD, x86asm.CDQE, x86asm.CWDE,
		x86asm.CPUID, x86asm.RDTSC, x86asm.RDTSCP, x86asm.RDMSR, x86asm.XGETBV, x86asm.CMPXCHG, x86asm.CMPXCHG8B,
		x86asm.CMPXCHG16B, x86asm.LODSB, x86asm.LODSW, x86asm.LODSD, x86asm.LODSQ, x86asm.STOSB, x86asm.STOSW,
		x86asm.STOSD, x86asm.STOSQ, x86asm.MOVSB, x86asm.MOVSW, x86asm.MOVSD, x86asm.MOVSQ, x86asm.SCASB,
		x86asm.SCASW, x86asm.SCASD, x86asm.SCASQ, x86asm.CMPSB, x86asm.CMPSW, x86asm.CMPSD, x86asm.CMPSQ,
		x86asm.SYSCALL, x86asm.LOOP, x86asm.LOOPE, x86asm.LOOPNE:
		m := uint32(1<<0 | 1<<1 | 1<<2 | 1<<4 | 1<<5)
		if r, ok := inst.Args[0].(x86asm.Reg); ok {
			m |= regBit(r)
		}
		return m
	case x86asm.XCHG, x86asm.XADD:
		var m uint32
		for _, a := range inst.Args {
			if r, ok := a.(x86asm.Reg); ok {
				m |= regBit(r)
			}
		}
		return m
	}
	if len(inst.Args) > 0 {
		if r, ok := inst.Args[0].(x86asm.Reg); ok {
			return regBit(r)
		}
	}
	return 0
}

func regBit(r x86asm.Reg) uint32 {
	if n := x86code.DWARFReg(r); n >= 0 {
		return 1 << n
	}
	return 0
}

// writesStack reports whether an instruction stores through rsp or rbp.
func writesStack(inst *x86asm.Inst) bool {
	acc, ok := x86code.Access(inst)
	if !ok || acc.Kind == x86code.Load || acc.Kind == x86code.Addr {
		return false
	}
	return acc.Mem.Base == x86asm.RSP || acc.Mem.Base == x86asm.RBP
}
