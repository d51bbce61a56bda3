package dwarfmap

import (
	"debug/dwarf"
	"fmt"
	"runtime/debug"
	"sort"

	"github.com/klasy/klasy/dwarfmap/dwvar"
	"github.com/klasy/klasy/dwarfmap/loc"
	"github.com/klasy/klasy/dwarfmap/table"
	"github.com/klasy/klasy/internal/mmapfile"
	"github.com/klasy/klasy/x86code"
)

// VarLoc is a variable visible at an address with what a program needs
// to compute its value there from the registers: the raw location
// expression, the frame base and the CFA rule. VarsAt describes the same
// for people; the weaver compiles this.
type VarLoc = dwvar.VarLoc

// VarLocsAt returns the parameters and locals in scope at addr with
// their raw locations, outermost scope first, as VarsAt does.
func (x *Index) VarLocsAt(addr uint64) (locs []VarLoc, err error) {
	defer mmapfile.Catch(&err, debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			if err = mmapfile.FaultError(r); err == nil {
				err = fmt.Errorf("malformed debug info at %#x: %v", addr, r)
			}
			locs = nil
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
	sc, err := x.loadScope(fi)
	if err != nil {
		return nil, err
	}
	return sc.VarLocs(addr, loc.NewFrame(x.img, addr, sc.FrameBase)), nil
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
func (x *Index) InlineEntries(name string) (_ []InlineEntry, err error) {
	defer mmapfile.Catch(&err, debug.SetPanicOnFault(true))
	if err := x.needImage(); err != nil {
		return nil, err
	}
	x, err = x.use(inlineSecs)
	if err != nil {
		return nil, err
	}
	lo, hi := x.nameRange(len(x.t.InlName), x.inlineName, name, true)
	var out []InlineEntry
	for _, i := range x.t.InlName[lo:hi] {
		in := x.t.Inlines[i]
		e := InlineEntry{InlineInfo: InlineInfo{Name: name, CallFile: x.File(in.CallFile), CallLine: int(in.CallLine),
			Ranges: x.t.InlRanges[in.RngOff : in.RngOff+in.RngN]}}
		if in.Caller != table.NoFile {
			e.Caller = x.t.Str(x.t.Funcs[in.Caller].Name)
		}
		if len(e.Ranges) > 0 {
			e.Entry = e.Ranges[0][0]
		}
		u := x.t.Units[in.Unit]
		d, err := x.img.UnitDWARF(u.Off, u.End)
		if err != nil {
			return nil, err
		}
		r := d.Reader()
		r.Seek(dwarf.Offset(in.DIE - u.Off))
		if die, err := r.Next(); err == nil && die != nil {
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

// CheckInstruction reports whether addr starts an instruction inside a
// function with debug info. The kernel accepts a kprobe past a
// function's end and silently probes the next one, so the weaver checks
// first.
func (x *Index) CheckInstruction(addr uint64) (err error) {
	defer mmapfile.Catch(&err, debug.SetPanicOnFault(true))
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
		code := x.img.ReadText(r[0], r[1]-r[0])
		if code == nil {
			return fmt.Errorf("no code bytes for %s at %#x in the image", fi.Name, r[0])
		}
		ok, err := x86code.IsBoundary(code, r[0], addr)
		if err != nil {
			return fmt.Errorf("decoding %s: %w", fi.Name, err)
		}
		if !ok {
			return fmt.Errorf("%s+%#x is inside an instruction", fi.Name, addr-fi.Entry)
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

// LineOf returns the line of the line-table row that covers addr (the
// last row at or before it, as gdb's info line *ADDR), where LineAt wants
// a row that starts there; ok is false for a row of no line (code the
// compiler made up) or an address outside the line table.
func (x *Index) LineOf(addr uint64) (file string, line int, ok bool) {
	x, err := x.use(funcLineSecs)
	if err != nil {
		return "", 0, false
	}
	at := func(i int) Row { return x.byAddr(i, Row{}) }
	i := sort.Search(len(x.t.ByAddr), func(i int) bool { return at(i).Addr > addr }) - 1
	if i < 0 {
		return "", 0, false
	}
	// The rows at the covering row's address: the last one owns the code.
	row := at(i)
	if row.Flags&RowEndSequence != 0 || row.Line == 0 {
		return "", 0, false
	}
	return x.File(row.File), int(row.Line), true
}

// SectionOf names the image's ELF section that holds addr ("" if none).
func (x *Index) SectionOf(addr uint64) string {
	if x.img == nil {
		return ""
	}
	for _, s := range x.img.ELF.Sections {
		if s.Addr != 0 && addr >= s.Addr && addr < s.Addr+s.Size {
			return s.Name
		}
	}
	return ""
}
