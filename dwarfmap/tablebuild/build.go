// Package tablebuild builds a dwarfmap index's tables (package table)
// from an image's DWARF: compilation units decoded in parallel, line
// tables through lineprog, DIEs through diescan, merged in unit order
// so that the tables do not depend on scheduling.
package tablebuild

import (
	"cmp"
	"debug/dwarf"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/klasy/klasy/dwarfmap/diescan"
	"github.com/klasy/klasy/dwarfmap/elfimage"
	"github.com/klasy/klasy/dwarfmap/lineprog"
	"github.com/klasy/klasy/dwarfmap/table"
	"github.com/klasy/klasy/internal/mmapfile"
)

// unitResult is what one worker learns from one compilation unit; files
// are local to the unit until merged.
type unitResult struct {
	name, compDir string
	lowPC         uint64
	version       int
	files         []string
	rows          []table.Row // File is an index into files
	funcs         []pendingFunc
	inlines       []pendingInline
	structs       []pendingStruct
	err           error
}

type pendingFunc struct {
	name     []byte
	entry    uint64
	die      uint64
	declFile int // index into unitResult.files, -1 unknown
	declLine int
	flags    uint32
	ranges   [][2]uint64
}

type pendingInline struct {
	name     []byte
	declFile int
	declLine int
	die      uint64
	callFile int
	callLine int
	caller   int // index into unitResult.funcs, -1 unknown
	ranges   [][2]uint64
}

type pendingStruct struct {
	name []byte
	die  uint64
	size int64
	kind uint32
}

// unitBounds lists [off, end) of every unit header in .debug_info, read
// straight from the unit lengths so workers can start anywhere.
func unitBounds(info []byte) ([][2]uint64, error) {
	var out [][2]uint64
	for off := uint64(0); off < uint64(len(info)); {
		if off+4 > uint64(len(info)) {
			return nil, fmt.Errorf("unit header at %#x: %w", off, elfimage.ErrTruncated)
		}
		n := uint64(binary.LittleEndian.Uint32(info[off:]))
		hdr := uint64(4)
		if n == 0xffffffff {
			if off+12 > uint64(len(info)) {
				return nil, fmt.Errorf("unit header at %#x: %w", off, elfimage.ErrTruncated)
			}
			n = binary.LittleEndian.Uint64(info[off+4:])
			hdr = 12
		} else if n >= 0xfffffff0 {
			return nil, fmt.Errorf("unit at %#x: bad length %#x", off, n)
		}
		end := off + hdr + n
		if end > uint64(len(info)) || end <= off {
			return nil, fmt.Errorf("unit at %#x ends at %#x past .debug_info (%d bytes): %w", off, end, len(info), elfimage.ErrTruncated)
		}
		out = append(out, [2]uint64{off, end})
		off = end
	}
	return out, nil
}

// Progress is called from Build as units finish.
type Progress func(done, total int)

