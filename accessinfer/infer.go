package accessinfer

import (
	"cmp"
	"debug/dwarf"
	"fmt"
	"runtime"
	"runtime/debug"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/arch/x86/x86asm"

	"github.com/klasy/klasy/accessinfer/bitpat"
	"github.com/klasy/klasy/accessinfer/collect"
	"github.com/klasy/klasy/accessinfer/dwscan"
	"github.com/klasy/klasy/accessinfer/members"
	"github.com/klasy/klasy/accessinfer/regs"
	"github.com/klasy/klasy/dwarfmap/diescan"
	"github.com/klasy/klasy/dwarfmap/elfimage"
	"github.com/klasy/klasy/x86code"
)

// Access is one struct member an instruction touches.
type Access struct {
	PC   uint64
	Func string // the out-of-line function holding PC
	// Struct is the member's named container as the plugin names it:
	// the tag, or the typedef of an anonymous type ("" if neither);
	// Member its name, anonymous members collapsed. An instruction
	// touching s->inner.x gives two: (S, inner) at Depth 0 and
	// (inner's type, x) at Depth 1, as the plugin records two.
	Struct   string
	Member   string
	Union    bool // the container is a union
	Bitfield bool
	// BitTest: a bitfield whose bits the instruction (or the test or bt
	// after its load) tests against a constant, or one of several
	// members one such test covers. GCC's front end folds such a test
	// (if (skb->cloned), p->bf == 3) and merges adjacent members'
	// compares (c->x86 == 6 && c->x86_model == 1) into a BIT_FIELD_REF,
	// in which the klasy plugin records no member
	// (TestPluginMissesBitfieldTests, TestPluginMissesMergedCompares).
	BitTest bool
	// BitOffset and BitSize are the member's bits in its container.
	BitOffset, BitSize int64
	Kind               x86code.MemKind
	Depth              int
	// Reg is the DWARF register the memory operand is based on (-1:
	// none: a global, RIP-relative or absolute); the container starts
	// at Reg + Base.
	Reg  int
	Base int64
	// ContainerOff is where this level's container starts from Reg +
	// Base (0 at Depth 0; s->inner.x: inner's offset in s at Depth 1);
	// ContainerKnown is false past an array member, whose element the
	// instruction's index picks.
	ContainerOff   int64
	ContainerKnown bool
	// Why says where the base's type came from: "var skb", "sk_buff.sk"
	// (loaded from that member), "global init_task", "per-CPU
	// current_task", "ret alloc_skb", "stack var s".
	Why string
	// Calls are the inlined copies holding PC, innermost first: where
	// each was called.
	Calls []CallSite
}

// CallSite is where an inlined copy was called.
type CallSite struct {
	Func string // the inlined function
	File string
	Line int
}

func (a Access) String() string {
	return fmt.Sprintf("%#x %s.%s %s (%s)", a.PC, a.Struct, a.Member, a.Kind, a.Why)
}

// Options select what Infer looks at.
type Options struct {
	// Func, if not nil, selects the out-of-line functions to analyse by
	// name (globals are read from the whole image regardless).
	Func func(name string) bool
	// Workers is the number of goroutines (0: GOMAXPROCS).
	Workers int
}

// Result is what Infer found.
type Result struct {
	Accesses []Access // by PC, then depth
	Funcs    int      // functions analysed
	Insns    int      // instructions decoded
	MemInsns int      // of which with a memory operand (lea included)
	Scan     time.Duration
	Track    time.Duration
}

// globals finds the variables at fixed addresses.
type globals struct {
	normal, percpu []dwscan.Global // by address
}

func (gl *globals) find(a uint64, percpu bool) (dwscan.Global, int64, bool) {
	t := gl.normal
	if percpu {
		t = gl.percpu
	}
	i := sort.Search(len(t), func(i int) bool { return t[i].Addr > a }) - 1
	for j := i; j >= 0 && j > i-8; j-- {
		if a >= t[j].Addr && a < t[j].Addr+uint64(t[j].Size) {
			return t[j], int64(a - t[j].Addr), true
		}
	}
	return dwscan.Global{}, 0, false
}

// worker holds what one goroutine reuses.
type worker struct {
	ts   *members.Types
	g    *globals
	rets map[uint64]dwarf.Offset
	img  *elfimage.Image
	res  *elfimage.Reserved
	ft   fnTrack // its buffers reused from one function to the next
	// retTypes caches retPointee by callee.
	retTypes map[uint64]*members.Type
	// whys are the provenances tracked values name by number (val.why;
	// 0: none), whyIx their numbers.
	whys  []string
	whyIx map[string]uint32
	wbuf  []byte
}

