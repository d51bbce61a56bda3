package score

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"golang.org/x/arch/x86/x86asm"

	"github.com/klasy/klasy/accessinfer"
	"github.com/klasy/klasy/debugklasy"
	"github.com/klasy/klasy/dwarfmap"
	"github.com/klasy/klasy/dwarfmap/elfimage"
	"github.com/klasy/klasy/x86code"
)

// Score is inference measured against the plugin for one struct (or,
// with Struct "", all of them).
//
// The plugin records source-level accesses (file:line, struct.member,
// mode); inference gives instructions. An instruction is attributed to
// the lines of the line-table rows of its basic block (dwarfmap's
// blocks: calls do not end one) and to the call lines of the inlined
// copies holding it: a compiler schedules freely within a block, merges
// neighbouring lines' stores (skbuff.c:1189-1191) and leaves an inline
// helper's loads under the caller's line. A plugin record and an
// inferred access agree when they name the same struct and member, one
// of the instruction's lines is the record's line (or its statement's
// line), and the instruction's use fits the mode: a load for a read, a
// store or read-modify-write for a write, any of the three for a
// read-write, a lea for an address taken, and also any use for an
// address taken (the address reaches a helper inlined at that line,
// refcount_set(&skb->users, 1) stores in atomic_set's code). An outer
// level of a nested access (perf_event.hw of event->hw.config) also
// agrees when a deeper level at the same instruction agrees and the
// plugin records the address of the outer member in the same
// out-of-line function: the source computed the address on another
// line (hwc = &event->hw; ... hwc->config) and the compiler folded it
// into this instruction's displacement, so the instruction does touch
// the member there. An access based on a variable DWARF names at the
// instruction also agrees when the plugin records the same member
// through the same variable, in a mode the use fits, in the same
// out-of-line function: the compiler moved the instruction to another
// line (hoisting, common subexpressions, scheduling across blocks), as
// the strict figure, which does not count these, shows; so does one
// through a global the plugin records by that global, one whose record
// is at a line without code (its instructions went to the lines
// around it) in the function the plugin names, and one through a
// variable of the caller where the plugin records the member through
// the parameter of a helper inlined into the same function
// (file_inode(f)'s f->f_inode: the parameter's copy has no location of
// its own there). A record at the line of the row just before the
// instruction's block, or of the row starting the code after it, in
// the same function, agrees too (scheduled across the block's edge), and
// so does a record through the parameter of a helper that the source
// calls at one of the instruction's own rows or call sites and that is
// inlined elsewhere in the image (DWARF lost this copy with its rows:
// hstate_file(f)'s file_inode(f)). A
// load of a bitfield fits a write of it (the storage unit is read to
// merge the new bits in). A test of a bitfield against a constant, or
// of adjacent members whose compares GCC merged into one, which the
// plugin cannot record (GCC folds them into a BIT_FIELD_REF),
// is confirmed by the source instead when the source text names the
// member (->m or .m, or a macro the headers define as a path ending in
// it: sk->sk_reuseport) at one of the instruction's own rows or call
// sites (SourceConfirmed).
//
//   - precision: the share of inferred accesses (instruction, member)
//     that agree with some plugin record;
//   - recall: the share of the plugin's records that have an instruction
//     in the image which agrees with some inferred access. A record
//     "has an instruction" when its line has code in the image and one
//     instruction in the blocks of that code has a memory operand that
//     fits the mode and whose displacement falls on the member (less the
//     container_of offset), as the weaver's exact tier asks, or, for a
//     global or static base, an operand without a base register; other
//     records (the compiler kept the value in a register, folded the
//     member into another offset, or removed the code) are left out.
type Score struct {
	Struct              string
	Inferred, Confirmed int
	Records, Reachable  int
	Found               int
	Precision, Recall   float64
	StrictConfirmed     int // confirmed by the instruction's own rows and call sites only
	StrictPrecision     float64
	// BitTests are the unconfirmed accesses that test a bitfield's bits
	// against a constant (Access.BitTest), which the plugin cannot
	// record; PrecisionOther is the precision of the other accesses.
	BitTests       int
	PrecisionOther float64
	// SourceConfirmed are the bitfield tests the plugin cannot record
	// whose member the source names (->m or .m) at one of the
	// instruction's own rows or call sites (Compare's src): counted as
	// confirmed in Precision, apart in Confirmed.
	SourceConfirmed int
	// ByHelper of the Confirmed are so only through a helper the source
	// calls at the instruction, inlined elsewhere, whose copy here DWARF
	// lost (comparer.helperConfirmed), or that a record at the
	// instruction's lines names in its base (comparer.baseConfirmed).
	ByHelper int
	// ByISRA of the Confirmed are so only as loads IPA-SRA moved from
	// a clone into its caller (comparer.israConfirmed).
	ByISRA               int
	UnconfirmedExamples  []string
	MissedRecordExamples []string
}

