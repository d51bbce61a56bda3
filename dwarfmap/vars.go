package dwarfmap

import (
	"debug/dwarf"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"

	"github.com/go-delve/delve/pkg/dwarf/frame"
	"github.com/go-delve/delve/pkg/dwarf/godwarf"
	"github.com/go-delve/delve/pkg/dwarf/loclist"
	"github.com/go-delve/delve/pkg/dwarf/op"
	"github.com/go-delve/delve/pkg/dwarf/regnum"

	"github.com/klasy/klasy/dwarfmap/dwtype"
	"github.com/klasy/klasy/dwarfmap/elfimage"
)

// Var is a parameter or local variable visible at an address, with where
// its value is at that address.
type Var struct {
	Name string `json:"name"`
	Kind string `json:"kind"` // "param" or "local"
	Type string `json:"type"`
	// Location says how to read the value at Addr: "register rdi",
	// "stack CFA-40 (rsp+16 here)", "memory [rbx+8]", "global 0x…",
	// "value of rdi at function entry (DW_OP_entry_value)", "computed
	// value", "constant 3" or "optimized out".
	Location string `json:"location"`
	// Expr is the DWARF expression in force at Addr ("" if none).
	Expr string `json:"expr,omitempty"`
	// Scope is the function, or "inline NAME" for a variable of an
	// inlined copy; Depth counts lexical blocks from the function.
	Scope    string `json:"scope"`
	Depth    int    `json:"depth"`
	DeclLine int    `json:"decl_line,omitempty"`
	Addr     uint64 `json:"-"`
	// Line is the source line of Addr when asked by FUNC:LINE;
	// FallbackFor is set when that line had no code and Line, the line
	// before it in the same basic block, stands in for it.
	Line        int `json:"line,omitempty"`
	FallbackFor int `json:"fallback_for,omitempty"`
	// Available is false when the value cannot be read at Addr.
	Available bool `json:"available"`
}

// VarsAt returns the parameters and locals in scope at addr, outermost
// scope first.
func (x *Index) VarsAt(addr uint64) (vars []Var, err error) {
	// Decoding here runs over DWARF and .debug_frame that the build did
	// not check (delve's frame package panics on some damage): a damaged
	// image gives an error, not a crash.
	defer func() {
		if r := recover(); r != nil {
			vars, err = nil, fmt.Errorf("malformed debug info at %#x: %v", addr, r)
		}
	}()
	if err := x.needImage(); err != nil {
		return nil, err
	}
	if x, err = x.use(funcAtSecs); err != nil {
		return nil, err
	}
	fi, ok := x.FuncAt(addr)
	if !ok {
		return nil, fmt.Errorf("no function with debug info at %#x", addr)
	}
	f := x.funcs[fi.index]
	u := x.units[f.Unit]
	d, err := x.img.UnitDWARF(u.Off, u.End)
	if err != nil {
		return nil, err
	}
	var tree *godwarf.Tree
	func() {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("malformed DWARF in %s: %v", fi.Name, r)
			}
		}()
		tree, err = godwarf.LoadTree(dwarf.Offset(f.DIE-u.Off), d, 0)
	}()
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", fi.Name, err)
	}
	lc := &locContext{x: x, u: u, d: d, pc: addr, tn: dwtype.NewNamer(d)}
	if fb, ok := tree.Val(dwarf.AttrFrameBase).([]byte); ok {
		lc.frameBase = fb
	}
	var out []Var
	lc.walk(tree, fi.Name, 0, &out)
	return out, nil
}

type locContext struct {
	x         *Index
	u         Unit
	d         *dwarf.Data
	pc        uint64
	tn        *dwtype.Namer
	frameBase []byte
	cfa       *frame.DWRule
	cfaErr    error
	cfaDone   bool
}

func (lc *locContext) walk(t *godwarf.Tree, scope string, depth int, out *[]Var) {
	for _, c := range t.Children {
		switch c.Tag {
		case dwarf.TagFormalParameter, dwarf.TagVariable:
			*out = append(*out, lc.variable(c, scope, depth))
		case dwarf.TagLexDwarfBlock:
			if c.ContainsPC(lc.pc) {
				lc.walk(c, scope, depth+1, out)
			}
		case dwarf.TagInlinedSubroutine:
			if c.ContainsPC(lc.pc) {
				name, _ := c.Val(dwarf.AttrName).(string)
				lc.walk(c, "inline "+name, depth+1, out)
			}
		}
	}
}

