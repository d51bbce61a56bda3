package dwarfmap

import (
	"debug/dwarf"
	"fmt"

	"github.com/go-delve/delve/pkg/dwarf/frame"
	"github.com/go-delve/delve/pkg/dwarf/godwarf"
	"golang.org/x/arch/x86/x86asm"
)

// VarLoc is a variable visible at an address with what a program needs
// to compute its value there from the registers: the raw location
// expression, the frame base and the CFA rule. VarsAt describes the same
// in words for people; the weaver compiles this.
type VarLoc struct {
	Var
	// Expr is the location expression in force at Addr; nil when the
	// variable has none there (optimized out) or is a constant.
	Expr []byte
	// Const is DW_AT_const_value, when HasConst.
	Const    int64
	HasConst bool
	// FrameBase is the function's DW_AT_frame_base expression.
	FrameBase []byte
	// CFAReg and CFAOffset give the CFA at Addr as register + offset
	// (DWARF register numbers), when HasCFA.
	CFAReg    uint64
	CFAOffset int64
	HasCFA    bool
	// Size is the byte size of the variable's type (0 if unknown).
	Size int64
}

// VarLocsAt returns the parameters and locals in scope at addr with
// their raw locations, outermost scope first, as VarsAt does.
func (x *Index) VarLocsAt(addr uint64) (locs []VarLoc, err error) {
	defer func() {
		if r := recover(); r != nil {
			locs, err = nil, fmt.Errorf("malformed debug info at %#x: %v", addr, r)
		}
	}()
	tree, lc, err := x.scopeAt(addr)
	if err != nil {
		return nil, err
	}
	var walk func(t *godwarf.Tree, scope string, depth int)
	walk = func(t *godwarf.Tree, scope string, depth int) {
		for _, c := range t.Children {
			switch c.Tag {
			case dwarf.TagFormalParameter, dwarf.TagVariable:
				locs = append(locs, lc.varLoc(c, scope, depth))
			case dwarf.TagLexDwarfBlock:
				if c.ContainsPC(addr) {
					walk(c, scope, depth+1)
				}
			case dwarf.TagInlinedSubroutine:
				if c.ContainsPC(addr) {
					name, _ := c.Val(dwarf.AttrName).(string)
					walk(c, "inline "+name, depth+1)
				}
			}
		}
	}
	fi, _ := x.FuncAt(addr)
	walk(tree, fi.Name, 0)
	return locs, nil
}

// scopeAt loads the DIE tree of the function holding addr.
func (x *Index) scopeAt(addr uint64) (*godwarf.Tree, *locContext, error) {
	if err := x.needImage(); err != nil {
		return nil, nil, err
	}
	x, err := x.use(funcAtSecs)
	if err != nil {
		return nil, nil, err
	}
	fi, ok := x.FuncAt(addr)
	if !ok {
		return nil, nil, fmt.Errorf("no function with debug info at %#x", addr)
	}
	f := x.funcs[fi.index]
	u := x.units[f.Unit]
	d, err := x.img.unitDWARF(u.Off, u.End)
	if err != nil {
		return nil, nil, err
	}
	tree, err := godwarf.LoadTree(dwarf.Offset(f.DIE-u.Off), d, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("reading %s: %w", fi.Name, err)
	}
	lc := &locContext{x: x, u: u, d: d, pc: addr, tn: newTypeNamer(d)}
	if fb, ok := tree.Val(dwarf.AttrFrameBase).([]byte); ok {
		lc.frameBase = fb
	}
	return tree, lc, nil
}

func (lc *locContext) varLoc(t *godwarf.Tree, scope string, depth int) VarLoc {
	vl := VarLoc{Var: lc.variable(t, scope, depth), FrameBase: lc.frameBase}
	if typ, ok := t.Val(dwarf.AttrType).(dwarf.Offset); ok {
		vl.Size = lc.tn.size(typ)
	}
	switch cv := t.Val(dwarf.AttrConstValue).(type) {
	case int64:
		vl.Const, vl.HasConst = cv, true
	case uint64:
		vl.Const, vl.HasConst = int64(cv), true
	}
	if f := t.AttrField(dwarf.AttrLocation); f != nil {
		switch f.Class {
		case dwarf.ClassExprLoc, dwarf.ClassBlock:
			vl.Expr, _ = f.Val.([]byte)
		case dwarf.ClassLocListPtr, dwarf.ClassLocList:
			off, _ := f.Val.(int64)
			vl.Expr, _ = lc.loclist(off, f.Class)
		}
	}
	if r := lc.cfaRule(); r != nil && r.Rule == frame.RuleCFA {
		vl.CFAReg, vl.CFAOffset, vl.HasCFA = r.Reg, r.Offset, true
	}
	return vl
}

