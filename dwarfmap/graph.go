package dwarfmap

import (
	"cmp"
	"fmt"
	"slices"
	"sort"

	"github.com/klasy/klasy/dwarfmap/elfimage"
	"github.com/klasy/klasy/dwarfmap/table"

	"github.com/klasy/klasy/x86code"
)

// reservedSites reads the image's jump label, static call and ftrace
// sites once. A module's tables are relocated at load: nil, as for an
// image without them; a damaged table only loses them.
func (b *Batch) reservedSites() *elfimage.Reserved {
	if !b.reservedRead {
		b.reservedRead = true
		b.reserved, _ = b.x.img.Reserved()
	}
	return b.reserved
}

// FtraceSite reports whether addr is an ftrace site (the call of
// __fentry__ at a function's entry): a kprobe there is ftrace-based.
func (b *Batch) FtraceSite(addr uint64) bool {
	return b.reservedSites().FtraceSite(addr)
}

// Graph returns the control flow graph of fi's out-of-line code, all of
// its ranges (a .cold part too), with the kernel's static branches
// (jump labels, read from the image's __jump_table) as two-way branches.
func (b *Batch) Graph(fi FuncInfo) (*x86code.Graph, error) {
	if g, ok := b.graphs[fi.Entry]; ok {
		return g, nil
	}
	reserved := b.reservedSites()
	var rs []x86code.Range
	patched := x86code.PatchedBranches{}
	for _, r := range fi.Ranges {
		code := b.x.img.ReadText(r[0], r[1]-r[0])
		if code == nil {
			return nil, fmt.Errorf("no code bytes for %s at %#x in the image", fi.Name, r[0])
		}
		rs = append(rs, x86code.Range{Addr: r[0], Code: code})
		for site, target := range reserved.JumpsIn(r[0], r[1]) {
			patched[site] = target
		}
	}
	if len(rs) == 0 {
		return nil, fmt.Errorf("%s has no code", fi.Name)
	}
	g := x86code.FuncGraph(fi.Entry, rs, patched)
	if b.graphs == nil {
		b.graphs = map[uint64]*x86code.Graph{}
	}
	b.graphs[fi.Entry] = g
	return g, nil
}

// CopiesAt returns the inlined copies whose code holds addr, innermost
// first (a copy nested in another has less code), each with its host.
func (b *Batch) CopiesAt(addr uint64) []Instance {
	x := b.x
	hi, ok := x.t.FuncAt(addr)
	if !ok {
		return nil
	}
	b.indexCallers()
	type held struct {
		inst Instance
		size uint64
	}
	var out []held
	host := x.t.Funcs[hi]
	for _, i := range b.byCaller[uint32(hi)] {
		in := x.t.Inlines[i]
		rs := x.t.InlRanges[in.RngOff : in.RngOff+in.RngN]
		if _, ok := slices.BinarySearchFunc(rs, addr, func(r [2]uint64, a uint64) int {
			switch {
			case a < r[0]:
				return 1
			case a >= r[1]:
				return -1
			}
			return 0
		}); !ok {
			continue
		}
		var size uint64
		for _, r := range rs {
			size += r[1] - r[0]
		}
		out = append(out, held{Instance{Name: x.t.Str(in.Name), Host: x.t.Str(host.Name), HostFile: x.File(host.DeclFile), Inlined: true,
			Ranges: rs, HostRanges: x.t.Ranges[host.RngOff : host.RngOff+host.RngN],
			CallFile: x.File(in.CallFile), CallLine: int(in.CallLine), DeclFile: x.File(in.DeclFile), DeclLine: int(in.DeclLine),
			DIE: in.DIE}, size})
	}
	slices.SortStableFunc(out, func(a, c held) int { return cmp.Compare(a.size, c.size) })
	insts := make([]Instance, len(out))
	for i, h := range out {
		insts[i] = h.inst
	}
	return insts
}