func (lc *locContext) variable(t *godwarf.Tree, scope string, depth int) Var {
	v := Var{Kind: "local", Scope: scope, Depth: depth, Addr: lc.pc}
	if t.Tag == dwarf.TagFormalParameter {
		v.Kind = "param"
	}
	v.Name, _ = t.Val(dwarf.AttrName).(string)
	if typ, ok := t.Val(dwarf.AttrType).(dwarf.Offset); ok {
		v.Type = lc.tn.Name(typ)
	}
	if l, ok := t.Val(dwarf.AttrDeclLine).(int64); ok {
		v.DeclLine = int(l)
	}
	if cv := t.Val(dwarf.AttrConstValue); cv != nil {
		v.Location, v.Available = fmt.Sprintf("constant %v", cv), true
		return v
	}
	f := t.AttrField(dwarf.AttrLocation)
	if f == nil {
		v.Location = "optimized out"
		return v
	}
	var expr []byte
	switch f.Class {
	case dwarf.ClassExprLoc, dwarf.ClassBlock:
		expr, _ = f.Val.([]byte)
	case dwarf.ClassLocListPtr, dwarf.ClassLocList:
		off, _ := f.Val.(int64)
		var err error
		expr, err = lc.loclist(off, f.Class)
		if err != nil {
			v.Location = "unknown (" + err.Error() + ")"
			return v
		}
	}
	if len(expr) == 0 {
		v.Location = "optimized out"
		return v
	}
	v.Expr = prettyExpr(expr)
	v.Location, v.Available = lc.describe(expr)
	return v
}

// loclist finds the expression in force at pc in the location list at
// off, with delve's readers for DWARF 5 .debug_loclists and DWARF 2-4
// .debug_loc. nil means the variable has no location at pc.
func (lc *locContext) loclist(off int64, class dwarf.Class) (expr []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("malformed location list at %#x: %v", off, r)
		}
	}()
	img := lc.x.img
	if lc.u.Version >= 5 {
		sec := img.Section(".debug_loclists")
		if class == dwarf.ClassLocList {
			// DW_FORM_loclistx: an index into the unit's offset table.
			off, err = lc.loclistx(uint64(off))
			if err != nil {
				return nil, err
			}
		}
		if off < 0 || off >= int64(len(sec)) {
			return nil, fmt.Errorf("location list offset %#x outside .debug_loclists", off)
		}
		rd := loclist.NewDwarf5Reader(sec)
		var da *godwarf.DebugAddr
		if a := img.Section(".debug_addr"); len(a) > 0 {
			da = godwarf.ParseAddr(a).GetSubsection(lc.addrBase())
		}
		e, err := rd.Find(int(off), 0, lc.u.LowPC, lc.pc, da)
		if err != nil || e == nil {
			return nil, err
		}
		return e.Instr, nil
	}
	sec := img.Section(".debug_loc")
	if off < 0 || off >= int64(len(sec)) {
		return nil, fmt.Errorf("location list offset %#x outside .debug_loc", off)
	}
	e, err := loclist.NewDwarf2Reader(sec, 8).Find(int(off), 0, lc.u.LowPC, lc.pc, nil)
	if err != nil || e == nil {
		return nil, err
	}
	return e.Instr, nil
}

func (lc *locContext) unitAttr(a dwarf.Attr) (int64, bool) {
	r := lc.d.Reader()
	e, err := r.Next()
	if err != nil || e == nil {
		return 0, false
	}
	v, ok := e.Val(a).(int64)
	return v, ok
}

func (lc *locContext) addrBase() uint64 {
	v, _ := lc.unitAttr(dwarf.AttrAddrBase)
	return uint64(v)
}

func (lc *locContext) loclistx(i uint64) (int64, error) {
	base, ok := lc.unitAttr(dwarf.AttrLoclistsBase)
	sec := lc.x.img.Section(".debug_loclists")
	if !ok || base < 0 || uint64(base)+4*i+4 > uint64(len(sec)) {
		return 0, fmt.Errorf("location list index %d without DW_AT_loclists_base", i)
	}
	return base + int64(binary.LittleEndian.Uint32(sec[uint64(base)+4*i:])), nil
}

func regName(n uint64) string { return strings.ToLower(regnum.AMD64ToName(n)) }