// InlineEntry is where an inlined copy of a function begins.
type InlineEntry struct {
	InlineInfo
	// Entry is the copy's DW_AT_entry_pc, else the start of its first
	// range.
	Entry uint64
}

// InlineEntries returns the inlined copies of the function name with
// their entry addresses.
func (x *Index) InlineEntries(name string) ([]InlineEntry, error) {
	if err := x.needImage(); err != nil {
		return nil, err
	}
	x, err := x.use(inlineSecs)
	if err != nil {
		return nil, err
	}
	lo, hi := x.nameRange(len(x.inlName), x.inlineName, name, true)
	var out []InlineEntry
	for _, i := range x.inlName[lo:hi] {
		in := x.inlines[i]
		e := InlineEntry{InlineInfo: InlineInfo{Name: name, CallFile: x.File(in.CallFile), CallLine: int(in.CallLine),
			Ranges: x.inlRanges[in.RngOff : in.RngOff+in.RngN]}}
		if in.Caller != noFile {
			e.Caller = x.str(x.funcs[in.Caller].Name)
		}
		if len(e.Ranges) > 0 {
			e.Entry = e.Ranges[0][0]
		}
		u := x.units[in.Unit]
		d, err := x.img.unitDWARF(u.Off, u.End)
		if err != nil {
			return nil, err
		}
		r := d.Reader()
		r.Seek(dwarf.Offset(in.DIE - u.Off))
		die, err := r.Next()
		if err == nil && die != nil {
			switch pc := die.Val(dwarf.AttrEntrypc).(type) {
			case uint64:
				e.Entry = pc
			case int64:
				// DW_FORM_data*: an offset from the copy's low_pc (DWARF 5).
				if low, ok := die.Val(dwarf.AttrLowpc).(uint64); ok {
					e.Entry = low + uint64(pc)
				} else if len(e.Ranges) > 0 {
					e.Entry = e.Ranges[0][0] + uint64(pc)
				}
			}
		}
		out = append(out, e)
	}
	return out, nil
}

// ExprOp is one operation of a DWARF expression: its opcode, its first
// unsigned operand U (for DW_OP_bregx the register), its signed operand S
// (an offset), and the block of DW_OP_entry_value and its kind.
type ExprOp struct {
	Code  byte
	U     uint64
	S     int64
	Block []byte
}

// DecodeExpr splits a DWARF expression into its operations.
func DecodeExpr(expr []byte) ([]ExprOp, error) {
	ops, ok := decodeExpr(expr)
	if !ok {
		return nil, fmt.Errorf("malformed DWARF expression % x", expr)
	}
	out := make([]ExprOp, len(ops))
	for i, o := range ops {
		out[i] = ExprOp{Code: o.code, U: uint64(o.u), S: o.s, Block: o.block}
		if isConst(o) {
			out[i].S = constValue(o)
		}
	}
	return out, nil
}

// CheckInstruction reports whether addr is the start of an instruction
// inside a function with debug info, decoding that function's range from
// its start with x86asm. The kernel accepts a kprobe past a function's
// end and silently probes the next one, so the weaver checks first.
func (x *Index) CheckInstruction(addr uint64) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("decoding code at %#x: %v", addr, r)
		}
	}()
	if err := x.needImage(); err != nil {
		return err
	}
	if x, err = x.use(funcAtSecs); err != nil {
		return err
	}
	fi, ok := x.FuncAt(addr)
	if !ok {
		return fmt.Errorf("%#x is in no function with debug info", addr)
	}
	for _, r := range fi.Ranges {
		if addr < r[0] || addr >= r[1] {
			continue
		}
		code := x.img.readText(r[0], addr-r[0]+16)
		if code == nil {
			return fmt.Errorf("no code bytes for %s at %#x in the image", fi.Name, r[0])
		}
		for pc := r[0]; pc < addr; {
			inst, err := x86asm.Decode(code[pc-r[0]:], 64)
			if err != nil {
				return fmt.Errorf("%s+%#x: %v", fi.Name, pc-fi.Entry, err)
			}
			pc += uint64(inst.Len)
			if pc > addr {
				return fmt.Errorf("%s+%#x is inside the instruction at %s+%#x", fi.Name, addr-fi.Entry, fi.Name, pc-uint64(inst.Len)-fi.Entry)
			}
		}
		return nil
	}
	return fmt.Errorf("%#x is not in %s", addr, fi.Name)
}

// LineAt returns the source file and line of the line-table row at addr
// (the first of several at one address), ok false if no row starts there.
func (x *Index) LineAt(addr uint64) (file string, line int, ok bool) {
	x, err := x.use(funcLineSecs)
	if err != nil {
		return "", 0, false
	}
	for _, ri := range x.rowsIn(addr, addr+1) {
		row := x.row(ri)
		if row.Flags&RowEndSequence == 0 && row.Line > 0 {
			return x.File(row.File), int(row.Line), true
		}
	}
	return "", 0, false
}
