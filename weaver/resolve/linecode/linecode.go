package linecode

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/klasy/klasy/debugklasy"
	"github.com/klasy/klasy/dwarfmap"
	"github.com/klasy/klasy/pattern"
	"github.com/klasy/klasy/weaver/joinpoint"
	"github.com/klasy/klasy/x86code"
)

// Image is the kernel or a module, as the resolver reads it.
type Image struct {
	Module  string // "" for the kernel
	X       *dwarfmap.Index
	Refused joinpoint.Refusal
	batch   *dwarfmap.Batch
	tables  map[string]*debugklasy.Table // by the access pattern they were read for
}

func (im *Image) Path() string { return im.X.Image().Path }

func (im *Image) Label() string {
	if im.Module == "" {
		return im.Path()
	}
	return "module " + im.Module + " (" + im.Path() + ")"
}

func (im *Image) Batch() (*dwarfmap.Batch, error) {
	if im.batch != nil {
		return im.batch, nil
	}
	b, err := im.X.NewBatch()
	if err != nil {
		return nil, err
	}
	im.batch = b
	return b, nil
}

// Accesses returns the image's access records all the patterns select.
func (im *Image) Accesses(pats []*pattern.Member) ([]debugklasy.Access, error) {
	key := pats[0].String()
	t, ok := im.tables[key]
	if !ok {
		var err error
		if t, err = debugklasy.OpenSelect(im.Path(), pats[0]); err != nil {
			return nil, err
		}
		if im.tables == nil {
			im.tables = map[string]*debugklasy.Table{}
		}
		im.tables[key] = t
	}
	var out []debugklasy.Access
	for i := range t.Accesses {
		a := &t.Accesses[i]
		ok := true
		for _, p := range pats[1:] {
			ok = ok && p.Match(a.Struct, a.Member)
		}
		if ok {
			out = append(out, *a)
		}
	}
	return out, nil
}

// LineCode is the code of one source line in one copy of a function.
type LineCode struct {
	Line  int
	Stmts []uint64    // is_stmt row addresses, by address
	Addrs []uint64    // all row addresses, by address (or the first instruction's)
	Segs  [][2]uint64 // [start, end) of the instructions the line's rows own
	// Merged are the instructions at the line's rows owned by a later
	// row at the same address: code the compiler Merged into another
	// line (a copy inlined without code of its own).
	Merged [][2]uint64
}

func (lc *LineCode) Empty() bool { return lc == nil || len(lc.Addrs) == 0 }

// InRanges reports whether addr is in one of the ranges (an empty range
// holds its start), and returns the end of that range.
func InRanges(rs [][2]uint64, addr uint64) (uint64, bool) {
	for _, r := range rs {
		if addr >= r[0] && addr < r[1] || r[0] == r[1] && addr == r[0] {
			return r[1], true
		}
	}
	return 0, false
}

// HostLine is a line's code in one out-of-line function: its rows and
// the instructions each row owns (from a row that is the last at its
// address to the next row).
type HostLine struct {
	Rows   []dwarfmap.Row
	Owned  [][2]uint64 // by row; zero when a later row at the address owns the code
	Owner  [][2]uint64 // by row: what the row at the address that owns the code owns
	Merged bool
}

// RowsInRanges returns the rows (by address) inside the ranges.
func RowsInRanges(rows []dwarfmap.Row, rs [][2]uint64) []dwarfmap.Row {
	var out []dwarfmap.Row
	for _, r := range rs {
		i, _ := slices.BinarySearchFunc(rows, r[0], func(row dwarfmap.Row, a uint64) int { return cmp.Compare(row.Addr, a) })
		for ; i < len(rows) && rows[i].Addr < r[1]; i++ {
			out = append(out, rows[i])
		}
	}
	slices.SortStableFunc(out, func(a, b dwarfmap.Row) int { return cmp.Compare(a.Addr, b.Addr) })
	return out
}

// Code is the part of the line's Code that keep selects by row address:
// those rows, and the owned instructions of the rows, within ranges
// (nil: wherever they are).
func (hl *HostLine) Code(line int, keep func(addr uint64) bool, ranges [][2]uint64) *LineCode {
	if hl == nil || len(hl.Rows) == 0 {
		return nil
	}
	lc := &LineCode{Line: line}
	for i, row := range hl.Rows {
		kept := keep(row.Addr)
		if kept {
			lc.Addrs = append(lc.Addrs, row.Addr)
			if row.Flags&dwarfmap.RowStmt != 0 {
				lc.Stmts = append(lc.Stmts, row.Addr)
			}
			if hl.Owned[i] == ([2]uint64{}) {
				lc.Merged = append(lc.Merged, hl.Owner[i])
			}
		}
		o := hl.Owned[i]
		switch {
		case o == ([2]uint64{}):
		case ranges == nil:
			if kept {
				lc.Segs = append(lc.Segs, o)
			}
		default:
			for _, r := range ranges {
				if lo, hi := max(o[0], r[0]), min(o[1], r[1]); lo < hi {
					lc.Segs = append(lc.Segs, [2]uint64{lo, hi})
				}
			}
		}
	}
	slices.SortFunc(lc.Segs, func(a, b [2]uint64) int { return cmp.Compare(a[0], b[0]) })
	if len(lc.Addrs) == 0 && len(lc.Segs) > 0 {
		lc.Addrs = []uint64{lc.Segs[0][0]}
	}
	if len(lc.Addrs) == 0 {
		return nil
	}
	return lc
}

// Within reports whether every range of inner lies in one of outer.
func Within(inner, outer [][2]uint64) bool {
	for _, r := range inner {
		ok := false
		for _, o := range outer {
			if r[0] >= o[0] && r[1] <= o[1] {
				ok = true
			}
		}
		if !ok {
			return false
		}
	}
	return len(inner) > 0
}

