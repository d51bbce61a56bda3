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
	"github.com/klasy/klasy/dwarfmap/dwvar"
	"github.com/klasy/klasy/dwarfmap/loc"
	"github.com/klasy/klasy/internal/mmapfile"
)

// Var is a parameter or local variable visible at an address, with where
// its value is at that address.
type Var = dwvar.Var

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
	s := &dwvar.Scope{Name: fi.Name, Tree: tree, FrameBase: fb, Types: dwtype.NewNamer(d),
		Lists: loc.NewLists(x.img, d, int(u.Version), u.LowPC)}
	return s.Vars(addr, loc.NewFrame(x.img, addr, fb)), nil
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
