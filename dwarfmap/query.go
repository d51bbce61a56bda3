package dwarfmap

import (
	"cmp"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/klasy/klasy/dwarfmap/cachefile"
	"github.com/klasy/klasy/dwarfmap/table"
	"github.com/klasy/klasy/internal/mmapfile"
	"github.com/klasy/klasy/internal/srcpath"
	"github.com/klasy/klasy/pattern"
)

// Line is one source line with the addresses of its code.
type Line struct {
	Function string   `json:"function"` // function whose code holds the addresses
	File     string   `json:"file"`
	Line     int      `json:"line"`
	Addrs    []uint64 `json:"-"`
	// Stmt is false when no address of the line is a recommended
	// breakpoint (is_stmt) location.
	Stmt bool `json:"stmt"`
	// FallbackFor is set when the requested line has no code and this
	// nearby line in the same basic block stands in for it (KLASY's
	// nearest-line rule): Fallback is "before" (use for before advice)
	// or "after" (for after advice).
	FallbackFor int    `json:"fallback_for,omitempty"`
	Fallback    string `json:"fallback,omitempty"`
	// Inlined names the callee, inlined into Function, whose source line
	// this is (only with LineSpec.Inlined or when asked for by number).
	Inlined string `json:"inlined,omitempty"`
}

// Row returns row i of the line table (for tests and tools).
func (x *Index) Row(i int) Row {
	return x.Rows()[i]
}

// row returns row i, or an empty row if a (damaged) sort index points
// past the table (loads do not scan the 8.6 M index entries of a
// vmlinux) or its chunk of a cache file is damaged (x is replaced then:
// see Lines).
func (x *Index) row(i uint32) Row {
	if int(i) < len(x.t.Rows) && x.chunksOK(cachefile.SecRows, int(i), int(i)+1) {
		return x.t.Rows[i]
	}
	return Row{Flags: RowEndSequence}
}

// sortedRows returns elements [lo, hi) of a sort order of the rows
// (byAddr or byFile, section sec), nil if damaged.
func (x *Index) sortedRows(sec int, idx []uint32, lo, hi int) []uint32 {
	if !x.chunksOK(sec, lo, hi) {
		return nil
	}
	return idx[lo:hi]
}

// File returns the name of file id f, relative to its source tree
// (srcpath.Rel): as perf prints it, whatever directory the kernel was
// built in.
func (x *Index) File(f uint32) string {
	if f == table.NoFile || int(f) >= len(x.t.Files) {
		return ""
	}
	return srcpath.Rel(x.t.Str(x.t.Files[f]))
}

// Rows returns every line-table row in table order (end-of-sequence rows
// included), as objdump --dwarf=decodedline prints them.
func (x *Index) Rows() []Row {
	x, err := x.use(1 << cachefile.SecRows)
	if err != nil {
		return nil
	}
	if !x.chunksOK(cachefile.SecRows, 0, len(x.t.Rows)) {
		return x.Rows()
	}
	return x.t.Rows
}

// FuncInfo describes a function.
type FuncInfo struct {
	Name     string      `json:"name"`
	File     string      `json:"file"`
	Line     int         `json:"line"`
	External bool        `json:"external"`
	Entry    uint64      `json:"-"`
	Ranges   [][2]uint64 `json:"-"` // by address; .cold parts included
	// Inlined counts the inlined copies of the function; InlineOnly is
	// true when it has no out-of-line copy at all.
	Inlined    int  `json:"inlined"`
	InlineOnly bool `json:"inline_only"`
	// Discarded marks a copy whose code never runs (FuncDiscarded); only
	// Index.Discarded lists these.
	Discarded bool `json:"discarded,omitempty"`
	index     int
}

func (x *Index) funcInfo(i int) FuncInfo {
	f := x.t.Funcs[i]
	return FuncInfo{Name: x.t.Str(f.Name), File: x.File(f.DeclFile), Line: int(f.DeclLine),
		External: f.Flags&FuncExternal != 0, Discarded: f.Flags&FuncDiscarded != 0,
		Entry: f.Entry, Ranges: x.t.Ranges[f.RngOff : f.RngOff+f.RngN], index: i}
}