type recKey struct {
	file   uint32
	line   int
	st, mb string
}

// fits says whether an instruction's use of memory confirms a plugin
// record of mode m: as the weaver's exact tier asks (Mode.Fits), and any
// use for an address taken (the address reaches a helper inlined there).
func fits(m debugklasy.Mode, k x86code.MemKind) bool {
	return m == debugklasy.Addr || m.Fits(k)
}

// comparer caches what attributing instructions to lines needs.
type comparer struct {
	b      *dwarfmap.Batch
	blocks map[uint64][2]uint64 // pc -> its block
	lines  map[uint64][][2]int  // block start -> (file, line) of its rows
	insns  map[uint64][]x86code.Insn
	recs   map[recKey][]debugklasy.Mode
	addrIn map[hostKey]bool // the plugin takes the member's address in the function
	src    *sourceLines
	varIn  map[hostVarKey]uint8 // modes (1<<Mode) of the member through the variable in the function
	// helperIn: modes (1<<Mode) of the member through a parameter of
	// the function named (v), wherever its code went.
	helperIn map[hostVarKey]uint8
	inl      map[string]bool // inlined, by function name
	img      *elfimage.Image
	clones   map[uint64]bool // entry -> an IPA-SRA clone (israConfirmed)
	// baseCalls: the functions the base expressions of the plugin's
	// records at a line call ("file_inode(file)"), by (file, line).
	baseCalls map[[2]int][]string
	ool       map[string]bool // has an out-of-line body, by function name
}

type hostKey struct {
	entry  uint64
	st, mb string
}

type hostVarKey struct {
	hostKey
	v string
}

// movedConfirmed says whether a, based on a variable DWARF names at the
// instruction (a pointer, or a struct in the frame), is an access the plugin records of the same member
// through the same variable, in a mode it fits, in the same out-of-line
// function but at another line than the instruction's: the compiler
// hoisted, sank or merged the load or store (common subexpressions,
// skb_shinfo(skb)'s skb->head reused, a load scheduled into another
// line's block).
func (c *comparer) movedConfirmed(a *accessinfer.Access) bool {
	var v string
	ok := false
	for _, p := range []string{"var ", "stack var ", "global "} {
		if v, ok = strings.CutPrefix(a.Why, p); ok {
			break
		}
	}
	if !ok {
		return false
	}
	fi, ok := c.b.FuncAt(a.PC)
	if !ok {
		return false
	}
	modes := c.varIn[hostVarKey{hostKey{fi.Entry, a.Struct, a.Member}, v}]
	// An inlined helper's access through its parameter (file_inode(f)'s
	// f->f_inode): where the copy of the parameter has no location of
	// its own, DWARF names the caller's variable at the instruction.
	modes |= c.varIn[hostVarKey{hostKey{fi.Entry, a.Struct, a.Member}, ""}]
	// Records at lines without code, by the function the plugin names:
	// the out-of-line one or an inlined copy holding the instruction.
	modes |= c.varIn[hostVarKey{hostKey{0, a.Struct, a.Member}, a.Func + " " + v}]
	for _, cs := range a.Calls {
		modes |= c.varIn[hostVarKey{hostKey{0, a.Struct, a.Member}, cs.Func + " " + v}]
	}
	for m := debugklasy.Read; m <= debugklasy.Addr; m++ {
		if modes&(1<<m) != 0 && c.fits(a, m) {
			return true
		}
	}
	return false
}