// whyRet is the provenance "ret": a value a call returned.
const whyRet = 1

// why numbers the provenance a+b+c: looked up in a buffer, a string
// made only for a new one.
func (w *worker) why(a, b, c string) uint32 {
	w.wbuf = append(append(append(w.wbuf[:0], a...), b...), c...)
	if id, ok := w.whyIx[string(w.wbuf)]; ok {
		return id
	}
	s := string(w.wbuf)
	w.whyIx[s] = uint32(len(w.whys))
	w.whys = append(w.whys, s)
	return uint32(len(w.whys) - 1)
}

// retPointee is the type a call to target returns a pointer to, nil
// if none tracking uses: once per callee, not at every call.
func (w *worker) retPointee(target uint64) *members.Type {
	if p, ok := w.retTypes[target]; ok {
		return p
	}
	var p *members.Type
	if t, ok := w.rets[target]; ok {
		if q := w.ts.Pointee(w.ts.Get(t)); members.Useful(q) {
			p = q
		}
	}
	w.retTypes[target] = p
	return p
}

// Infer analyses the out-of-line functions of an image (a vmlinux, a
// linked executable; a module's code addresses are section offsets and
// its globals unrelocated: not supported yet).
func Infer(img *elfimage.Image, opt Options) (*Result, error) {
	// debug/dwarf's reading of the whole image (every unit's
	// abbreviations: 3% of inference) only when a scan asks for it
	// (dwscan.Scanner.Err), or to say why there is no DWARF.
	dw := sync.OnceValues(img.DWARF)
	if len(img.Section(".debug_info")) == 0 {
		if _, err := dw(); err != nil {
			return nil, err
		}
	}
	// Inference allocates ~0.8 GB in short-lived pieces for a vmlinux:
	// collecting less often saved a quarter of its CPU time at 200, and
	// 400 another 12% for 130 MB more at the peak (the built kernel:
	// still below what 200 took before allocations were cut).
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	nw := opt.Workers
	if nw <= 0 {
		nw = runtime.GOMAXPROCS(0)
	}
	start := time.Now()
	// The units, in order, from their headers.
	cus := dwscan.Units(img.Section(".debug_info"))
	scans := make([]dwscan.Unit, len(cus))
	// scanner[i] is the worker that scanned unit i: its types (read
	// lazily, per unit, as each unit has its own copy of struct
	// sk_buff) serve the tracking of that unit's functions too.
	scanner := make([]int, len(cus))
	var wg sync.WaitGroup
	next := make(chan int)
	// Each worker's types, read in the scan, serve it in tracking too.
	sec := dwscan.Sections{Info: img.Section(".debug_info"), Loc: img.Section(".debug_loc"),
		Loclists: img.Section(".debug_loclists"), Addr: img.Section(".debug_addr"),
		Line: img.Section(".debug_line"), Str: img.Section(".debug_str"), LineStr: img.Section(".debug_line_str"),
		DIEs: diescan.NewSections(img.Section)}
	sec.DIEs.ShareAbbrevs()
	tss, errs := make([]*members.Types, nw), make([]error, nw)
	for w := range tss {
		tss[w] = members.NewTypes(sec.DIEs, cus)
	}
	for w := 0; w < nw; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := dwscan.NewScanner(dw, tss[w], sec)
			for i := range next {
				scanner[i] = w
				s.Scan(cus[i][0], cus[i][1], &scans[i])
			}
			errs[w] = s.Err()
		}()
	}
	for i := range cus {
		next <- i
	}
	close(next)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	res := &Result{Scan: time.Since(start)}
	start = time.Now()

	// The per-CPU area: variables there are reached through %gs.
	var pcpu [2]uint64
	for _, s := range img.ELF.Sections {
		if s.Name == ".data..percpu" {
			pcpu = [2]uint64{s.Addr, s.Addr + s.Size}
		}
	}
	gl := &globals{}
	rets := map[uint64]dwarf.Offset{}
	var funcs []*dwscan.Function
	var unitOf []int // funcs[k]'s unit
	seen := map[uint64]bool{}
	for i := range scans {
		for _, g := range scans[i].Globals {
			if g.Addr >= pcpu[0] && g.Addr < pcpu[1] {
				gl.percpu = append(gl.percpu, g)
			} else {
				gl.normal = append(gl.normal, g)
			}
		}
		for _, r := range scans[i].Rets {
			rets[r.Entry] = r.Type
		}
		for j := range scans[i].Funcs {
			f := &scans[i].Funcs[j]
			if opt.Func != nil && !opt.Func(f.Name) {
				continue
			}
			if seen[f.Entry] {
				continue
			}
			seen[f.Entry] = true
			funcs = append(funcs, f)
			unitOf = append(unitOf, i)
		}
	}
	for _, t := range []*[]dwscan.Global{&gl.normal, &gl.percpu} {
		sort.Slice(*t, func(i, j int) bool { return (*t)[i].Addr < (*t)[j].Addr })
	}
	reserved, _ := img.Reserved()

	out := make([][]Access, len(funcs))
	counts := make([][2]int, len(funcs))
	// Each worker tracks the functions of the units it scanned first,
	// then helps the others: a unit's types are read by one worker.
	queues := make([][]int, nw)
	for k := range funcs {
		w := scanner[unitOf[k]]
		queues[w] = append(queues[w], k)
	}
	taken := make([]atomic.Int64, nw)
	for w := 0; w < nw; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wk := &worker{ts: tss[w], g: gl, rets: rets, img: img, res: reserved, retTypes: map[uint64]*members.Type{},
				whys: []string{"", "ret"}, whyIx: map[string]uint32{"": 0, "ret": whyRet}}
			for q := 0; q < nw; q++ {
				queue := queues[(w+q)%nw]
				pos := &taken[(w+q)%nw]
				for {
					j := int(pos.Add(1)) - 1
					if j >= len(queue) {
						break
					}
					i := queue[j]
					out[i], counts[i] = wk.function(funcs[i])
				}
			}
		}()
	}
	wg.Wait()
	for i := range out {
		res.Insns += counts[i][0]
		res.MemInsns += counts[i][1]
	}
	res.Accesses = collect.Merge(out, func(a *Access) uint64 { return a.PC },
		func(i int) [][2]uint64 { return funcs[i].Ranges })
	res.Funcs = len(funcs)
	res.Track = time.Since(start)
	return res, nil
}