// Build indexes img: units are decoded in parallel, one worker per CPU,
// then merged into flat tables in unit order so the result does not
// depend on scheduling. An image that changes while it is read (a fault
// on its mapping, or a size or time that differs at the end) gives a
// *mmapfile.ChangedError, never tables.
func Build(img *elfimage.Image, progress Progress) (x *table.Tables, err error) {
	defer func() {
		if err != nil {
			x, err = nil, img.Explain(err)
		}
	}()
	defer mmapfile.Catch(&err, debug.SetPanicOnFault(true))
	if img.ELF.ByteOrder != binary.LittleEndian {
		return nil, errors.New("only little-endian images are supported")
	}
	bounds, err := unitBounds(img.Section(".debug_info"))
	if err != nil {
		return nil, err
	}
	secs := diescan.NewSections(img.Section)
	lsecs := lineprog.Sections{Line: img.Section(".debug_line"), Str: secs.Str, LineStr: secs.LineStr}
	// A lower GC target while tables grow keeps a vmlinux build well under
	// 1 GB for about 20% more CPU.
	defer debug.SetGCPercent(debug.SetGCPercent(50))
	// Workers decode units in any order; this goroutine merges them in
	// unit order as they become ready, so merging overlaps decoding and
	// each unit's tables are freed as soon as they are copied.
	results := make([]unitResult, len(bounds))
	ready := make([]chan struct{}, len(bounds))
	for i := range ready {
		ready[i] = make(chan struct{})
	}
	var next, done atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	var mu sync.Mutex
	// However Build ends, no worker reads the image after it returns.
	defer func() {
		stop.Store(true)
		wg.Wait()
	}()
	workers := min(runtime.GOMAXPROCS(0), len(bounds))
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Faults on the image's mapping panic, for readUnit to
			// recover.
			debug.SetPanicOnFault(true)
			cache := diescan.Abbrevs{}
			names := lineprog.NewNames()
			for !stop.Load() {
				i := int(next.Add(1) - 1)
				if i >= len(bounds) {
					return
				}
				results[i] = readUnit(secs, lsecs, bounds, i, cache, names)
				failed := results[i].err != nil // results[i] is the merger's once ready
				close(ready[i])
				if failed {
					// Build fails at this unit: every unit before it
					// was taken and is finished; no later one is needed,
					// nor progress said.
					stop.Store(true)
					return
				}
				n := int(done.Add(1))
				if progress != nil {
					mu.Lock()
					progress(n, len(bounds))
					mu.Unlock()
				}
			}
		}()
	}
	m := newMerger(len(img.Section(".debug_line")))
	for i := range bounds {
		<-ready[i]
		if err := results[i].err; err != nil {
			return nil, fmt.Errorf("unit at %#x: %w", bounds[i][0], err)
		}
		m.add(i, &results[i], bounds[i])
		results[i] = unitResult{} // let the GC have it
	}
	// Overwritten in place, the image may have given bytes that parse:
	// an index of them must not be saved under its build-id.
	if err := img.Changed(); err != nil {
		return nil, err
	}
	code, err := img.Code()
	if err != nil {
		return nil, err
	}
	return m.finish(code), nil
}