// fits is fits for an inferred access: also a load of a bitfield for a
// write of it (the compiler reads the storage unit to merge the new
// bits into it).
func (c *comparer) fits(a *accessinfer.Access, m debugklasy.Mode) bool {
	return fits(m, a.Kind) || (a.Bitfield && a.Kind == x86code.Load && m == debugklasy.Write)
}

// outerConfirmed says whether a, an outer level of a nested access
// that no record at its lines confirms, is one whose address the
// source computed on another line (hwc = &event->hw; hwc->config): a
// deeper level at the same instruction is confirmed and the plugin
// records the address of a's member in the same function.
func (c *comparer) outerConfirmed(a *accessinfer.Access, innerOK bool) bool {
	if !innerOK {
		return false
	}
	fi, ok := c.b.FuncAt(a.PC)
	return ok && c.addrIn[hostKey{fi.Entry, a.Struct, a.Member}]
}

// neighbourConfirmed says whether a record at the line of the row in
// force just before a's block, or of the row that starts the code just
// after it, in the same out-of-line function, agrees with a: the
// compiler scheduled the instruction across the block's edge (an
// inlined helper's load placed before its inline range begins,
// kauditd_retry_skb's nlmsg_hdr(skb)->... at audit.c:637).
func (c *comparer) neighbourConfirmed(a *accessinfer.Access) bool {
	bl, ok := c.block(a.PC)
	if !ok {
		return false
	}
	fi, ok := c.b.FuncAt(a.PC)
	if !ok {
		return false
	}
	var rows []dwarfmap.Row
	if bl[0] > fi.Entry {
		rows = append(rows, c.b.CodeRows(bl[0]-1, bl[0])...)
	}
	if next := c.b.CodeRows(bl[1], bl[1]+1); len(next) > 0 {
		if f2, ok := c.b.FuncAt(bl[1]); ok && f2.Entry == fi.Entry {
			rows = append(rows, next[0])
		}
	}
	for _, r := range rows {
		k := recKey{r.File, int(r.Line), a.Struct, a.Member}
		for _, m := range c.recs[k] {
			if c.fits(a, m) {
				return true
			}
		}
	}
	return false
}

func (c *comparer) block(pc uint64) ([2]uint64, bool) {
	if bl, ok := c.blocks[pc]; ok {
		return bl, bl[1] > bl[0]
	}
	var bl [2]uint64
	if code, err := c.b.Code(pc); err == nil {
		bl[0], bl[1] = code.Block(pc)
	}
	c.blocks[pc] = bl
	return bl, bl[1] > bl[0]
}

func (c *comparer) blockLines(bl [2]uint64) [][2]int {
	if ls, ok := c.lines[bl[0]]; ok {
		return ls
	}
	var ls [][2]int
	for _, r := range c.b.CodeRows(bl[0], bl[1]) {
		ls = append(ls, [2]int{int(r.File), int(r.Line)})
	}
	c.lines[bl[0]] = ls
	return ls
}

// linesOf attributes an access's instruction: all its block's lines, or
// (strict) the rows in force at it and its call sites.
func (c *comparer) linesOf(a *accessinfer.Access, strict bool) [][2]int {
	var out [][2]int
	if strict {
		for _, r := range c.b.CodeRows(a.PC, a.PC+1) {
			out = append(out, [2]int{int(r.File), int(r.Line)})
		}
	} else if bl, ok := c.block(a.PC); ok {
		out = append(out, c.blockLines(bl)...)
	}
	for _, cs := range a.Calls {
		for _, id := range c.b.Files(cs.File) {
			out = append(out, [2]int{int(id), cs.Line})
		}
	}
	return out
}