// nameRange returns the [lo, hi) of the n records sorted by name (the
// i-th's is name(i)) whose names are name, or with exact false have it as
// a prefix.
func (x *Index) nameRange(n int, name func(int) table.StrRef, prefix string, exact bool) (int, int) {
	lo := sort.Search(n, func(i int) bool { return x.t.Str(name(i)) >= prefix })
	hi := lo
	for hi < n {
		s := x.t.Str(name(hi))
		if exact && s != prefix || !exact && !strings.HasPrefix(s, prefix) {
			break
		}
		hi++
	}
	return lo, hi
}

func (x *Index) funcName(i int) table.StrRef   { return x.t.Funcs[x.t.ByName[i]].Name }
func (x *Index) inlineName(i int) table.StrRef { return x.t.Inlines[x.t.InlName[i]].Name }
func (x *Index) inlSumName(i int) table.StrRef { return x.t.InlSum[i].Name }

// inlinedCopies returns how many inlined copies of name exist, and their
// summary.
func (x *Index) inlinedCopies(name string) (table.InlineSum, bool) {
	lo, hi := x.nameRange(len(x.t.InlSum), x.inlSumName, name, true)
	if lo == hi {
		return table.InlineSum{}, false
	}
	return x.t.InlSum[lo], true
}

// Funcs returns the functions named name (static functions may share a
// name), out-of-line copies first.
func (x *Index) Funcs(name string) []FuncInfo {
	x, err := x.use(funcSecs)
	if err != nil {
		return nil
	}
	var out []FuncInfo
	lo, hi := x.nameRange(len(x.t.ByName), x.funcName, name, true)
	for _, i := range x.t.ByName[lo:hi] {
		out = append(out, x.funcInfo(int(i)))
	}
	sum, ok := x.inlinedCopies(name)
	if len(out) > 0 {
		for i := range out {
			out[i].Inlined = int(sum.N)
		}
		return out
	}
	if ok {
		out = append(out, FuncInfo{Name: name, File: x.File(sum.DeclFile), Line: int(sum.DeclLine), Inlined: int(sum.N), InlineOnly: true, index: -1})
	}
	return out
}