func readUnit(secs *diescan.Sections, lsecs lineprog.Sections, bounds [][2]uint64, ui int, cache diescan.Abbrevs, names *lineprog.Names) (res unitResult) {
	defer func() {
		if r := recover(); r != nil {
			if res.err = mmapfile.FaultError(r); res.err == nil {
				res.err = fmt.Errorf("malformed DWARF: %v", r)
			}
		}
	}()
	b := bounds[ui]
	s, err := diescan.NewUnit(secs, b[0], b[1], cache)
	if err != nil {
		res.err = err
		return
	}
	res.version = s.Version()
	var cu diescan.DIE
	if !s.UnitDIE(&cu) {
		res.err = fmt.Errorf("reading unit DIE: %w", diescan.ErrMalformed)
		return
	}
	if cu.Tag != dwarf.TagCompileUnit && cu.Tag != dwarf.TagPartialUnit {
		return // type units and the like carry no code
	}
	res.name, res.compDir, res.lowPC = string(cu.Name), string(cu.CompDir), cu.Low

	ua := s.UnitAttrs()
	res.files, res.rows, err = lineprog.Decode(lsecs, lineprog.Unit{StmtList: ua.StmtList, CompDir: string(cu.CompDir), AddrSize: s.AddrSize()}, nil, names)
	if err != nil {
		res.err = fmt.Errorf("line table of %s: %w", res.name, err)
		return
	}
	if !cu.Children {
		return
	}

	type origin struct {
		name     []byte
		declFile int
		declLine int
		flags    uint32
	}
	origins := map[uint64]origin{}
	// Concrete DIEs naming an abstract origin, resolved after the walk
	// because the origin may come later in the unit.
	var funcOrigin, inlOrigin []uint64
	type frame struct{ depth, fn int }
	var stack []frame
	depth := 1
	var e diescan.DIE
	for depth > 0 {
		if !s.Next(&e) {
			if s.Err() != nil {
				res.err = fmt.Errorf("reading DIE at %#x: %w", e.Off, diescan.ErrMalformed)
				return
			}
			depth--
			for len(stack) > 0 && stack[len(stack)-1].depth > depth {
				stack = stack[:len(stack)-1]
			}
			continue
		}
		switch e.Tag {
		case dwarf.TagSubprogram:
			o := origin{name: e.Name, declFile: int(e.DeclFile), declLine: int(e.DeclLine)}
			if e.External {
				o.flags |= table.FuncExternal
			}
			if e.Inline == 1 || e.Inline == 3 {
				o.flags |= table.FuncInline
			}
			if len(o.name) > 0 {
				origins[e.Off] = o
			}
			rngs, err := s.Ranges(&e)
			if err != nil {
				res.err = err
				return
			}
			if len(rngs) == 0 {
				break
			}
			ao := e.Origin
			if ao == 0 {
				ao = e.Spec
			}
			funcOrigin = append(funcOrigin, ao)
			// The entry is low_pc, else DW_AT_entry_pc, else the first
			// range gcc lists (the hot part; .cold parts follow).
			entry := rngs[0][0]
			if e.HasLow {
				entry = e.Low
			} else if e.HasEntryPC {
				entry = e.EntryPC
			}
			res.funcs = append(res.funcs, pendingFunc{name: o.name, entry: entry, die: e.Off, declFile: o.declFile, declLine: o.declLine, flags: o.flags, ranges: sortRanges(rngs)})
			if e.Children {
				stack = append(stack, frame{depth + 1, len(res.funcs) - 1})
			}
		case dwarf.TagInlinedSubroutine:
			rngs, err := s.Ranges(&e)
			if err != nil {
				res.err = err
				return
			}
			if len(rngs) == 0 {
				break
			}
			in := pendingInline{die: e.Off, callFile: int(e.CallFile), callLine: int(e.CallLine), declFile: -1, caller: -1, ranges: sortRanges(rngs)}
			if len(stack) > 0 {
				in.caller = stack[len(stack)-1].fn
			}
			inlOrigin = append(inlOrigin, e.Origin)
			res.inlines = append(res.inlines, in)
		case dwarf.TagStructType, dwarf.TagUnionType:
			if depth != 1 || len(e.Name) == 0 || e.Decl {
				break
			}
			kind := uint32(table.KindStruct)
			if e.Tag == dwarf.TagUnionType {
				kind = table.KindUnion
			}
			res.structs = append(res.structs, pendingStruct{e.Name, e.Off, e.ByteSize, kind})
		case dwarf.TagTypedef:
			// typedef struct {...} spinlock_t: layouts are asked for by
			// typedef name too; resolved at query time.
			if depth == 1 && len(e.Name) > 0 && e.Type != 0 {
				res.structs = append(res.structs, pendingStruct{e.Name, e.Off, 0, table.KindTypedef})
			}
		}
		if e.Children {
			if !diescan.HoldsCode(e.Tag) && s.SkipChildren(&e) {
				continue
			}
			depth++
		}
	}

	// lookup resolves an origin outside this unit's map (a cross-unit
	// DIE, as LTO makes) by scanning that one DIE.
	lookup := func(off uint64) (origin, bool) {
		if o, ok := origins[off]; ok {
			return o, true
		}
		for hops := 0; off != 0 && hops < 4; hops++ {
			i := sort.Search(len(bounds), func(i int) bool { return bounds[i][1] > off })
			if i == len(bounds) {
				return origin{}, false
			}
			os, err := diescan.NewUnit(secs, bounds[i][0], bounds[i][1], cache)
			if err != nil {
				return origin{}, false
			}
			os.Seek(off)
			var e diescan.DIE
			if !os.Next(&e) {
				return origin{}, false
			}
			if len(e.Name) > 0 {
				o := origin{name: e.Name, declFile: -1}
				if e.External {
					o.flags |= table.FuncExternal
				}
				return o, true
			}
			off = e.Origin
		}
		return origin{}, false
	}
	for i, ao := range funcOrigin {
		f := &res.funcs[i]
		if ao == 0 {
			continue
		}
		if o, ok := lookup(ao); ok {
			if len(f.name) == 0 {
				f.name = o.name
			}
			f.flags |= o.flags
			if f.declFile < 0 {
				f.declFile, f.declLine = o.declFile, o.declLine
			}
		}
	}
	for i, ao := range inlOrigin {
		if o, ok := lookup(ao); ok {
			res.inlines[i].name = o.name
			res.inlines[i].declFile, res.inlines[i].declLine = o.declFile, o.declLine
		}
	}
	return res
}

func sortRanges(r [][2]uint64) [][2]uint64 {
	slices.SortFunc(r, func(a, b [2]uint64) int { return cmp.Compare(a[0], b[0]) })
	return r
}

// interner builds the string blob.
type interner struct {
	blob []byte
	m    map[string]table.StrRef
}