// byPC orders accesses by PC. slices' generic sort moves the large
// Access values directly; sort.SliceStable's reflection swapper moved
// them with write barriers, 4% of inference's CPU time.
func byPC(a, b Access) int { return cmp.Compare(a.PC, b.PC) }

// function analyses one out-of-line function.
func (w *worker) function(f *dwscan.Function) (accs []Access, counts [2]int) {
	var ranges []x86code.Range
	for _, r := range f.Ranges {
		code := w.img.ReadText(r[0], r[1]-r[0])
		if code == nil {
			return nil, counts // discarded code, or not in the image
		}
		ranges = append(ranges, x86code.Range{Addr: r[0], Code: code})
	}
	ft := &w.ft
	ft.reset(w, f)
	var patched x86code.PatchedBranches
	for _, r := range f.Ranges {
		for a, t := range w.res.JumpsIn(r[0], r[1]) {
			if patched == nil {
				patched = x86code.PatchedBranches{}
			}
			patched[a] = t
		}
	}
	// Decoded once, for the graph and for tracking, into the worker's
	// buffer: the ranges one after the other.
	decoded := grow(ft.decoded, len(ranges))
	ft.decoded = decoded
	buf := ft.insns[:0]
	for i, r := range ranges {
		at := len(buf)
		buf = ft.dec.DecodeAppend(buf, r.Code, r.Addr)
		decoded[i] = buf[at:len(buf):len(buf)]
	}
	ft.insns = buf
	ft.index.Reset(buf, ranges)
	ft.copies = grow(ft.copies, len(buf))
	ft.g = x86code.FuncGraphInto(&ft.graph, f.Entry, ranges, decoded, patched)
	counts[0] = len(ft.insns)
	ft.buildFacts()
	return ft.run(&counts[1]), counts
}