// describe turns a location expression into what a probe handler reads.
func (lc *locContext) describe(expr []byte) (string, bool) {
	ops, ok := decodeExpr(expr)
	if !ok || len(ops) == 0 {
		return "unknown (malformed expression)", false
	}
	o := ops[0]
	if len(ops) == 1 {
		switch {
		case isReg(o.code):
			return "register " + regName(uint64(o.code-op.DW_OP_reg0)), true
		case o.code == op.DW_OP_regx:
			return "register " + regName(uint64(o.u)), true
		case o.code == op.DW_OP_fbreg:
			return lc.stackSlot(o.s), true
		case isBreg(o.code):
			return fmt.Sprintf("memory [%s%+d]", regName(uint64(o.code-op.DW_OP_breg0)), o.s), true
		case o.code == op.DW_OP_addr:
			return fmt.Sprintf("global %#x", uint64(o.u)), true
		case o.code == op.DW_OP_implicit_value:
			return "constant (DW_OP_implicit_value)", true
		case isImplicitPointer(o.code):
			return "pointer to a value that was optimized away (DW_OP_implicit_pointer)", false
		}
	}
	entry := false
	for _, p := range ops {
		if isEntryValue(p.code) {
			entry = true
		}
	}
	last := ops[len(ops)-1].code
	switch {
	case entry && len(ops) == 2 && last == op.DW_OP_stack_value:
		what := prettyExpr(o.block)
		if in, ok := decodeExpr(o.block); ok && len(in) == 1 && isReg(in[0].code) {
			what = regName(uint64(in[0].code - op.DW_OP_reg0))
		}
		return "value " + what + " had at function entry (DW_OP_entry_value): not readable here", false
	case entry:
		return "computed from values at function entry (DW_OP_entry_value): not readable here", false
	case len(ops) == 2 && last == op.DW_OP_stack_value && isConst(o):
		return fmt.Sprintf("constant %d", constValue(o)), true
	case last == op.DW_OP_stack_value:
		return "computed value", true
	}
	for _, p := range ops {
		if p.code == op.DW_OP_piece || p.code == op.DW_OP_bit_piece {
			return "in pieces", true
		}
	}
	return "expression", true
}

// stackSlot describes DW_OP_fbreg off. With gcc's frame base
// DW_OP_call_frame_cfa the slot is CFA+off; .debug_frame says what the CFA
// is at this pc (rsp+N when there is no frame pointer, as in Debian's
// kernel), which is what a kprobe handler can compute from pt_regs.
func (lc *locContext) stackSlot(off int64) string {
	if len(lc.frameBase) == 1 && op.Opcode(lc.frameBase[0]) == op.DW_OP_call_frame_cfa {
		s := fmt.Sprintf("stack CFA%+d", off)
		if r := lc.cfaRule(); r != nil && r.Rule == frame.RuleCFA {
			s += fmt.Sprintf(" ([%s%+d] here)", regName(r.Reg), r.Offset+off)
		}
		return s
	}
	if len(lc.frameBase) == 1 && isReg(op.Opcode(lc.frameBase[0])) {
		return fmt.Sprintf("stack [%s%+d]", regName(uint64(op.Opcode(lc.frameBase[0])-op.DW_OP_reg0)), off)
	}
	return fmt.Sprintf("stack frame base%+d (frame base %s)", off, prettyExpr(lc.frameBase))
}

func (lc *locContext) cfaRule() *frame.DWRule {
	if lc.cfaDone {
		return lc.cfa
	}
	lc.cfaDone = true
	fde, err := fdeFor(lc.x.img, lc.pc)
	if err != nil {
		lc.cfaErr = err
		return nil
	}
	fc, err := fde.EstablishFrame(lc.pc)
	if err != nil {
		lc.cfaErr = err
		return nil
	}
	lc.cfa = &fc.CFA
	return lc.cfa
}

// fdeFor finds the .debug_frame FDE covering pc by hopping over entry
// headers (about a millisecond for a vmlinux, where parsing all 49,000
// entries with delve's frame.Parse takes 160 ms), then lets frame.Parse
// decode just that FDE and its CIE.
func fdeFor(img *elfimage.Image, pc uint64) (fde *frame.FrameDescriptionEntry, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("malformed .debug_frame: %v", r)
		}
	}()
	sec := img.Section(".debug_frame")
	if len(sec) == 0 {
		return ehFrameFor(img, pc)
	}
	le := binary.LittleEndian
	for off := 0; off+4 <= len(sec); {
		n := int(le.Uint32(sec[off:]))
		if n >= 0xfffffff0 {
			return nil, fmt.Errorf("64-bit .debug_frame is not supported")
		}
		end := off + 4 + n
		if n < 4+16 || end > len(sec) {
			off = end
			continue
		}
		cie := int(le.Uint32(sec[off+4:]))
		if cie != 0xffffffff {
			begin, size := le.Uint64(sec[off+8:]), le.Uint64(sec[off+16:])
			if pc-begin < size {
				if cie+4 > len(sec) {
					return nil, fmt.Errorf("FDE at %#x names CIE at %#x outside .debug_frame", off, cie)
				}
				cieEnd := cie + 4 + int(le.Uint32(sec[cie:]))
				if cieEnd > len(sec) || cieEnd < cie {
					return nil, fmt.Errorf("CIE at %#x runs past .debug_frame", cie)
				}
				// A two-entry .debug_frame: the CIE at offset 0, then the
				// FDE pointing at it.
				buf := append([]byte{}, sec[cie:cieEnd]...)
				f := append([]byte{}, sec[off:end]...)
				le.PutUint32(f[4:], 0)
				buf = append(buf, f...)
				fdes, err := frame.Parse(buf, le, 0, 8, 0)
				if err != nil {
					return nil, err
				}
				for _, e := range fdes {
					if e.Cover(pc) {
						return e, nil
					}
				}
			}
		}
		off = end
	}
	return nil, fmt.Errorf("no .debug_frame entry covers %#x", pc)
}