func (in *interner) addBytes(b []byte) table.StrRef {
	if r, ok := in.m[string(b)]; ok {
		return r
	}
	return in.add(string(b))
}

func (in *interner) add(s string) table.StrRef {
	if r, ok := in.m[s]; ok {
		return r
	}
	r := table.StrRef{Off: uint32(len(in.blob)), Len: uint32(len(s))}
	in.blob = append(in.blob, s...)
	in.m[s] = r
	return r
}

// merger builds the flat tables from unit results, in unit order.
type merger struct {
	x          *table.Tables
	in         *interner
	fileIDs    map[string]uint32
	structSeen map[string]bool
	// typedefSeen are the typedef names, kept apart from the tags.
	typedefSeen map[string]bool
}

// newMerger sizes the row table from the line section (Debian's vmlinux:
// 4 bytes of .debug_line per row), so 4.3 M rows are not copied on growth.
func newMerger(lineBytes int) *merger {
	return &merger{
		x:           &table.Tables{Rows: make([]table.Row, 0, lineBytes/3+1024)},
		in:          &interner{m: map[string]table.StrRef{}},
		fileIDs:     map[string]uint32{},
		structSeen:  map[string]bool{},
		typedefSeen: map[string]bool{},
	}
}

func (m *merger) add(ui int, res *unitResult, bounds [2]uint64) {
	x, in := m.x, m.in
	gid := make([]uint32, len(res.files))
	for j, f := range res.files {
		id, ok := m.fileIDs[f]
		if !ok {
			id = uint32(len(x.Files))
			m.fileIDs[f] = id
			x.Files = append(x.Files, in.add(f))
		}
		gid[j] = id
	}
	file := func(i int) uint32 {
		if i < 0 || i >= len(gid) {
			return table.NoFile
		}
		return gid[i]
	}
	u := table.Unit{Name: in.add(res.name), CompDir: in.add(res.compDir), Off: bounds[0], End: bounds[1],
		LowPC: res.lowPC, RowStart: uint32(len(x.Rows)), Version: uint32(res.version)}
	for _, r := range res.rows {
		r.File = gid[r.File]
		x.Rows = append(x.Rows, r)
	}
	u.RowEnd = uint32(len(x.Rows))
	x.Units = append(x.Units, u)
	fbase := uint32(len(x.Funcs))
	for _, f := range res.funcs {
		x.Funcs = append(x.Funcs, table.Func{Name: in.addBytes(f.name), Entry: f.entry, DIE: f.die, Unit: uint32(ui),
			DeclFile: file(f.declFile), DeclLine: uint32(f.declLine), Flags: f.flags,
			RngOff: uint32(len(x.Ranges)), RngN: uint32(len(f.ranges))})
		x.Ranges = append(x.Ranges, f.ranges...)
	}
	for _, f := range res.inlines {
		caller := table.NoFile
		if f.caller >= 0 {
			caller = fbase + uint32(f.caller)
		}
		x.Inlines = append(x.Inlines, table.Inline{Name: in.addBytes(f.name), DIE: f.die, Unit: uint32(ui),
			CallFile: file(f.callFile), CallLine: uint32(f.callLine), Caller: caller,
			DeclFile: file(f.declFile), DeclLine: uint32(f.declLine),
			RngOff: uint32(len(x.InlRanges)), RngN: uint32(len(f.ranges))})
		x.InlRanges = append(x.InlRanges, f.ranges...)
	}
	for _, s := range res.structs {
		seen := m.structSeen
		if s.kind == table.KindTypedef {
			seen = m.typedefSeen // C keeps tags and typedef names apart
		}
		if seen[string(s.name)] {
			continue
		}
		seen[string(s.name)] = true
		x.Structs = append(x.Structs, table.Struct{Name: in.addBytes(s.name), DIE: s.die, Unit: uint32(ui), Size: uint32(s.size), Kind: s.kind})
	}
}

// finish marks the functions that code says are dead and computes the
// lookup arrays.
func (m *merger) finish(code *elfimage.Code) *table.Tables {
	x := m.x
	x.Strs = m.in.blob
	for i := range x.Funcs {
		if f := &x.Funcs[i]; code.Discarded(f.Entry, x.Str(f.Name)) {
			f.Flags |= table.FuncDiscarded
		}
	}
	x.Finish()
	return x
}