// newComparer indexes the plugin's records of t by line.
func newComparer(b *dwarfmap.Batch, t *debugklasy.Table) *comparer {
	c := &comparer{b: b, blocks: map[uint64][2]uint64{}, lines: map[uint64][][2]int{}, insns: map[uint64][]x86code.Insn{}}
	c.recs = map[recKey][]debugklasy.Mode{}
	c.addrIn = map[hostKey]bool{}
	c.varIn = map[hostVarKey]uint8{}
	c.helperIn, c.inl = map[hostVarKey]uint8{}, map[string]bool{}
	c.img, c.clones = b.Index().Image(), map[uint64]bool{}
	c.baseCalls, c.ool = map[[2]int][]string{}, map[string]bool{}
	for i := range t.Accesses {
		r := &t.Accesses[i]
		if r.Base.Kind == debugklasy.Param {
			c.helperIn[hostVarKey{hostKey{0, r.Struct, r.Member}, r.Function.Name}] |= 1 << r.Mode
		}
		byVar := r.Base.Var != "" && r.Base.Kind <= debugklasy.Global
		if r.Mode == debugklasy.Addr || byVar {
			rows := b.LineRows(r.File, r.Line)
			if len(rows) == 0 && byVar {
				// The line has no code: the compiler gave its
				// instructions to the lines around it, in the function
				// the plugin names.
				k := hostVarKey{hostKey{0, r.Struct, r.Member}, r.Function.Name + " " + r.Base.Var}
				c.varIn[k] |= 1 << r.Mode
			}
			for _, row := range rows {
				if fi, ok := b.FuncAt(row.Addr); ok {
					if r.Mode == debugklasy.Addr {
						c.addrIn[hostKey{fi.Entry, r.Struct, r.Member}] = true
					}
					if byVar {
						k := hostVarKey{hostKey{fi.Entry, r.Struct, r.Member}, r.Base.Var}
						c.varIn[k] |= 1 << r.Mode
					}
					if r.Base.Kind == debugklasy.Param && r.Function.Name != fi.Name {
						k := hostVarKey{hostKey{fi.Entry, r.Struct, r.Member}, ""}
						c.varIn[k] |= 1 << r.Mode
					}
				}
			}
		}
		calls := calledNames([]byte(r.Base.Expr))
		for _, id := range b.Files(r.File) {
			for _, l := range []int{r.Line, r.StmtLine} {
				if l != 0 {
					k := recKey{id, l, r.Struct, r.Member}
					c.recs[k] = append(c.recs[k], r.Mode)
					if len(calls) > 0 {
						lk := [2]int{int(id), l}
						c.baseCalls[lk] = append(c.baseCalls[lk], calls...)
					}
				}
			}
		}
	}
	return c
}

// confirmed says whether some plugin record agrees with a (see Score),
// and whether one does by the instruction's own rows and call sites.
func (c *comparer) confirmed(a *accessinfer.Access) (ok, strictOK bool) {
	for _, strict := range []bool{false, true} {
		for _, l := range c.linesOf(a, strict) {
			k := recKey{uint32(l[0]), l[1], a.Struct, a.Member}
			for _, m := range c.recs[k] {
				if c.fits(a, m) {
					if strict {
						strictOK = true
					} else {
						ok = true
					}
				}
			}
		}
	}
	return ok, strictOK
}

// confirmAll says which of accs (by PC, as Result has them) the
// plugin confirms, by all the rules of Score and by the strict ones,
// and which only by helperConfirmed (Score.ByHelper) or israConfirmed
// (Score.ByISRA).
func (c *comparer) confirmAll(accs []accessinfer.Access) (ok, strict []bool, byHelper []uint8) {
	ok, strict = make([]bool, len(accs)), make([]bool, len(accs))
	byHelper = make([]uint8, len(accs))
	for i := range accs {
		ok[i], strict[i] = c.confirmed(&accs[i])
	}
	out, outStrict := append([]bool(nil), ok...), append([]bool(nil), strict...)
	for i := range accs {
		a := &accs[i]
		if ok[i] {
			continue
		}
		innerOK, innerStrict := false, false
		for j := i - 1; j >= 0 && accs[j].PC == a.PC; j-- {
			if accs[j].Depth > a.Depth {
				innerOK, innerStrict = innerOK || ok[j], innerStrict || strict[j]
			}
		}
		for j := i + 1; j < len(accs) && accs[j].PC == a.PC; j++ {
			if accs[j].Depth > a.Depth {
				innerOK, innerStrict = innerOK || ok[j], innerStrict || strict[j]
			}
		}
		out[i] = c.outerConfirmed(a, innerOK) || c.movedConfirmed(a) || c.neighbourConfirmed(a)
		if !out[i] && (c.helperConfirmed(a) || c.baseConfirmed(a)) {
			out[i] = true
			byHelper[i] = byHelperRule
		} else if !out[i] && c.israConfirmed(a) {
			out[i] = true
			byHelper[i] = byISRA
		}
		outStrict[i] = strict[i] || c.outerConfirmed(a, innerStrict)
	}
	return out, outStrict, byHelper
}