// run does the data flow to a fixed point, then one pass that emits.
func (ft *fnTrack) run(memInsns *int) []Access {
	g := ft.g
	nb := len(g.Blocks)
	if nb == 0 {
		return nil
	}
	// The blocks' successors by index and instruction ranges, found
	// once: the rounds below would search for them at every visit.
	g.ArcsInto(&ft.arcs)
	succs, preds := ft.arcs.Succs, ft.arcs.Preds
	rng := grow(ft.rng, nb)
	ft.rng = rng
	ft.blockOf = grow(ft.blockOf, len(ft.insns))
	for i := range ft.blockOf {
		ft.blockOf[i] = -1
	}
	for i := range g.Blocks {
		rng[i][0], rng[i][1] = ft.insnIndex(g.Blocks[i].Start), ft.insnIndex(g.Blocks[i].End)
		for k := rng[i][0]; k < rng[i][1]; k++ {
			ft.blockOf[k] = int32(i)
		}
	}
	// Reverse post-order from the entry, then the blocks no known arc
	// reaches (after indirect jumps) in address order.
	rb := &ft.runBufs
	order := rb.order[:0]
	seen := grow(rb.seen, nb)
	defer func() { rb.order, rb.seen = order, seen }()
	if e, ok := g.Block(g.Entry); ok {
		post := rb.post[:0]
		defer func() { rb.post = post }()
		var dfs func(int)
		dfs = func(b int) {
			seen[b] = true
			for _, j := range succs[b] {
				if !seen[j] {
					dfs(j)
				}
			}
			post = append(post, b)
		}
		dfs(e)
		for i := len(post) - 1; i >= 0; i-- {
			order = append(order, post[i])
		}
	}
	for i := 0; i < nb; i++ {
		if !seen[i] && !g.Blocks[i].Padding {
			order = append(order, i)
		}
	}
	entry, _ := g.Block(g.Entry)
	outs := grow(rb.outs, nb)
	pats := grow(rb.pats, nb)
	skips := grow(rb.skips, nb)
	rb.outs, rb.pats, rb.skips = outs, pats, skips
	bitpat.FindBlocks(ft.insns, ft.access, rng, ft.blockOf, preds, order, pats, skips)
	// uses[p] counts the blocks still to read outs[p] in a one-pass
	// run; at 0 its state is free for another block (recycle).
	var uses []int
	free := ft.free // states of the worker's earlier functions, reused
	defer func() {
		for _, o := range outs {
			if o != nil {
				free = append(free, o)
			}
		}
		ft.free = free
	}()
	newState := func() *state {
		if n := len(free); n > 0 {
			s := free[n-1]
			free = free[:n-1]
			return s
		}
		return &state{}
	}
	in := func(b int) *state {
		var s *state
		if b == entry && g.Blocks[b].Start == g.Entry {
			// Entered from a call as well: only the stack pointer is known.
			s = newState()
			s.regs = [16]val{}
			s.slots = s.slots[:0]
			s.regs[rsp] = val{kind: vStack}
		}
		for _, p := range preds[b] {
			if outs[p] == nil {
				continue // not computed yet: optimistic, refined next round
			}
			switch {
			case s == nil:
				s = newState()
				s.copyFrom(outs[p])
			case !(b == entry && g.Blocks[b].Start == g.Entry):
				s.merge(outs[p], ft)
			}
		}
		if uses != nil {
			for _, p := range preds[b] {
				if uses[p]--; uses[p] == 0 && outs[p] != nil {
					free = append(free, outs[p])
					outs[p] = nil
				}
			}
		}
		if s == nil {
			s = newState()
			s.regs = [16]val{}
			s.slots = s.slots[:0]
		}
		return s
	}
	// In reverse post-order a block comes after all its predecessors
	// unless an arc goes back (a loop) or it was reached by none: when
	// none does, one pass sees every block's final state and emits.
	pos := grow(rb.pos, nb)
	rb.pos = pos
	for i := range pos {
		pos[i] = -1
	}
	for k, b := range order {
		pos[b] = k
	}
	oneway := true
	for _, b := range order {
		for _, p := range preds[b] {
			if pos[p] < 0 || pos[p] >= pos[b] {
				oneway = false
			}
		}
	}
	// The accesses grow at the end of the worker's arena, each
	// function's left there, not copied out of a buffer (49 MB more to
	// collect for the built kernel); a short tail is left behind.
	if cap(ft.accs) < 1024 {
		ft.accs = make([]Access, 0, 16384)
	}
	accs := ft.accs
	done := func() []Access {
		if !slices.IsSortedFunc(accs, byPC) {
			slices.SortStableFunc(accs, byPC)
		}
		ft.accs = accs[len(accs):]
		if len(accs) == 0 {
			return nil
		}
		return accs[:len(accs):len(accs)]
	}
	// emitting runs block b from its state in and emits its accesses.
	emitting := func(b int) *state {
		s := in(b)
		lo, hi := rng[b][0], rng[b][1]
		for i := lo; i < hi; i++ {
			ft.step(s, i, hi, pats[b], skips[b], func(r *memResult) {
				*memInsns++
				ft.emit(&accs, i, r)
			})
		}
		return s
	}
	if oneway {
		uses = grow(rb.uses, nb)
		rb.uses = uses
		for _, b := range order {
			for _, p := range preds[b] {
				uses[p]++
			}
		}
		for _, b := range order {
			outs[b] = emitting(b)
		}
		return done()
	}
	// A block none of whose predecessors' states changed since it ran
	// would give the same state again: only the others run (the rounds
	// are those of running every block, to the same states).
	dirty := grow(rb.dirty, nb)
	rb.dirty = dirty
	for i := range dirty {
		dirty[i] = true
	}
	converged := false
	for round := 0; round < 6 && !converged; round++ {
		converged = true
		for _, b := range order {
			if !dirty[b] {
				continue
			}
			dirty[b] = false
			s := in(b)
			lo, hi := rng[b][0], rng[b][1]
			for i := lo; i < hi; i++ {
				ft.step(s, i, hi, pats[b], skips[b], nil)
			}
			if outs[b] == nil || !outs[b].equal(s, ft) {
				if outs[b] != nil {
					free = append(free, outs[b])
				}
				outs[b] = s
				converged = false
				for _, j := range succs[b] {
					dirty[j] = true
				}
			} else {
				free = append(free, s)
			}
		}
	}
	if converged {
		// Each block last ran from the state an emitting pass would
		// give it (no predecessor changed since), and look keeps the
		// last result at each instruction: emitted from there, in
		// address order (each instruction's accesses together, as
		// done's stable sort by address leaves them).
		for b := range g.Blocks {
			if pos[b] < 0 {
				continue
			}
			for i := rng[b][0]; i < rng[b][1]; i++ {
				if k := ft.memAt[i]; k >= 0 {
					*memInsns++
					ft.emit(&accs, i, &ft.looked[k].r)
				}
			}
		}
		return done()
	}
	for _, b := range order {
		free = append(free, emitting(b))
	}
	return done()
}

