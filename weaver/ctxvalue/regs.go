package ctxvalue

// RegLocation is the register a location expression names (DW_OP_regN
// alone).
func RegLocation(expr []byte) (int, bool) {
	if len(expr) == 1 && expr[0] >= 0x50 && expr[0] <= 0x6f { // DW_OP_reg0..31
		return int(expr[0] - 0x50), true
	}
	return 0, false
}

// RegValue is register reg plus k: a pointer.
func RegValue(reg int, k int64) *Value {
	v := &Value{Ops: []ValueOp{{Kind: PushReg, Reg: reg}}, Size: 8}
	if k != 0 {
		v.Ops = append(v.Ops, ValueOp{Kind: AddConst, Arg: k})
	}
	return v
}

// RegNames lists the pt_regs names of the registers in mask m.
func RegNames(m uint32) string {
	s := ""
	for r := 0; r < 32; r++ {
		if m&(1<<r) != 0 {
			if s != "" {
				s += ", "
			}
			s += RegName(r)
		}
	}
	return s
}