// Compare measures res against the plugin's table t of the same image,
// per struct in structs and in total (the last Score). srcDir is the
// source tree the image was built from ("": none), read for the
// bitfield tests (Score.SourceConfirmed).
func Compare(b *dwarfmap.Batch, res *accessinfer.Result, t *debugklasy.Table, structs []string, srcDir string) []Score {
	c := newComparer(b, t)
	c.src = &sourceLines{dir: srcDir, files: map[string][][]byte{}}
	idx := map[string]int{}
	scores := make([]Score, len(structs)+1)
	for i, s := range structs {
		idx[s] = i
		scores[i].Struct = s
	}
	total := &scores[len(structs)]
	add := func(st string, f func(s *Score)) {
		if i, ok := idx[st]; ok {
			f(&scores[i])
		}
		f(total)
	}
	// Precision, and the inferred accesses by line for recall.
	found := map[recKey]uint8{} // kinds (1<<MemKind)
	okAll, strictAll, byHelper := c.confirmAll(res.Accesses)
	for i := range res.Accesses {
		a := &res.Accesses[i]
		for _, l := range c.linesOf(a, false) {
			found[recKey{uint32(l[0]), l[1], a.Struct, a.Member}] |= 1 << a.Kind
		}
		ok, strictOK := okAll[i], strictAll[i]
		bySrc := !ok && c.sourceConfirmed(a)
		add(a.Struct, func(s *Score) {
			s.Inferred++
			if !ok && a.BitTest {
				s.BitTests++
			}
			if ok {
				s.Confirmed++
				switch byHelper[i] {
				case byHelperRule:
					s.ByHelper++
				case byISRA:
					s.ByISRA++
				}
			} else if bySrc {
				s.SourceConfirmed++
			} else if len(s.UnconfirmedExamples) < 40 {
				s.UnconfirmedExamples = append(s.UnconfirmedExamples, fmt.Sprintf("%s %s.%s %s (%s) in %s", fmtPC(a.PC), a.Struct, a.Member, a.Kind, a.Why, a.Func))
			}
			if strictOK {
				s.StrictConfirmed++
			}
		})
	}
	// Recall.
	for i := range t.Accesses {
		r := &t.Accesses[i]
		add(r.Struct, func(s *Score) { s.Records++ })
		if r.NoOffset {
			continue
		}
		if !c.reachable(r) {
			continue
		}
		hit := false
		for _, id := range b.Files(r.File) {
			for _, l := range []int{r.Line, r.StmtLine} {
				if l == 0 {
					continue
				}
				kinds := found[recKey{id, l, r.Struct, r.Member}]
				for k := x86code.Load; k <= x86code.Addr; k++ {
					if kinds&(1<<k) != 0 && fits(r.Mode, k) {
						hit = true
					}
				}
			}
		}
		add(r.Struct, func(s *Score) {
			s.Reachable++
			if hit {
				s.Found++
			} else if len(s.MissedRecordExamples) < 40 {
				s.MissedRecordExamples = append(s.MissedRecordExamples, fmt.Sprintf("%s:%d %s.%s %s base %s %q", r.File, r.Line, r.StructName(), r.Member, r.Mode, r.Base.Kind, r.Base.Expr))
			}
		})
	}
	for i := range scores {
		s := &scores[i]
		if s.Inferred > 0 {
			s.Precision = float64(s.Confirmed+s.SourceConfirmed) / float64(s.Inferred)
			s.StrictPrecision = float64(s.StrictConfirmed) / float64(s.Inferred)
		}
		if s.Inferred > s.BitTests {
			s.PrecisionOther = float64(s.Confirmed) / float64(s.Inferred-s.BitTests)
		}
		if s.Reachable > 0 {
			s.Recall = float64(s.Found) / float64(s.Reachable)
		}
	}
	return scores
}

