package dwarfmap

import (
	"debug/dwarf"
	"fmt"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"

	"github.com/go-delve/delve/pkg/dwarf/godwarf"

	"github.com/klasy/klasy/dwarfmap/dwtype"
	"github.com/klasy/klasy/dwarfmap/loc"
	"github.com/klasy/klasy/internal/mmapfile"
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

// VarsAt returns the parameters and locals in scope at addr, outermost
// scope first.
func (x *Index) VarsAt(addr uint64) (vars []Var, err error) {
	// Decoding here runs over DWARF and .debug_frame that the build did
	// not check (delve's frame package panics on some damage): a damaged
	// image gives an error, not a crash.
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			if err = mmapfile.FaultError(r); err == nil {
				err = fmt.Errorf("malformed debug info at %#x: %v", addr, r)
			}
		}
		if err != nil {
			vars, err = nil, x.explain(err)
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
	f := x.t.Funcs[fi.index]
	u := x.t.Units[f.Unit]
	d, err := x.img.UnitDWARF(u.Off, u.End)
	if err != nil {
		return nil, err
	}
	var tree *godwarf.Tree
	func() {
		defer func() {
			if r := recover(); r != nil {
				if err = mmapfile.FaultError(r); err == nil {
					err = fmt.Errorf("malformed DWARF in %s: %v", fi.Name, r)
				}
			}
		}()
		tree, err = godwarf.LoadTree(dwarf.Offset(f.DIE-u.Off), d, 0)
	}()
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", fi.Name, err)
	}
	fb, _ := tree.Val(dwarf.AttrFrameBase).([]byte)
	lc := &locContext{pc: addr, tn: dwtype.NewNamer(d), frame: loc.NewFrame(x.img, addr, fb),
		lists: loc.NewLists(x.img, d, int(u.Version), u.LowPC)}
	var out []Var
	lc.walk(tree, fi.Name, 0, &out)
	return out, nil
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

// ParseAddr parses a hex address ("0xffffffff81000000") or FUNC+OFF,
// where FUNC+OFF must lie in FUNC's code (its .cold part included).
func (x *Index) ParseAddr(s string) (_ uint64, err error) {
	defer mmapfile.Catch(&err, debug.SetPanicOnFault(true))
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
	// An offset past the function's code names another function's: the
	// kernel would probe that one, and klasy would answer for it.
	f := fs[0]
	a := f.Entry + off
	if a < f.Entry || !slices.ContainsFunc(f.Ranges, func(r [2]uint64) bool { return a >= r[0] && a < r[1] }) {
		var size uint64
		for _, r := range f.Ranges {
			if f.Entry >= r[0] && f.Entry < r[1] {
				size = r[1] - f.Entry
			}
		}
		return 0, fmt.Errorf("%s+%#x is past the end of %s (size %#x)", name, off, name, size)
	}
	return a, nil
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