// emit adds the accesses of instruction i.
func (ft *fnTrack) emit(accs *[]Access, i int, r *memResult) {
	chains := ft.chainSets[r.chains]
	if len(chains) == 0 {
		return
	}
	in := &ft.insns[i]
	calls := ft.callsAt(i)
	for _, c := range chains {
		// Each level's container is its outer member, at the sum of the
		// outer levels' offsets; past an array the element is unknown.
		off, known := int64(0), true
		for d, h := range c {
			*accs = append(*accs, Access{PC: in.PC, Func: ft.f.Name, Struct: h.Container.Name, Member: h.Member.Name,
				Union: h.Container.Kind == members.Union, Bitfield: h.Member.BitSize > 0, BitOffset: h.BitOff, BitSize: h.BitSize,
				BitTest: r.test && (h.Member.BitSize > 0 || (len(chains) > 1 && d == len(c)-1)),
				Kind:    r.acc.Kind, Depth: d, Reg: r.obj.reg, Base: r.obj.base, Why: ft.w.whys[r.obj.why], Calls: calls,
				ContainerOff: off, ContainerKnown: known})
			off += h.BitOff / 8
			if mt := ft.w.ts.Get(h.Member.Type); mt == nil || mt.Kind == members.Array {
				known = false
			}
		}
	}
}

// callsAt returns the call sites of the inlined copies holding
// instruction i, innermost first.
func (ft *fnTrack) callsAt(i int) []CallSite {
	if !ft.sitesBuilt {
		ft.buildSites()
	}
	f := ft.sitesAt[i]
	ks := ft.sitePool[f[0] : f[0]+f[1]]
	if len(ks) == 0 {
		return nil
	}
	// The instructions of one inlined copy, one after the other, share
	// their call sites (no one changes an access's Calls).
	if ft.lastCalls != nil && slices.Equal(ks, ft.lastSites) {
		return ft.lastCalls
	}
	// Sorted by a copy of ks: a less function over out's positions
	// would read ks at positions out has already moved away from.
	byDepth := slices.Clone(ks)
	slices.SortStableFunc(byDepth, func(a, b int32) int {
		return cmp.Compare(ft.f.Inlines[b].Depth, ft.f.Inlines[a].Depth)
	})
	out := make([]CallSite, 0, len(ks))
	for _, k := range byDepth {
		s := &ft.f.Inlines[k]
		out = append(out, CallSite{Func: s.Name, File: s.CallFile, Line: s.CallLine})
	}
	ft.lastSites, ft.lastCalls = append(ft.lastSites[:0], ks...), out
	return out
}