// Place is where a line-level hook goes in one basic block that
// holds an is_stmt row of a line: before is the row's address, where
// before advice runs; after is past the line's last instruction in the
// block (or on it, when it ends the block), where after advice runs;
// end is the end of the line's code in the block.
type Place struct {
	Before, After, End uint64
}

// Places places a line's hooks in the code of one copy: one per
// basic block holding an is_stmt row of it (its first row if none is),
// as the access join points' line tier and line(FILE:LINE) do.
func Places(b *dwarfmap.Batch, lc *LineCode) ([]Place, error) {
	starts := lc.Stmts
	if len(starts) == 0 {
		starts = lc.Addrs[:1]
	}
	var blocks [][2]uint64
	var out []Place
	for _, at := range starts {
		code, err := b.Code(at)
		if err != nil {
			return nil, err
		}
		lo, hi := code.Block(at)
		if slices.ContainsFunc(blocks, func(bl [2]uint64) bool { return at >= bl[0] && at < bl[1] }) {
			continue
		}
		blocks = append(blocks, [2]uint64{lo, hi})
		// The line's code in this block: its segments that start in it
		// (or, for a line without instructions of its own, the code
		// merged into the line owning its address).
		end := at
		var last x86code.Insn
		segs := lc.Segs
		if !slices.ContainsFunc(segs, func(sg [2]uint64) bool { return sg[0] >= at && sg[0] < hi }) {
			segs = lc.Merged
		}
		for _, sg := range segs {
			if sg[0] < at || sg[0] >= hi {
				continue
			}
			for _, in := range b.Insns(sg[0], min(sg[1], hi)) {
				if in.End() > end {
					end, last = in.End(), in
				}
			}
		}
		after := end
		if last.Inst.Len > 0 && (x86code.EndsBlock(&last.Inst) || end >= hi) {
			// Nothing of the block follows the line's last instruction
			// (or that is a jump): hook that instruction.
			after = last.PC
		}
		out = append(out, Place{Before: at, After: after, End: end})
	}
	return out, nil
}

// CheckHookAddr says why a hook of image im cannot go at addr in the
// out-of-line function host ("" for any) ("" if it can).
func CheckHookAddr(b *dwarfmap.Batch, im *Image, host string, addr uint64) string {
	code, err := b.Code(addr)
	if err != nil {
		return "no code: " + err.Error()
	}
	if _, ok := code.Find(addr); !ok {
		return fmt.Sprintf("not an instruction boundary: %#x is inside an instruction of %s", addr, code.Func)
	}
	if host != "" && code.Func != host {
		return fmt.Sprintf("not in its function: %#x is in %s, not %s", addr, code.Func, host)
	}
	if trap := b.TrapAt(addr); trap != "" {
		return fmt.Sprintf("refused: %#x is a %s trap (a BUG() or WARN() site): the kernel refuses kprobes there", addr, trap)
	}
	switch sec := b.SectionOf(addr); sec {
	case ".init.text", ".exit.text":
		return "refused: in " + sec + ": the kernel frees this code after boot or load, so it never runs again (and refuses kprobes there)"
	}
	if im.Refused != nil {
		if why := im.Refused(addr); why != "" {
			return "refused: " + why
		}
	}
	return ""
}

// HostLines caches, for one resolve, the code of a source line in an
// out-of-line function, which every copy inlined there shares.
type HostLines struct {
	hostLines map[hostLineKey]*HostLine
	lineRows  map[lineRowsKey][]dwarfmap.Row
}

type lineRowsKey struct {
	im   *Image
	file string
	line int
}

type hostLineKey struct {
	im   *Image
	file string
	line int
	host uint64
}

// Get returns the code of file:line in the out-of-line function whose
// ranges are host, read once.
func (c *HostLines) Get(b *dwarfmap.Batch, im *Image, file string, line int, host [][2]uint64) *HostLine {
	if len(host) == 0 {
		return nil
	}
	if c.hostLines == nil {
		c.hostLines, c.lineRows = map[hostLineKey]*HostLine{}, map[lineRowsKey][]dwarfmap.Row{}
	}
	k := hostLineKey{im, file, line, host[0][0]}
	if hl, ok := c.hostLines[k]; ok {
		return hl
	}
	fids := b.Files(file)
	hl := &HostLine{}
	rk := lineRowsKey{im, file, line}
	rows, ok := c.lineRows[rk]
	if !ok {
		rows = b.LineRows(file, line)
		c.lineRows[rk] = rows
	}
	// The rows in the host's ranges, found by address.
	for _, row := range RowsInRanges(rows, host) {
		end, ok := InRanges(host, row.Addr)
		if !ok {
			continue
		}
		if n := len(hl.Rows); n > 0 && hl.Rows[n-1].Addr == row.Addr {
			hl.Rows[n-1].Flags |= row.Flags & dwarfmap.RowStmt
			continue
		}
		next, ok := b.NextRowAddr(row.Addr)
		if !ok || next > end {
			next = end
		}
		seg := [2]uint64{row.Addr, next}
		// The last row at an address owns the instructions from there.
		at := b.RowsIn(row.Addr, row.Addr+1)
		owned := seg
		if last := at[len(at)-1]; !slices.Contains(fids, last.File) || int(last.Line) != line {
			owned = [2]uint64{}
		}
		hl.Rows = append(hl.Rows, row)
		hl.Owned = append(hl.Owned, owned)
		hl.Owner = append(hl.Owner, seg)
	}
	c.hostLines[k] = hl
	return hl
}
