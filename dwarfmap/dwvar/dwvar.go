// Package dwvar reads the variables of a function's DWARF tree: which
// parameters and locals are in scope at a pc (the lexical blocks and
// inlined copies around them hold it), their types, and where each value
// is there (loc: location expressions and lists, the frame base and the
// CFA).
package dwvar

import (
	"bytes"
	"debug/dwarf"
	"fmt"
	"slices"

	"github.com/go-delve/delve/pkg/dwarf/frame"
	"github.com/go-delve/delve/pkg/dwarf/godwarf"

	"github.com/klasy/klasy/dwarfmap/dwtype"
	"github.com/klasy/klasy/dwarfmap/loc"
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
	// Loc is where the value is at Addr, as a probe handler would read
	// it; Location and Available are said from it (but for a constant
	// DW_AT_const_value, whose Location prints it as it is).
	Loc loc.Location `json:"-"`
}

// VarLoc is a variable visible at an address with what a program needs
// to compute its value there from the registers: the raw location
// expression, the frame base and the CFA rule. Vars describes the same for
// people; the weaver compiles this.
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

// Scope is a function's DIE tree with what locating its variables
// needs.
type Scope struct {
	Name      string // the function
	Tree      *godwarf.Tree
	FrameBase []byte // its DW_AT_frame_base expression
	Types     *dwtype.Namer
	Lists     *loc.Lists
	byName    map[string][]namedVar // made when first asked (indexVars)
}

// namedVar is a variable of a function's tree with the lexical blocks
// and inlined copies it is declared in, which must all hold an address
// for it to be in scope there.
type namedVar struct {
	die    *godwarf.Tree
	scope  string // as VarLoc.Scope
	depth  int
	blocks []*godwarf.Tree
}

// Vars returns the parameters and locals in scope at pc, outermost scope
// first, with where their values are there as people read it
// (Var.Location); frame gives the CFA at pc.
func (s *Scope) Vars(pc uint64, frame *loc.Frame) []Var {
	lc := &locContext{pc: pc, tn: s.Types, frame: frame, lists: s.Lists}
	var out []Var
	lc.walk(s.Tree, s.Name, 0, &out)
	return out
}

// VarLocs returns the variables Vars does with their raw locations.
func (s *Scope) VarLocs(pc uint64, frame *loc.Frame) []VarLoc {
	lc := &locContext{pc: pc, tn: s.Types, frame: frame, lists: s.Lists}
	return lc.varLocs(s.Tree, s.Name, s.FrameBase)
}

// VarLocNamed is the variable name in scope at pc, as VarLocs lists it:
// the innermost one of scope ("f", or "inline f" for an inlined copy's),
// else the innermost of any scope; ok false if none is in scope. Only
// that variable's location is worked out, and the CFA only if its
// expression may use it.
func (s *Scope) VarLocNamed(pc uint64, frame *loc.Frame, name, scope string) (VarLoc, bool) {
	if s.byName == nil {
		s.indexVars()
	}
	var best *namedVar
	bestIn := false
	for i := range s.byName[name] {
		v := &s.byName[name][i]
		if !slices.ContainsFunc(v.blocks, func(t *godwarf.Tree) bool { return !t.ContainsPC(pc) }) {
			in := v.scope == scope
			if best == nil || in && !bestIn || in == bestIn && v.depth >= best.depth {
				best, bestIn = v, in
			}
		}
	}
	if best == nil {
		return VarLoc{}, false
	}
	bestScope, bestDepth := best.scope, best.depth
	lc := &locContext{pc: pc, tn: s.Types, frame: frame, lists: s.Lists, lazyCFA: true}
	return lc.varLoc(best.die, bestScope, bestDepth, s.FrameBase), true
}