// buildSites lists, for each instruction, the inlined copies holding
// it (indexes into f.inlines, in their order).
func (ft *fnTrack) buildSites() {
	ft.sitesBuilt = true
	n := len(ft.insns)
	ft.sitesAt = grow(ft.sitesAt, n)
	ft.siteCounts = grow(ft.siteCounts, n)
	total := 0
	each := func(fn func(k, i int)) {
		for k := range ft.f.Inlines {
			s := &ft.f.Inlines[k]
			for ri, r := range s.Ranges {
				dup := false
				for _, q := range s.Ranges[:ri] {
					dup = dup || (q[0] <= r[0] && r[1] <= q[1])
				}
				if dup {
					continue
				}
				for i := ft.insnIndex(r[0]); i < n && ft.insns[i].PC < r[1]; i++ {
					fn(k, i)
				}
			}
		}
	}
	each(func(k, i int) { ft.siteCounts[i]++; total++ })
	ft.sitePool = grow(ft.sitePool, total)
	at := int32(0)
	for i, c := range ft.siteCounts {
		ft.sitesAt[i] = [2]int32{at, 0}
		at += c
	}
	each(func(k, i int) {
		if f := &ft.sitesAt[i]; f[1] == 0 || ft.sitePool[f[0]+f[1]-1] != int32(k) {
			ft.sitePool[f[0]+f[1]] = int32(k)
			f[1]++
		}
	})
}

// step applies DWARF's facts at instruction i, looks at its memory
// operand (calling emit, if not nil, with what it touches) and applies
// the instruction to s.
func (ft *fnTrack) step(s *state, i, end int, pats map[int]members.Bits, skip map[int]bool, emit func(*memResult)) {
	ft.apply(s, i)
	in := &ft.insns[i]
	r, hasMem := ft.look(s, i, end, pats, skip)
	if hasMem && emit != nil {
		emit(r)
	}
	ft.transfer(s, in, r, hasMem)
}