// sourceConfirmed says whether a is a bitfield test the plugin cannot
// record whose member the source names there (Score.SourceConfirmed):
// a test the instructions show (BitTest), or a load of a bitfield,
// whose test against zero GCC may compute as a shift and a mask
// (!!p->ready, unlikely(skb->pfmemalloc): TestBitfieldValueTest). A
// bitfield read as a value the plugin records; it is unconfirmed here
// only when no record of the member is at the load's lines.
func (c *comparer) sourceConfirmed(a *accessinfer.Access) bool {
	return (a.BitTest || (a.Bitfield && a.Kind == x86code.Load)) && c.sourceNames(a)
}

// sourceNames says whether the source names a's member at one of the
// instruction's own rows or the call sites of the inlined copies
// holding it (linesOf, strict).
func (c *comparer) sourceNames(a *accessinfer.Access) bool {
	for _, l := range c.linesOf(a, true) {
		text := c.src.line(c.b.Index().File(uint32(l[0])), l[1])
		if namesMember(text, a.Member) {
			return true
		}
		// A macro standing for the member's path (sk->sk_reuseport).
		for _, m := range c.src.aliases(a.Member) {
			if namesMember(text, m) {
				return true
			}
		}
		// A macro reading its argument's member
		// (skb_vlan_tag_present(skb)).
		if g := c.src.getters(a.Member); len(g) > 0 {
			for _, f := range calledNames(text) {
				if slices.Contains(g, f) {
					return true
				}
			}
		}
	}
	return false
}

// helperConfirmed says whether the source at one of a's own rows or
// call sites calls a function the plugin records accessing a's member
// through its parameter, in a mode a's use fits: a helper inlined
// there (the image holds inlined copies of it) whose copy DWARF lost
// with its rows (hstate_file(f) -> file_inode(f)'s f->f_inode under
// hugetlb.h's line), so the record's line has no code in this function.
func (c *comparer) helperConfirmed(a *accessinfer.Access) bool {
	for _, l := range c.linesOf(a, true) {
		for _, f := range calledNames(c.src.line(c.b.Index().File(uint32(l[0])), l[1])) {
			if !c.inlined(f) {
				continue
			}
			modes := c.helperIn[hostVarKey{hostKey{0, a.Struct, a.Member}, f}]
			for m := debugklasy.Read; m <= debugklasy.Addr; m++ {
				if modes&(1<<m) != 0 && c.fits(a, m) {
					return true
				}
			}
		}
	}
	return false
}

// inlined says whether the image holds an inlined copy of function f.
func (c *comparer) inlined(f string) bool {
	is, ok := c.inl[f]
	if !ok {
		is = slices.ContainsFunc(c.b.Instances(f, ""), func(in dwarfmap.Instance) bool { return in.Inlined })
		c.inl[f] = is
	}
	return is
}

// How confirmAll confirmed an access beyond the line rules.
const (
	byHelperRule = 1 + iota
	byISRA
)

func fmtPC(pc uint64) string { return fmt.Sprintf("%#x", pc) }

// reachable says whether record r has an instruction in the image (see
// Score).
func (c *comparer) reachable(r *debugklasy.Access) bool {
	_, ok := c.reachableAt(r)
	return ok
}