// MatchFuncs returns every function whose name p matches, sorted by
// name. Only the names with p's prefix are matched, a range of the
// sorted names.
func (x *Index) MatchFuncs(p *pattern.Pattern) []FuncInfo {
	x, err := x.use(funcSecs)
	if err != nil {
		return nil
	}
	if name, ok := p.Literal(); ok {
		return x.Funcs(name)
	}
	prefix := p.Prefix()
	var out []FuncInfo
	lo, hi := x.nameRange(len(x.t.ByName), x.funcName, prefix, false)
	seen := map[string]bool{}
	for _, i := range x.t.ByName[lo:hi] {
		n := x.t.Str(x.t.Funcs[i].Name)
		if p.Match(n) {
			seen[n] = true
			out = append(out, x.funcInfo(int(i)))
		}
	}
	ilo, ihi := x.nameRange(len(x.t.InlSum), x.inlSumName, prefix, false)
	inl := map[string]int{}
	for _, s := range x.t.InlSum[ilo:ihi] {
		n := x.t.Str(s.Name)
		if !p.Match(n) {
			continue
		}
		if !seen[n] {
			out = append(out, FuncInfo{Name: n, File: x.File(s.DeclFile), Line: int(s.DeclLine), InlineOnly: true, index: -1})
		}
		inl[n] = int(s.N)
	}
	for i := range out {
		out[i].Inlined = inl[out[i].Name]
	}
	slices.SortStableFunc(out, func(a, b FuncInfo) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// FuncAt returns the function whose code holds addr.
func (x *Index) FuncAt(addr uint64) (FuncInfo, bool) {
	x, err := x.use(funcAtSecs)
	if err != nil {
		return FuncInfo{}, false
	}
	if i, ok := x.t.FuncAt(addr); ok {
		return x.funcInfo(i), true
	}
	return FuncInfo{}, false
}

// byAddr is the i-th row in address order, or damaged when the chunk
// of the cache file that holds it is damaged (the index is rebuilt, and
// the caller's search goes on with a row that stops it).
func (x *Index) byAddr(i int, damaged Row) Row {
	if !x.chunksOK(cachefile.SecByAddr, i, i+1) {
		return damaged
	}
	return x.row(x.t.ByAddr[i])
}

// rowsIn returns the code rows with addresses in [lo, hi), by address.
func (x *Index) rowsIn(lo, hi uint64) []uint32 {
	at := func(i int) Row { return x.byAddr(i, Row{}) }
	a := sort.Search(len(x.t.ByAddr), func(i int) bool { return at(i).Addr >= lo })
	b := a
	for b < len(x.t.ByAddr) && at(b).Addr < hi {
		b++
	}
	return x.sortedRows(cachefile.SecByAddr, x.t.ByAddr, a, b)
}

// LineSpec is a parsed FUNC, FILE, FUNC:LINE or FILE:LINE.
type LineSpec struct {
	Func, File string
	Line       int // 0: all lines
	// Inlined adds, after a function's own lines, the lines of the
	// callees inlined into it (marked with Line.Inlined).
	Inlined bool
}

// ParseLineSpec splits FUNC|FILE[:LINE]. A name with a '/' or a source
// suffix (.c, .h, .S) is a file.
func ParseLineSpec(s string) (LineSpec, error) {
	var sp LineSpec
	name := s
	if i := strings.LastIndexByte(s, ':'); i >= 0 {
		n, err := strconv.Atoi(s[i+1:])
		if err != nil || n <= 0 {
			return sp, fmt.Errorf("bad line number in %q (want FUNC, FILE, FUNC:LINE or FILE:LINE)", s)
		}
		name, sp.Line = s[:i], n
	}
	if name == "" {
		return sp, fmt.Errorf("empty function or file name in %q", s)
	}
	if strings.Contains(name, "/") || strings.HasSuffix(name, ".c") || strings.HasSuffix(name, ".h") || strings.HasSuffix(name, ".S") {
		sp.File = name
	} else {
		sp.Func = name
	}
	return sp, nil
}

// matchFiles returns the file ids whose path equals name or ends in
// "/"+name.
func (x *Index) matchFiles(name string) []uint32 {
	name = strings.TrimPrefix(name, "./")
	var out []uint32
	for i, r := range x.t.Files {
		p := x.t.Str(r)
		if p == name || strings.HasSuffix(p, "/"+name) {
			out = append(out, uint32(i))
		}
	}
	return out
}

// fileRows returns rows of file f (all lines, or line only), by line and
// address.
func (x *Index) fileRows(f uint32, line int) []uint32 {
	at := func(i int) Row {
		if !x.chunksOK(cachefile.SecByFile, i, i+1) {
			return Row{File: table.NoFile}
		}
		return x.row(x.t.ByFile[i])
	}
	lo := sort.Search(len(x.t.ByFile), func(i int) bool {
		r := at(i)
		return r.File > f || r.File == f && (line == 0 || int(r.Line) >= line)
	})
	hi := lo
	for hi < len(x.t.ByFile) {
		r := at(hi)
		if r.File != f || line != 0 && int(r.Line) != line {
			break
		}
		hi++
	}
	return x.sortedRows(cachefile.SecByFile, x.t.ByFile, lo, hi)
}

// Lines answers `klasy lines`: the source lines of a function, or of a
// file (or one line of either), each with the addresses of its code.
func (x *Index) Lines(sp LineSpec) (_ []Line, err error) {
	defer mmapfile.Catch(&err, debug.SetPanicOnFault(true))
	mask := uint32(fileLineSecs)
	if sp.Func != "" {
		mask = funcLineSecs
	}
	y, err := x.use(mask)
	if err != nil {
		return nil, err
	}
	out, err := y.lines(sp)
	if z := y.replaced(); z != nil {
		// Damage found on the way: the answer is the rebuilt index's.
		return z.Lines(sp)
	}
	return out, x.explain(err)
}

func (x *Index) lines(sp LineSpec) ([]Line, error) {
	if sp.Func != "" {
		return x.funcLines(sp)
	}
	files := x.matchFiles(sp.File)
	if len(files) == 0 {
		return nil, fmt.Errorf("no source file %q in the line tables", sp.File)
	}
	var rows []uint32
	for _, f := range files {
		rows = append(rows, x.fileRows(f, sp.Line)...)
	}
	out := x.groupRows(rows, "", nil)
	if len(out) == 0 && sp.Line != 0 {
		var all []uint32
		for _, f := range files {
			all = append(all, x.fileRows(f, 0)...)
		}
		if fb, err := x.nearest(x.groupRows(all, "", nil), sp.Line); err == nil {
			return fb, nil
		} else {
			return nil, fmt.Errorf("%s:%d has no code (the compiler merged or removed it): %w", sp.File, sp.Line, err)
		}
	}
	return out, nil
}

// maxFallback is how far the nearest-line rule looks for lines with code.
const maxFallback = 10

// nearest applies KLASY's rule for a line without code: take the nearest
// lines before and after it that have code; if some address of one and
// some address of the other lie in the same basic block, the line runs
// between them, so the line before stands in for before advice and the
// line after for after advice.
func (x *Index) nearest(lines []Line, want int) ([]Line, error) {
	var before, after *Line
	for i := range lines {
		l := &lines[i]
		if l.Line < want && want-l.Line <= maxFallback && (before == nil || l.Line > before.Line) {
			before = l
		}
		if l.Line > want && l.Line-want <= maxFallback && (after == nil || l.Line < after.Line) {
			after = l
		}
	}
	if before == nil || after == nil {
		return nil, fmt.Errorf("no lines with code within %d lines on both sides", maxFallback)
	}
	for _, a := range before.Addrs {
		blk, err := x.BasicBlock(a)
		var ce *mmapfile.ChangedError
		if errors.As(err, &ce) {
			return nil, err
		}
		if err != nil {
			continue
		}
		for _, b := range after.Addrs {
			if b > a && b < blk.End {
				bl, al := *before, *after
				bl.FallbackFor, bl.Fallback = want, "before"
				al.FallbackFor, al.Fallback = want, "after"
				bl.Addrs, al.Addrs = []uint64{a}, []uint64{b}
				return []Line{bl, al}, nil
			}
		}
	}
	return nil, fmt.Errorf("lines %d and %d, the nearest with code, are not in one basic block", before.Line, after.Line)
}

// groupRows turns rows into Lines keyed by (function, inlined callee,
// file, line), sorted by file, line and function, own lines before
// inlined ones. fn, if set, names the function for all; inlined, if set,
// gives each row's inlined callee.
func (x *Index) groupRows(rows []uint32, fn string, inlined func(ri uint32) string) []Line {
	type key struct {
		fn   string
		inl  string
		file uint32
		line uint32
	}
	m := map[key]*Line{}
	var keys []key
	for _, ri := range rows {
		r := x.row(ri)
		if r.Flags&RowEndSequence != 0 || r.Line == 0 {
			continue
		}
		name := fn
		if name == "" {
			if f, ok := x.FuncAt(r.Addr); ok {
				name = f.Name
			}
		}
		var inl string
		if inlined != nil {
			inl = inlined(ri)
		}
		k := key{name, inl, r.File, r.Line}
		l := m[k]
		if l == nil {
			l = &Line{Function: name, File: x.File(r.File), Line: int(r.Line), Inlined: inl}
			m[k] = l
			keys = append(keys, k)
		}
		l.Addrs = append(l.Addrs, r.Addr)
		l.Stmt = l.Stmt || r.Flags&RowStmt != 0
	}
	out := make([]Line, 0, len(keys))
	for _, k := range keys {
		l := m[k]
		slices.Sort(l.Addrs)
		l.Addrs = slices.Compact(l.Addrs)
		out = append(out, *l)
	}
	slices.SortStableFunc(out, lineOrder)
	return out
}

// lineOrder sorts own lines before inlined ones, then by file, line and
// function.
func lineOrder(a, b Line) int {
	if ai, bi := a.Inlined != "", b.Inlined != ""; ai != bi {
		if ai {
			return 1
		}
		return -1
	}
	if c := cmp.Compare(a.File, b.File); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Line, b.Line); c != 0 {
		return c
	}
	return cmp.Compare(a.Function, b.Function)
}

func (x *Index) funcLines(sp LineSpec) ([]Line, error) {
	fis := x.Funcs(sp.Func)
	if len(fis) == 0 {
		return nil, fmt.Errorf("no function %q in the debug info", sp.Func)
	}
	var out []Line
	for _, fi := range fis {
		out = append(out, x.linesOf(fi, sp.Line, sp.Inlined)...)
	}
	if len(out) == 0 && sp.Line != 0 && !sp.Inlined {
		// A line of an inlined callee, asked for by number.
		for _, fi := range fis {
			out = append(out, x.linesOf(fi, sp.Line, true)...)
		}
	}
	if len(out) == 0 && sp.Line != 0 {
		all, err := x.funcLines(LineSpec{Func: sp.Func})
		if err == nil {
			var fb []Line
			if fb, err = x.nearest(all, sp.Line); err == nil {
				return fb, nil
			}
		}
		return nil, fmt.Errorf("line %d of %s has no code (the compiler merged or removed it, or it is outside the function): %w", sp.Line, sp.Func, err)
	}
	return out, nil
}

// linesOf returns the lines (or line, if not 0) of fi: its own body, as
// perf probe -L shows it, and with inlined also the lines of the callees
// inlined into it. A row is a callee's when its address lies in an
// inlined copy within fi, unless it is the file:line of the outermost
// copy's call; the call line itself is listed at the copy's entry, since
// the row there carries the callee's line. Rows from other files than
// fi's (code inlined from headers) are left out unless inlined is set.
func (x *Index) linesOf(fi FuncInfo, line int, inlined bool) []Line {
	ranges := fi.Ranges
	if fi.InlineOnly {
		ranges = x.inlineRanges(fi.Name)
	}
	// A copy nested in another lies within the other's ranges, so has
	// less code in all: size orders copies holding one address.
	type copyRange struct {
		lo, hi uint64
		size   uint64 // of all the copy's ranges
		in     Inline
	}
	var copies []copyRange
	if fi.index >= 0 {
		for _, in := range x.t.Inlines {
			if in.Caller == uint32(fi.index) {
				rs := x.t.InlRanges[in.RngOff : in.RngOff+in.RngN]
				var size uint64
				for _, r := range rs {
					size += r[1] - r[0]
				}
				for _, r := range rs {
					copies = append(copies, copyRange{r[0], r[1], size, in})
				}
			}
		}
	}
	// at returns the innermost and the outermost inlined copies holding
	// addr; ok is false if none.
	at := func(addr uint64) (inner, outer Inline, ok bool) {
		var in, out copyRange
		for _, c := range copies {
			if addr < c.lo || addr >= c.hi {
				continue
			}
			if !ok || c.size < in.size {
				in = c
			}
			if !ok || c.size > out.size {
				out = c
			}
			ok = true
		}
		return in.in, out.in, ok
	}
	// within returns the copy that c's range lies in, a larger one.
	within := func(c copyRange) (Inline, bool) {
		var best copyRange
		found := false
		for _, p := range copies {
			if p.in.DIE != c.in.DIE && p.lo <= c.lo && c.hi <= p.hi && p.size > c.size &&
				(!found || p.size < best.size) {
				best, found = p, true
			}
		}
		return best.in, found
	}
	fileOK := func(f uint32) bool { return fi.File == "" || x.File(f) == fi.File }
	var rows []uint32
	label := map[uint32]string{}
	for _, r := range ranges {
		for _, ri := range x.rowsIn(r[0], r[1]) {
			row := x.row(ri)
			if line != 0 && int(row.Line) != line {
				continue
			}
			inner, outer, ok := at(row.Addr)
			if !ok && fi.index >= 0 && row.File == x.t.Funcs[fi.index].DeclFile && int(row.Line) < fi.Line {
				// Above fi in its file: a line of a callee that the
				// compiler put next to, not inside, its inlined ranges.
				// It belongs to the callee defined last before it.
				for _, c := range copies {
					if c.in.DeclFile == row.File && c.in.DeclLine <= row.Line && (!ok || c.in.DeclLine > inner.DeclLine) {
						inner, ok = c.in, true
					}
				}
				outer = inner
			}
			if ok && !(outer.CallFile == row.File && outer.CallLine == row.Line) {
				if inlined {
					rows = append(rows, ri)
					label[ri] = x.t.Str(inner.Name)
				}
				continue
			}
			if fileOK(row.File) {
				rows = append(rows, ri)
			}
		}
	}
	out := x.groupRows(rows, fi.Name, func(ri uint32) string { return label[ri] })
	// Each copy's call line, at its entry (its lowest address): a line of
	// fi for a copy inlined directly into fi, else of the copy it is in.
	entry := map[uint64]uint64{}
	for _, c := range copies {
		if e, ok := entry[c.in.DIE]; !ok || c.lo < e {
			entry[c.in.DIE] = c.lo
		}
	}
	var calls []Line
	for _, c := range copies {
		in := c.in
		if entry[in.DIE] != c.lo || in.CallLine == 0 || line != 0 && int(in.CallLine) != line {
			continue
		}
		l := Line{Function: fi.Name, File: x.File(in.CallFile), Line: int(in.CallLine), Addrs: []uint64{c.lo}, Stmt: true}
		if parent, ok := within(c); ok {
			if !inlined {
				continue
			}
			l.Inlined = x.t.Str(parent.Name)
		} else if !fileOK(in.CallFile) {
			continue
		}
		calls = append(calls, l)
	}
	return mergeLines(out, calls)
}

// mergeLines adds the call lines to lines: addresses of a line already
// there join it, other lines are inserted in order.
func mergeLines(lines, calls []Line) []Line {
	for _, c := range calls {
		i := slices.IndexFunc(lines, func(l Line) bool {
			return l.Function == c.Function && l.File == c.File && l.Line == c.Line && l.Inlined == c.Inlined
		})
		if i >= 0 {
			lines[i].Addrs = slices.Compact(slices.Sorted(slices.Values(append(lines[i].Addrs, c.Addrs...))))
			continue
		}
		lines = append(lines, c)
	}
	slices.SortStableFunc(lines, lineOrder)
	return lines
}

func (x *Index) inlineRanges(name string) [][2]uint64 {
	lo, hi := x.nameRange(len(x.t.InlName), x.inlineName, name, true)
	var out [][2]uint64
	for _, i := range x.t.InlName[lo:hi] {
		in := x.t.Inlines[i]
		out = append(out, x.t.InlRanges[in.RngOff:in.RngOff+in.RngN]...)
	}
	return out
}

// InlineInfo is one inlined copy of a function.
type InlineInfo struct {
	Name     string      `json:"name"`
	Caller   string      `json:"caller"`
	CallFile string      `json:"call_file"`
	CallLine int         `json:"call_line"`
	Ranges   [][2]uint64 `json:"-"`
}

// Inlines returns the inlined copies of the function name.
func (x *Index) Inlines(name string) []InlineInfo {
	x, err := x.use(inlineSecs)
	if err != nil {
		return nil
	}
	lo, hi := x.nameRange(len(x.t.InlName), x.inlineName, name, true)
	var out []InlineInfo
	for _, i := range x.t.InlName[lo:hi] {
		in := x.t.Inlines[i]
		ii := InlineInfo{Name: name, CallFile: x.File(in.CallFile), CallLine: int(in.CallLine), Ranges: x.t.InlRanges[in.RngOff : in.RngOff+in.RngN]}
		if in.Caller != table.NoFile {
			ii.Caller = x.t.Str(x.t.Funcs[in.Caller].Name)
		}
		out = append(out, ii)
	}
	return out
}

// AllFuncs returns every live out-of-line function in index order
// (tests).
func (x *Index) AllFuncs() []FuncInfo {
	x, err := x.use(funcSecs)
	if err != nil {
		return nil
	}
	out := make([]FuncInfo, 0, len(x.t.Funcs))
	for i, f := range x.t.Funcs {
		if f.Flags&FuncDiscarded == 0 {
			out = append(out, x.funcInfo(i))
		}
	}
	return out
}

// Discarded returns the out-of-line copies of functions whose code never
// runs, in index order: __weak definitions that a strong one overrode,
// code of sections the linker discarded (elfimage.Code). No other query
// offers them, their inlined copies or their lines; a probe there would
// never fire.
func (x *Index) Discarded() []FuncInfo {
	x, err := x.use(funcSecs)
	if err != nil {
		return nil
	}
	var out []FuncInfo
	for i, f := range x.t.Funcs {
		if f.Flags&FuncDiscarded != 0 {
			out = append(out, x.funcInfo(i))
		}
	}
	return out
}