// indexCallers lists the inlined copies by the out-of-line function
// holding them, once.
func (b *Batch) indexCallers() {
	if b.byCaller != nil {
		return
	}
	b.byCaller = map[uint32][]uint32{}
	for i, in := range b.x.t.Inlines {
		if in.Caller != table.NoFile {
			b.byCaller[in.Caller] = append(b.byCaller[in.Caller], uint32(i))
		}
	}
}

// FileNames returns the names of the line table's files that match
// reports true for, sorted.
func (b *Batch) FileNames(match func(name string) bool) []string {
	var out []string
	for name := range b.fileIDs {
		if match(name) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// LinesWithCode returns the lines of file (as Files finds it) that
// have rows in the line table, in order.
func (b *Batch) LinesWithCode(file string) []int {
	var out []int
	for _, id := range b.Files(file) {
		for _, ri := range b.x.fileRows(id, 0) {
			if r := b.x.row(ri); r.Flags&RowEndSequence == 0 && r.Line != 0 {
				out = append(out, int(r.Line))
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// CodeRows returns the line-table rows of the code in [lo, hi): those
// at addresses in it and, when none is at lo, the row in force there
// (the last one at the greatest address below it), by address; rows of
// line 0 are left out.
func (b *Batch) CodeRows(lo, hi uint64) []Row {
	x := b.x
	at := func(i int) Row { return x.byAddr(i, Row{Flags: RowEndSequence}) }
	var out []Row
	i := sort.Search(len(x.t.ByAddr), func(i int) bool { return at(i).Addr >= lo })
	if i == len(x.t.ByAddr) || at(i).Addr != lo {
		// The rows at the greatest address below lo: the last one (in
		// table order, the one that owns the code) is in force.
		j := i - 1
		if j >= 0 {
			addr := at(j).Addr
			for j > 0 && at(j-1).Addr == addr {
				j--
			}
			var last Row
			found := false
			for ; j < i; j++ {
				if r := at(j); r.Addr == addr {
					last, found = r, true
				}
			}
			if found && last.Flags&RowEndSequence == 0 && last.Line != 0 {
				out = append(out, last)
			}
		}
	}
	for ; i < len(x.t.ByAddr) && at(i).Addr < hi; i++ {
		if r := at(i); r.Flags&RowEndSequence == 0 && r.Line != 0 {
			out = append(out, r)
		}
	}
	return out
}

// NextDecl returns the first line after line at which file defines a
// function (one with an out-of-line body or inlined copies), 0 if none
// does: the function defined at or above line ends before it.
func (b *Batch) NextDecl(file string, line int) int {
	if b.decls == nil {
		b.decls = map[uint32][]int{}
		for _, f := range b.x.t.Funcs {
			b.decls[f.DeclFile] = append(b.decls[f.DeclFile], int(f.DeclLine))
		}
		for _, in := range b.x.t.Inlines {
			b.decls[in.DeclFile] = append(b.decls[in.DeclFile], int(in.DeclLine))
		}
		for id, ls := range b.decls {
			slices.Sort(ls)
			b.decls[id] = slices.Compact(ls)
		}
	}
	next := 0
	for _, id := range b.Files(file) {
		ls := b.decls[id]
		i := sort.SearchInts(ls, line+1)
		if i < len(ls) && (next == 0 || ls[i] < next) {
			next = ls[i]
		}
	}
	return next
}

// CompDir is the compilation directory of the unit that defines fi
// (DW_AT_comp_dir): where the unit's relative file names are relative
// to, or below it.
func (b *Batch) CompDir(fi FuncInfo) string {
	if fi.index < 0 || fi.index >= len(b.x.t.Funcs) {
		return ""
	}
	u := b.x.t.Funcs[fi.index].Unit
	if int(u) >= len(b.x.t.Units) {
		return ""
	}
	return b.x.t.Str(b.x.t.Units[u].CompDir)
}