// transfer applies instruction in to s.
func (ft *fnTrack) transfer(s *state, in *x86code.Insn, r *memResult, hasMem bool) {
	inst := &in.Inst
	dst, dstIsReg := inst.Args[0].(x86asm.Reg)
	di, full, dok := 0, false, false
	if dstIsReg {
		di, full, dok = regs.Index(dst)
	}
	set := func(v val) {
		if dok {
			if !full {
				v = val{}
			}
			s.regs[di] = v
		}
	}
	srcReg := func() (val, bool) {
		if rr, ok := inst.Args[1].(x86asm.Reg); ok {
			if ri, f, ok := regs.Index(rr); ok && f {
				return s.regs[ri], true
			}
		}
		return val{}, false
	}
	// A store to a stack slot.
	if hasMem && r.obj.stack && (r.acc.Kind == x86code.Store || r.acc.Kind == x86code.RMW) {
		var v val
		if inst.Op == x86asm.MOV {
			v, _ = srcReg()
		}
		s.setSlot(r.obj.slot, int64(max(r.acc.Bytes, 1)), v)
	}
	switch inst.Op {
	case x86asm.MOV:
		switch a := inst.Args[1].(type) {
		case x86asm.Reg:
			v, _ := srcReg()
			set(v)
		case x86asm.Mem:
			set(r.loaded)
		case x86asm.Imm:
			set(val{kind: vConst, k: int64(a)})
		}
	case x86asm.LEA:
		m := inst.Args[1].(x86asm.Mem)
		switch {
		case m.Segment != 0:
			set(val{})
		case m.Base == x86asm.RIP && m.Index == 0:
			set(ft.addrVal(in.End()+uint64(m.Disp), false))
		case m.Base == 0 && m.Index == 0:
			set(ft.addrVal(uint64(m.Disp), false))
		case m.Index != 0:
			set(val{})
		default:
			bi, _, _ := regs.Index(m.Base)
			v := s.regs[bi]
			switch v.kind {
			case vPtr, vStack:
				v.k += m.Disp
				set(v)
			case vConst:
				set(ft.addrVal(uint64(v.k+m.Disp), v.percpu))
			default:
				set(val{})
			}
		}
	case x86asm.ADD, x86asm.SUB:
		v := s.regs[di]
		if !dok || !full {
			set(val{})
			break
		}
		sign := int64(1)
		if inst.Op == x86asm.SUB {
			sign = -1
		}
		switch a := inst.Args[1].(type) {
		case x86asm.Imm:
			switch v.kind {
			case vPtr, vStack, vConst:
				v.k += sign * int64(a)
				if v.kind == vConst && v.percpu {
					v = ft.addrVal(uint64(v.k), true)
				}
				set(v)
			case vPercpuOff:
				if sign > 0 {
					set(ft.addrVal(uint64(a), true))
				} else {
					set(val{})
				}
			default:
				set(val{})
			}
		default:
			// Adding a per-CPU offset to a per-CPU address (per_cpu_ptr,
			// this_cpu_ptr) keeps what it points to.
			var o val
			if hasMem {
				o = r.loaded
			} else {
				o, _ = srcReg()
			}
			switch {
			case sign > 0 && o.kind == vPercpuOff && (v.kind == vPtr || v.kind == vConst):
				if v.kind == vConst {
					v = ft.addrVal(uint64(v.k), true)
				}
				set(v)
			case sign > 0 && v.kind == vPercpuOff && o.kind == vConst:
				set(ft.addrVal(uint64(o.k), true))
			default:
				set(val{})
			}
		}
	case x86asm.PUSH:
		sp := s.regs[rsp]
		if sp.kind == vStack {
			sp.k -= 8
			var v val
			if rr, ok := inst.Args[0].(x86asm.Reg); ok {
				if ri, f, ok := regs.Index(rr); ok && f {
					v = s.regs[ri]
				}
			}
			s.setSlot(sp.k, 8, v)
			s.regs[rsp] = sp
		}
	case x86asm.POP:
		sp := s.regs[rsp]
		var v val
		if sp.kind == vStack {
			v, _ = s.slot(sp.k)
			sp.k += 8
		}
		set(v)
		if !(dok && di == rsp) {
			s.regs[rsp] = sp
		}
	case x86asm.CALL:
		for _, c := range regs.CallerSaved {
			s.regs[c] = val{}
		}
		if rel, ok := inst.Args[0].(x86asm.Rel); ok {
			target := uint64(int64(in.End()) + int64(rel))
			if p := ft.w.retPointee(target); p != nil {
				s.regs[0] = val{kind: vPtr, t: p.ID(), why: whyRet}
			}
		}
	case x86asm.XCHG:
		if a, ok := inst.Args[1].(x86asm.Reg); ok && dok && full {
			if ai, f, ok := regs.Index(a); ok && f {
				s.regs[di], s.regs[ai] = s.regs[ai], s.regs[di]
				break
			}
		}
		set(val{})
		if a, ok := inst.Args[1].(x86asm.Reg); ok {
			if ai, _, ok := regs.Index(a); ok {
				s.regs[ai] = val{}
			}
		}
	case x86asm.IMUL, x86asm.MUL, x86asm.DIV, x86asm.IDIV:
		if inst.Op != x86asm.IMUL || inst.Args[1] == nil {
			s.regs[0], s.regs[2] = val{}, val{}
		}
		set(val{})
	default:
		if !regs.KnownOp(inst.Op) {
			// Anything else may write any register but the stack pointer.
			sp := s.regs[rsp]
			s.regs = [16]val{}
			s.regs[rsp] = sp
			return
		}
		if !regs.ReadsOnly(inst.Op) {
			set(val{})
		}
	}
}

// addrVal is the value of address a: a pointer into the global (or
// per-CPU variable) there, else the constant.
func (ft *fnTrack) addrVal(a uint64, percpu bool) val {
	if g, off, ok := ft.w.g.find(a, percpu); ok {
		if t := ft.w.ts.Get(g.Type); t != nil && (t.Kind == members.Struct || t.Kind == members.Union || t.Kind == members.Array) {
			why := "global "
			if percpu {
				why = "per-CPU "
			}
			return val{kind: vPtr, t: t.ID(), k: off, why: ft.w.why(why, g.Name, "")}
		}
	}
	return val{kind: vConst, k: int64(a), percpu: percpu}
}