// indexVars lists the function's variables by name, once.
func (s *Scope) indexVars() {
	s.byName = map[string][]namedVar{}
	var walk func(t *godwarf.Tree, sc string, depth int, blocks []*godwarf.Tree)
	walk = func(t *godwarf.Tree, sc string, depth int, blocks []*godwarf.Tree) {
		for _, c := range t.Children {
			switch c.Tag {
			case dwarf.TagFormalParameter, dwarf.TagVariable:
				if n, _ := c.Val(dwarf.AttrName).(string); n != "" {
					s.byName[n] = append(s.byName[n], namedVar{die: c, scope: sc, depth: depth, blocks: blocks})
				}
			case dwarf.TagLexDwarfBlock:
				walk(c, sc, depth+1, append(blocks[:len(blocks):len(blocks)], c))
			case dwarf.TagInlinedSubroutine:
				n, _ := c.Val(dwarf.AttrName).(string)
				walk(c, "inline "+n, depth+1, append(blocks[:len(blocks):len(blocks)], c))
			}
		}
	}
	walk(s.Tree, s.Name, 0, nil)
}

type locContext struct {
	pc    uint64
	tn    *dwtype.Namer
	frame *loc.Frame
	lists *loc.Lists
	// lazyCFA: varLoc works the CFA out only for an expression that may
	// use it (VarLoc.HasCFA is false otherwise).
	lazyCFA bool
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

func (lc *locContext) variable(t *godwarf.Tree, scope string, depth int) (v Var) {
	v = Var{Kind: "local", Scope: scope, Depth: depth, Addr: lc.pc}
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
		switch c := cv.(type) {
		case int64:
			v.Loc.Value = c
		case []byte:
			v.Loc.Bytes = c
		}
		v.Loc.Kind = loc.Constant
		v.Location, v.Available = fmt.Sprintf("constant %v", cv), true
		return v
	}
	defer func() { v.Location, v.Available = v.Loc.String(), v.Loc.Available() }()
	f := t.AttrField(dwarf.AttrLocation)
	if f == nil {
		return v // optimized out
	}
	var expr []byte
	switch f.Class {
	case dwarf.ClassExprLoc, dwarf.ClassBlock:
		expr, _ = f.Val.([]byte)
	case dwarf.ClassLocListPtr, dwarf.ClassLocList:
		off, _ := f.Val.(int64)
		var err error
		expr, err = lc.lists.At(off, f.Class, lc.pc)
		if err != nil {
			v.Loc = loc.Location{Kind: loc.Malformed, Err: err}
			return v
		}
	}
	if len(expr) == 0 {
		return v // optimized out
	}
	v.Expr = loc.Pretty(expr)
	v.Loc = loc.Describe(expr, lc.frame)
	return v
}

// varLocs lists the variables of the function tree in scope at lc.pc.
func (lc *locContext) varLocs(tree *godwarf.Tree, fn string, fb []byte) []VarLoc {
	var locs []VarLoc
	var walk func(t *godwarf.Tree, scope string, depth int)
	walk = func(t *godwarf.Tree, scope string, depth int) {
		for _, c := range t.Children {
			switch c.Tag {
			case dwarf.TagFormalParameter, dwarf.TagVariable:
				locs = append(locs, lc.varLoc(c, scope, depth, fb))
			case dwarf.TagLexDwarfBlock:
				if c.ContainsPC(lc.pc) {
					walk(c, scope, depth+1)
				}
			case dwarf.TagInlinedSubroutine:
				if c.ContainsPC(lc.pc) {
					name, _ := c.Val(dwarf.AttrName).(string)
					walk(c, "inline "+name, depth+1)
				}
			}
		}
	}
	walk(tree, fn, 0)
	return locs
}

func (lc *locContext) varLoc(t *godwarf.Tree, scope string, depth int, fb []byte) VarLoc {
	vl := VarLoc{Var: lc.variable(t, scope, depth), FrameBase: fb}
	if typ, ok := t.Val(dwarf.AttrType).(dwarf.Offset); ok {
		vl.Size = lc.tn.Size(typ)
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
			vl.Expr, _ = lc.lists.At(off, f.Class, lc.pc)
		}
	}
	if lc.lazyCFA && !bytes.ContainsAny(vl.Expr, "\x91\x9c") {
		// No DW_OP_fbreg or DW_OP_call_frame_cfa (or a byte that looks
		// like one): the CFA is not needed.
		return vl
	}
	if r, err := lc.frame.CFA(); err == nil && r != nil && r.Rule == frame.RuleCFA {
		vl.CFAReg, vl.CFAOffset, vl.HasCFA = r.Reg, r.Offset, true
	}
	return vl
}