// ehFrameFor looks pc up in .eh_frame, which user-space objects carry
// instead of .debug_frame (the kernel builds with
// -fno-asynchronous-unwind-tables and has .debug_frame only).
func ehFrameFor(img *elfimage.Image, pc uint64) (*frame.FrameDescriptionEntry, error) {
	s := img.ELF.Section(".eh_frame")
	if s == nil || s.Type == elf.SHT_NOBITS {
		return nil, fmt.Errorf("no .debug_frame or .eh_frame")
	}
	data, err := s.Data()
	if err != nil {
		return nil, err
	}
	fdes, err := frame.Parse(data, binary.LittleEndian, 0, 8, s.Addr)
	if err != nil {
		return nil, fmt.Errorf("reading .eh_frame: %w", err)
	}
	for _, f := range fdes {
		if f.Cover(pc) {
			return f, nil
		}
	}
	return nil, fmt.Errorf("no .eh_frame entry covers %#x", pc)
}

// ParseAddr parses a hex address ("0xffffffff81000000") or FUNC+OFF.
func (x *Index) ParseAddr(s string) (uint64, error) {
	if a, err := strconv.ParseUint(strings.TrimPrefix(strings.ToLower(s), "0x"), 16, 64); err == nil && strings.HasPrefix(strings.ToLower(s), "0x") {
		return a, nil
	}
	name, offs, _ := strings.Cut(s, "+")
	var off uint64
	if offs != "" {
		var err error
		if off, err = strconv.ParseUint(offs, 0, 64); err != nil {
			return 0, fmt.Errorf("bad offset in %q", s)
		}
	}
	fs := x.Funcs(name)
	if len(fs) == 0 || fs[0].InlineOnly || len(fs[0].Ranges) == 0 {
		return 0, fmt.Errorf("no function %q with code", name)
	}
	if len(fs) > 1 {
		return 0, fmt.Errorf("%d functions are called %q: give an address", len(fs), name)
	}
	return fs[0].Entry + off, nil
}

// VarsAtLine returns the variables at each address of line in function
// fn, as perf probe -V does for FUNC:LINE (here LINE is the source line
// number, not relative to the function).
func (x *Index) VarsAtLine(fn string, line int) ([]Var, error) {
	lines, err := x.Lines(LineSpec{Func: fn, Line: line})
	if err != nil {
		return nil, err
	}
	var out []Var
	for _, l := range lines {
		if l.Fallback == "after" {
			// A line without code: the line before it, in the same basic
			// block, is where its variables can be read (before advice).
			continue
		}
		for _, a := range l.Addrs {
			vs, err := x.VarsAt(a)
			if err != nil {
				return nil, err
			}
			for i := range vs {
				vs[i].FallbackFor, vs[i].Line = l.FallbackFor, l.Line
			}
			out = append(out, vs...)
		}
	}
	return out, nil
}

// isConst reports whether o pushes a constant: DW_OP_lit*, DW_OP_const*.
func isConst(o exprOp) bool {
	return isLit(o.code) || o.code >= op.DW_OP_const1u && o.code <= op.DW_OP_consts
}

func constValue(o exprOp) int64 {
	switch {
	case isLit(o.code):
		return int64(o.code - op.DW_OP_lit0)
	case o.code == op.DW_OP_const1s:
		return int64(int8(o.u))
	case o.code == op.DW_OP_const2s:
		return int64(int16(o.u))
	case o.code == op.DW_OP_const4s:
		return int64(int32(o.u))
	case o.code == op.DW_OP_consts:
		return o.s
	}
	return o.u
}