// reachableAt is reachable with the instruction that makes r reachable.
func (c *comparer) reachableAt(r *debugklasy.Access) (uint64, bool) {
	// The member's bytes as the weaver's exact tier matches them; a
	// layout that is not constant has no displacement to match there.
	off, size, ok := r.Span()
	if !ok {
		return 0, false
	}
	k := int64(0)
	if r.Base.ContainerOf {
		k = r.Base.Offset
	}
	global := r.Base.Kind == debugklasy.Global || r.Base.Kind == debugklasy.Static
	for _, row := range c.b.LineRows(r.File, r.Line) {
		bl, ok := c.block(row.Addr)
		if !ok {
			continue
		}
		insns, ok := c.insns[bl[0]]
		if !ok {
			insns = c.b.Insns(bl[0], bl[1])
			c.insns[bl[0]] = insns
		}
		for i := range insns {
			acc, ok := insns[i].Access()
			if !ok || !r.Mode.Fits(acc.Kind) {
				continue
			}
			if acc.Mem.Base == 0 || acc.Mem.Base == x86asm.RIP {
				if global {
					return insns[i].PC, true
				}
				continue
			}
			rel := acc.Mem.Disp - k - off
			n := int64(max(acc.Bytes, 1))
			if rel < size && rel+n > 0 {
				return insns[i].PC, true
			}
		}
	}
	return 0, false
}

// PrintScores writes the table: "strict" is the precision by the
// instruction's own rows and call sites only, "no-bt" the precision
// without the unconfirmed bitfield tests (Score.BitTests), "by-src"
// the bitfield tests confirmed by the source text
// (Score.SourceConfirmed), which "precision" counts as confirmed.
func PrintScores(w io.Writer, scores []Score) {
	fmt.Fprintf(w, "%-12s %9s %9s %7s %9s %8s %8s %9s %9s %9s %8s\n", "struct", "inferred", "confirmed", "by-src", "precision", "strict", "no-bt", "records", "reachable", "found", "recall")
	for _, s := range scores {
		name := s.Struct
		if name == "" {
			name = "total"
		}
		fmt.Fprintf(w, "%-12s %9d %9d %7d %8.2f%% %7.2f%% %7.2f%% %9d %9d %9d %7.2f%%\n", name, s.Inferred, s.Confirmed, s.SourceConfirmed, 100*s.Precision, 100*s.StrictPrecision, 100*s.PrecisionOther, s.Records, s.Reachable, s.Found, 100*s.Recall)
	}
	fmt.Fprintln(w, "by-src: a test of a bitfield's bits against a constant (the load of a bitfield too: GCC may compute !!p->x as a shift and a mask), or of adjacent members' compares GCC merged into one (c->x86 == 6 && c->x86_model == 1), which the plugin cannot record (TestPluginMissesBitfieldTests, TestPluginMissesMergedCompares), whose member the source names (->m or .m, or a macro standing for its path: sk->sk_reuseport) at the instruction's own line rows or inlined call sites: counted as confirmed.")
	if tot := scores[len(scores)-1]; tot.ByHelper > 0 {
		fmt.Fprintf(w, "by-helper: %d of the confirmed only through a helper the source calls at the instruction's rows or call sites, inlined elsewhere in the image, whose copy here DWARF lost with its rows (hstate_file(f)'s file_inode(f)), or that the base of a record at the instruction's block's lines calls (inode.i_mode through \"file_inode(file)\", the load scheduled among the line before's instructions; qdisc_skb_cb(skb) taking &skb->cb), the plugin recording the member through the helper's parameter.\n", tot.ByHelper)
	}
	if tot := scores[len(scores)-1]; tot.ByISRA > 0 {
		fmt.Fprintf(w, "by-isra: %d of the confirmed only as a load passed to an IPA-SRA clone (write_irq_affinity.constprop.0.isra.0 takes file_inode(file), its callers load file->f_inode), the plugin recording the read in the clone's function through its parameter (TestPluginMissesISRA).\n", tot.ByISRA)
	}
}

// sortedStructs is a helper for tests: the structs with the most inferred accesses.
func sortedStructs(res *accessinfer.Result, n int) []string {
	by := map[string]int{}
	for _, a := range res.Accesses {
		by[a.Struct]++
	}
	var out []string
	for s := range by {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return by[out[i]] > by[out[j]] })
	if len(out) > n {
		out = out[:n]
	}
	return out
}
