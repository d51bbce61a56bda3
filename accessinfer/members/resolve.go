package members

import "sort"

// Hop is one named member on the way to the bytes an instruction
// touches, named as the plugin names it: its named container (anonymous
// members collapsed into it) and the member's bits in that container.
type Hop struct {
	Container *Type
	Member    *Member
	BitOff    int64
	BitSize   int64
}

// Chain is the named members from the container the base points to
// down to the innermost one the access touches (s->inner.x: s's
// inner, then inner's x), as the plugin records one access per level.
type Chain []Hop

// Bits restricts an access to some of its bits (the mask an and, or,
// test or bt applies), relative to bit base of the container.
type Bits struct {
	OK   bool
	Base int64 // bit offset of mask bit 0 from the container's start
	Mask uint64
	Test bool // the bits are tested (test, bt), not used as a value
}

func (b Bits) overlaps(lo, hi int64) bool {
	if !b.OK {
		return true
	}
	for i := max(lo, b.Base); i < hi && i < b.Base+64; i++ {
		if b.Mask&(1<<uint(i-b.Base)) != 0 {
			return true
		}
	}
	return false
}

func (b Bits) shift(by int64) Bits {
	b.Base -= by
	return b
}

// Hint is what the instructions around an access say about the value it
// moves, to tell apart the members of a union that share its bytes.
type Hint struct {
	PtrTo Key  // the value is a pointer to this type (zero: unknown)
	IsPtr bool // the value is used as a pointer
	Imm   bool // an immediate is stored: every member in the bytes is written
}

func (h Hint) matches(ts *Types, m *Member) bool {
	t := ts.Get(m.Type)
	if t == nil || t.Kind != Ptr {
		return false
	}
	if h.PtrTo != (Key{}) {
		p := ts.Pointee(t)
		return p != nil && p.Key() == h.PtrTo
	}
	return h.IsPtr
}

func (h Hint) some() bool { return h.PtrTo != (Key{}) || h.IsPtr }

// Use describes one memory access in a container.
type Use struct {
	Off, N  int64 // bytes [off, off+n) of the container
	Bits    Bits
	Hint    Hint
	Addr    bool // lea: the address of the member at off
	Indexed bool // an index register adds an unknown multiple
	Load    bool // a load (not a store, a read-modify-write or a lea)
	// Copy: the instruction moves bytes between memory and memory
	// through a register (a load whose value is only stored, or the
	// store of it), and with the moves beside it in its block through
	// the same base register it copies the bytes [copyLo, copyHi) of
	// the container. An embedded struct all of whose bytes are copied
	// is copied whole (p = file->f_path, uid = cred->uid): the plugin
	// records the member, not the members inside it.
	Copy           bool
	CopyLo, CopyHi int64
	// Init: the same with the stores of immediates beside it too
	// ([initLo, initHi)): all the bytes of the object written so are
	// its initializer or a struct assignment (*insn = BPF_MOV64_IMM(..),
	// *fops = tty_fops), and all read so a struct copy: no member
	// access in the source.
	Init           bool
	InitLo, InitHi int64
	// Consts: the same with stores of immediates alone
	// ([constLo, constHi)): an embedded struct all of whose bytes
	// they write is assigned a constant (x->root = RB_ROOT_CACHED) or
	// its members are, one by one: not decided below it.
	Consts           bool
	ConstLo, ConstHi int64
	// Stores: for a store, the bytes (container offsets) that it and
	// the movs storing to memory through the same base register beside
	// it in its block write. When they cover the whole object and one
	// of them writes parts of two members at once, the compiler built
	// the object's bytes from an initializer or a compound literal
	// (*insn++ = BPF_MOV64_REG(..), *i = (struct iov_iter){..}), not
	// member by member: no member access in the source.
	Stores [][2]int64
	// Declared: the object's type is a variable's as DWARF declares
	// it (not a loaded member's pointee, not a return type), so a
	// struct member at offset 0 is one the source names
	// (sk->__sk_common of sk->sk_state), not a cast pointer's.
	Declared bool
	// WrapOK says whether a whole wrapper of one member (kuid_t,
	// atomic_t, pte_t) is an access of that member here (nil: no).
	WrapOK func(t *Type) bool
	// Assign says whether a store of the whole of a one-member wrapper
	// t is an assignment of a t value here (nil: no): a helper taking
	// one is inlined there (native_set_pte(ptep, pte) does *ptep = pte,
	// a struct assignment the plugin records no member of; atomic_set(v,
	// i) stores v->counter).
	Assign func(t *Type) bool
	// ByVal says whether a helper taking a t by value is inlined here.
	ByVal func(t *Type) bool
	// nested: t is the type of a named member of the object (a level
	// below the outer one).
	nested bool
}

func (a Use) assigns(t *Type) bool { return a.Assign != nil && a.Assign(t) }

// walk finds the chains of named members that an access touches in t,
// a struct or union. outer and outerBit collapse anonymous members into
// the named container around them. nil: not decided (padding, a union
// whose member the instructions do not tell, several members where
// only some may be meant).
func (ts *Types) walk(t *Type, a Use, outer *Type, outerBit int64, depth int) []Chain {
	if t == nil || (t.Kind != Struct && t.Kind != Union) || depth > 8 {
		return nil
	}
	if outer == nil {
		outer, outerBit = t, 0
	}
	var cands []*Member
	ms := ts.mems(t)
	for i := ts.skip(t, ms, a.Off); i < len(ms); i++ {
		m := &ms[i]
		if m.BitSize == 0 && m.off >= a.Off+a.N {
			// Past the access whatever its size (the tests below
			// skip it): its type need not be read for that.
			continue
		}
		if t.Kind == Struct && m.BitSize == 0 && i+1 < len(ms) && ms[i+1].off >= m.off && ms[i+1].off <= a.Off {
			// Before the access: a struct's members do not overlap, so
			// it ends where the next one starts at the latest. Neither
			// is its type read (nor those of the members before a
			// member of sk_buff at 200).
			continue
		}
		lo, hi := ts.span(m)
		if hi <= lo {
			// A zero-size member: a marker (sk_buff's __cloned_offset[0])
			// touches nothing; a flexible array, the last member, runs on.
			if i != len(ms)-1 || m.BitSize != 0 || a.Off < lo {
				continue
			}
			hi = a.Off + a.N
		}
		if hi <= a.Off || lo >= a.Off+a.N {
			continue
		}
		mb, me := m.bitOff, m.bitOff+(hi-lo)*8
		if m.BitSize > 0 {
			me = m.bitOff + m.BitSize
		}
		if !a.Bits.overlaps(mb, me) {
			continue
		}
		cands = append(cands, m)
	}
	if len(cands) == 0 {
		return nil
	}
	if len(cands) == 1 {
		return ts.one(t, cands[0], a, outer, outerBit, depth)
	}
	if t.Kind == Union {
		if m := ts.structGroup(cands); m != nil {
			// struct_group(): an anonymous struct and named copies of
			// it; the source names the members through the anonymous
			// one (skb->protocol), the copies serve whole-group copies.
			return ts.one(t, m, a, outer, outerBit, depth)
		}
		// Members sharing the bytes: the one whose type fits what the
		// instructions do with the value, if exactly one does.
		if !a.Hint.some() {
			return nil
		}
		var pick []Chain
		n := 0
		for _, m := range cands {
			cs := ts.one(t, m, a, outer, outerBit, depth)
			if len(cs) != 1 {
				continue
			}
			last := cs[0][len(cs[0])-1]
			if a.Hint.matches(ts, last.Member) {
				pick, n = cs, n+1
			}
		}
		if n == 1 {
			return pick
		}
		return nil
	}
	// Several members of a struct: all are touched only when a mask
	// picks them out. An immediate stored over several is most often an
	// inlined memset or a struct initializer, which the plugin does not
	// record as member accesses: not decided.
	if !a.Bits.OK {
		return nil
	}
	var out []Chain
	for _, m := range cands {
		lo, hi := ts.span(m)
		if !a.Bits.OK && (lo < a.Off || hi > a.Off+a.N) {
			return nil // partly written: not what a compiler does for member stores
		}
		if m.Name == "" {
			cs := ts.walk(ts.Get(m.Type), a.sub(m.off), outer, outerBit+m.off*8, depth+1)
			if cs == nil {
				return nil
			}
			out = append(out, cs...)
			continue
		}
		out = append(out, Chain{ts.hopOf(outer, m, outerBit, lo, hi)})
	}
	return out
}

// skip returns how many of the first members of t (ms) walk passes over
// for an access at byte off whatever its size and bits: those whose
// next member starts at off or before, bitfields ending by off. A
// struct's members are found by a binary search rather than one by one:
// an access to sk_buff's members past its 200th byte went through the
// hundred before it each time.
func (ts *Types) skip(t *Type, ms []Member, off int64) int {
	if t.Kind != Struct || len(ms) < 16 || off <= 0 || t.noSkip {
		return 0
	}
	if t.bitEnd == nil {
		// Once per type: the members must be in the order of their
		// offsets for walk to pass over them so.
		be := make([]int64, len(ms)+1)
		for i := range ms {
			if i > 0 && ms[i].off < ms[i-1].off {
				t.noSkip = true
				return 0
			}
			be[i+1] = be[i]
			if ms[i].BitSize > 0 {
				be[i+1] = max(be[i], (ms[i].bitOff+ms[i].BitSize+7)/8)
			}
		}
		t.bitEnd = be
	}
	// k members start at off or before: walk passes over each of the
	// first k-1 that is not a bitfield (the next starts by off).
	k := sort.Search(len(ms), func(i int) bool { return ms[i].off > off })
	// Of those, the bitfields among the first q end by off: passed
	// over too (bitEnd grows with i).
	q := sort.Search(len(ms)+1, func(i int) bool { return t.bitEnd[i] > off })
	return max(0, min(k-1, q-1))
}

// Within keeps of each chain the hops, from the outermost, that o
// holds too; chains left without any are dropped.
func Within(cs []Chain, o Chain) []Chain {
	out := cs[:0]
	for _, c := range cs {
		n := 0
		for n < len(c) && o.holds(c[n].Member) {
			n++
		}
		if n > 0 {
			out = append(out, c[:n])
		}
	}
	return out
}

func (c Chain) holds(m *Member) bool {
	for _, h := range c {
		if h.Member == m {
			return true
		}
	}
	return false
}

// copies reports whether the access is part of a copy of all the bytes
// [lo, hi).
func (a Use) copies(lo, hi int64) bool {
	return a.Copy && a.CopyLo <= lo && a.CopyHi >= hi
}

func (a Use) sub(off int64) Use {
	a.Off -= off
	a.CopyLo -= off
	a.CopyHi -= off
	a.InitLo -= off
	a.InitHi -= off
	a.ConstLo -= off
	a.ConstHi -= off
	a.Bits = a.Bits.shift(off * 8)
	return a
}

func (ts *Types) hopOf(outer *Type, m *Member, outerBit, lo, hi int64) Hop {
	h := Hop{Container: outer, Member: m, BitOff: outerBit + m.bitOff, BitSize: m.BitSize}
	if h.BitSize == 0 {
		h.BitSize = (hi - lo) * 8
	}
	return h
}

// one is walk for the single member m the access falls on.
func (ts *Types) one(t *Type, m *Member, a Use, outer *Type, outerBit int64, depth int) []Chain {
	lo, hi := ts.span(m)
	mt := ts.Get(m.Type)
	if m.BitSize > 0 || mt == nil {
		if m.Name == "" || a.Indexed {
			return nil
		}
		return chainOf(ts.hopOf(outer, m, outerBit, lo, hi))
	}
	inner := a.sub(m.off)
	// (The cheap tests first: scalarElem reads the types of all of a
	// struct's members.)
	if len(ts.mems(t)) == 1 && a.Load && (a.Off > lo || a.Off+a.N < hi) {
		if el := ts.scalarElem(mt, 0); el > 0 && a.N > el {
			// The byte array of a one-member wrapper (guid_t's b, in6_addr's
			// in6_u) loaded wider than its elements, in part: the source
			// read it through a cast or an inlined memcmp (ipv6_addr_hash's
			// unsigned long *, guid_equal), naming no member of the wrapper.
			// (A load of all of it is a copy or a merged loop, kernel_cap_t's
			// cap[]; stores of elements are merged by GCC's store merging.)
			return nil
		}
	}
	if a.Indexed && mt.Kind != Array && !(m.Name == "" && (mt.Kind == Struct || mt.Kind == Union)) {
		// An index register moves the access by an unknown amount: only
		// an array member says where it stays.
		return nil
	}
	switch mt.Kind {
	case Struct, Union:
		if m.Name == "" {
			return ts.walk(mt, inner, outer, outerBit+m.off*8, depth+1)
		}
		h := ts.hopOf(outer, m, outerBit, lo, hi)
		whole := a.Off <= lo && a.Off+a.N >= hi
		copied := a.copies(lo, hi)
		if whole && !a.Addr && !copied && a.WrapOK != nil && a.WrapOK(mt) && !a.assigns(mt) && ts.single(mt, 0) {
			// A wrapper of one member (atomic_t, refcount_t, kuid_t):
			// the whole of it is that member where a helper taking the
			// wrapper (atomic_read(v), __kuid_val(uid)) is inlined;
			// elsewhere it is copied whole (uid = cred->uid), which the
			// plugin records as the outer member only.
			in := inner
			in.WrapOK = func(*Type) bool { return true } // the helper's own code, down to the scalar
			if cs := ts.walk(mt, in, nil, 0, depth+1); len(cs) == 1 {
				return []Chain{append(Chain{h}, cs[0]...)}
			}
		}
		inited := a.Consts && a.ConstLo <= lo && a.ConstHi >= hi
		if whole || (a.Addr && a.Off == lo) || a.Indexed || copied || inited {
			// The whole member (a struct copy), or its address, or a
			// piece of a copy of it: the plugin records the member, not
			// what is inside.
			return chainOf(h)
		}
		inner.nested = true
		cs := ts.walk(mt, inner, nil, 0, depth+1)
		if len(cs) == 0 {
			return chainOf(h)
		}
		out := make([]Chain, len(cs))
		for i, c := range cs {
			out[i] = append(Chain{h}, c...)
		}
		return out
	case Array:
		if m.Name == "" {
			return nil
		}
		h := ts.hopOf(outer, m, outerBit, lo, hi)
		el := ts.Get(mt.Elem)
		if a.nested && a.Load && !a.Copy && el != nil && el.Size > 0 && inner.N > el.Size && el.Kind != Struct && el.Kind != Union && el.Kind != Array {
			// A read of several elements of a scalar array at once,
			// not a piece of a copy: C reads an array element by
			// element, so the source reached these bytes through a
			// pointer cast to another type (io_kiocb_to_cmd(req, struct
			// io_open)->how is ((struct io_open *)&req->cmd)->how, and
			// io_cmd_data's data[] a byte blob), whose member the
			// plugin records, not the array: only the outer member.
			return nil
		}
		if a.Indexed || a.copies(lo, hi) || el == nil || el.Size <= 0 || (el.Kind != Struct && el.Kind != Union) {
			return chainOf(h)
		}
		// An element of an array of structs: where in the element.
		in := inner.Off % el.Size
		if in+inner.N > el.Size || (a.Addr && in == 0) {
			return chainOf(h)
		}
		e := inner
		e.Bits = e.Bits.shift((inner.Off - in) * 8)
		e.Off = in
		cs := ts.walk(el, e, nil, 0, depth+1)
		out := []Chain{{h}}
		if len(cs) > 0 {
			out = out[:0]
			for _, c := range cs {
				out = append(out, append(Chain{h}, c...))
			}
		}
		return out
	}
	if m.Name == "" {
		return nil
	}
	return chainOf(ts.hopOf(outer, m, outerBit, lo, hi))
}

// chainOf is the one chain of hop h, in one allocation (two for the
// literal []Chain{{h}}: the commonest result).
func chainOf(h Hop) []Chain {
	p := &struct {
		c [1]Chain
		h [1]Hop
	}{h: [1]Hop{h}}
	p.c[0] = p.h[:]
	return p.c[:]
}

// scalarElem is the size of the widest element of t when t is an array
// of scalars or a struct or union of such arrays (in6_addr's in6_u);
// 0 otherwise.
func (ts *Types) scalarElem(t *Type, depth int) int64 {
	if t == nil || depth > 4 {
		return 0
	}
	switch t.Kind {
	case Array:
		if el := ts.Get(t.Elem); el != nil && (el.Kind == Other || el.Kind == Ptr) && el.Size > 0 {
			return el.Size
		}
	case Struct, Union:
		var w int64
		ms := ts.mems(t)
		for i := range ms {
			e := ts.scalarElem(ts.Get(ms[i].Type), depth+1)
			if e == 0 || ms[i].BitSize > 0 {
				return 0
			}
			w = max(w, e)
		}
		return w
	}
	return 0
}

// single reports whether t is a struct or union of exactly one member,
// itself a scalar, a pointer or such a wrapper.
func (ts *Types) single(t *Type, depth int) bool {
	if t == nil || (t.Kind != Struct && t.Kind != Union) || len(ts.mems(t)) != 1 || depth > 8 {
		return false
	}
	m0 := &ts.mems(t)[0]
	mt := ts.Get(m0.Type)
	if mt == nil || m0.BitSize > 0 {
		return false
	}
	switch mt.Kind {
	case Struct, Union:
		return ts.single(mt, depth+1)
	case Array:
		return false
	}
	return true
}

// ObjectAccess resolves an access to bytes of an object of type t (a
// struct, a union or an array of them) into chains.
func (ts *Types) ObjectAccess(t *Type, a Use) []Chain {
	if t == nil {
		return nil
	}
	if t.Kind == Array {
		el := ts.Get(t.Elem)
		if el == nil || el.Size <= 0 || a.Off < 0 {
			return nil
		}
		in := a.Off % el.Size
		if in+a.N > el.Size {
			return nil
		}
		a = a.sub(a.Off - in)
		a.Indexed = false // indexing an array of structs moves by whole elements
		t = el
	}
	if a.Off < 0 || (t.Size > 0 && a.Off >= t.Size) {
		return nil
	}
	if a.Init && a.InitLo <= 0 && a.InitHi >= t.Size && t.Size > int64(max(a.N, 1)) {
		return nil // the whole object copied or initialized
	}
	if ts.builtWhole(t, a.Stores) {
		return nil
	}
	if a.Addr && a.Off == 0 {
		return nil // the object's own address, or its first member's: not told apart
	}
	if a.Off == 0 && a.N >= t.Size && ts.single(t, 0) && a.assigns(t) {
		return nil
	}
	if a.Off == 0 && a.N >= t.Size && (a.Load || a.Assign != nil) && !a.Copy && t.Name != "" && ts.single(t, 0) && ts.scalarWrapper(t) && (!(a.WrapOK != nil && a.WrapOK(t)) || (a.Load && a.ByVal != nil && a.ByVal(t))) {
		// A named wrapper of one scalar (pgd_t, kuid_t, pm_message_t)
		// loaded or stored whole where no helper taking it is inlined,
		// or loaded in the copy of one taking it by value (its
		// argument, evaluated there): the source moved the value
		// (pgd_page_vaddr(*pgd), *uidp = uid), which the plugin
		// records no member of, or named the member (pgd->pgd) in the
		// same instruction: not decided. A
		// wrapper with no name cannot be moved as a value elsewhere
		// (get_unaligned's __pptr->x names its member).
		return nil
	}
	cs := ts.walk(t, a, nil, 0, 0)
	if a.Declared {
		return cs
	}
	// A struct member at offset 0 with more below it: the pointer may
	// be one to that member, cast (current_thread_info() is current;
	// inet_sk(sk) is sk): the hops below are sure, it is not.
	return TrimZeroLevels(ts, cs)
}

// builtWhole reports whether stores (Use.Stores) cover all of t and
// one of them writes parts of two of its members.
func (ts *Types) builtWhole(t *Type, stores [][2]int64) bool {
	if len(stores) < 2 || t.Size <= 0 || t.Kind != Struct {
		return false
	}
	lo, hi := stores[0][0], stores[0][1]
	for grown := true; grown; {
		grown = false
		for _, v := range stores {
			if v[0] <= hi && v[1] >= lo && (v[0] < lo || v[1] > hi) {
				lo, hi, grown = min(lo, v[0]), max(hi, v[1]), true
			}
		}
	}
	if lo > 0 || hi < t.Size {
		return false
	}
	for _, v := range stores {
		n := 0
		ms := ts.mems(t)
		for i := range ms {
			mlo, mhi := ts.span(&ms[i])
			if mlo < v[1] && mhi > v[0] {
				n++
			}
		}
		if n >= 2 {
			return true
		}
	}
	return false
}

// structGroup returns, when cands are what struct_group() makes (an
// anonymous struct and named structs of the same members at the same
// places), the anonymous one.
func (ts *Types) structGroup(cands []*Member) *Member {
	var anon *Member
	for _, m := range cands {
		if m.Name == "" {
			if anon != nil {
				return nil
			}
			anon = m
		}
	}
	if anon == nil {
		return nil
	}
	at := ts.Get(anon.Type)
	if at == nil || at.Kind != Struct {
		return nil
	}
	for _, m := range cands {
		if m == anon {
			continue
		}
		mt := ts.Get(m.Type)
		if mt == nil || mt.Kind != Struct || mt.Size != at.Size || len(ts.mems(mt)) != len(ts.mems(at)) || m.off != anon.off {
			return nil
		}
		xs, ys := ts.mems(mt), ts.mems(at)
		for i := range xs {
			x, y := &xs[i], &ys[i]
			if x.Name != y.Name || x.bitOff != y.bitOff || x.BitSize != y.BitSize {
				return nil
			}
		}
	}
	return anon
}

// EmbedsAtZero says whether struct t holds u at offset 0, through its
// first members (tcp_sock holds inet_connection_sock, inet_sock and
// sock so): a pointer to t is also one to u.
func (ts *Types) EmbedsAtZero(t, u *Type) bool {
	for d := 0; t != nil && u != nil && d < 8; d++ {
		if d > 0 && t.Key() == u.Key() {
			return true
		}
		if t.Kind != Struct || len(ts.mems(t)) == 0 || ts.mems(t)[0].bitOff != 0 {
			return false
		}
		t = ts.Get(ts.mems(t)[0].Type)
	}
	return false
}

// HoldsClass says whether t, a class (a struct of three members or
// more), holds at offset 0, through classes, one for which named is
// true, at least skip levels below the first it holds (tcp_sock holds
// inet_connection_sock, which holds inet_sock, which holds sock).
func (ts *Types) HoldsClass(t *Type, skip int, named func(*Type) bool) bool {
	for d := 0; t != nil && t.Kind == Struct && len(ts.mems(t)) >= 3 && d < 9; d++ {
		if d > skip && named(t) {
			return true
		}
		t = ts.Get(ts.mems(t)[0].Type)
	}
	return false
}

// TrimZeroLevels drops the levels of each chain that are struct
// members at offset 0 above the first one that is not: where a pointer
// to the outer struct may be a cast one to any of those members'
// types, the hops below are sure, they are not.
func TrimZeroLevels(ts *Types, cs []Chain) []Chain {
	for i, c := range cs {
		for len(c) > 1 && c[0].BitOff == 0 {
			if mt := ts.Get(c[0].Member.Type); mt == nil || (mt.Kind != Struct && mt.Kind != Union) {
				break
			}
			c = c[1:]
		}
		cs[i] = c
	}
	return cs
}

// scalarWrapper reports whether the one member of t (a wrapper, see
// single) is, at the bottom, a scalar rather than a pointer: a pointer
// wrapper's load is mostly its member named (head->first).
func (ts *Types) scalarWrapper(t *Type) bool {
	for t != nil && (t.Kind == Struct || t.Kind == Union) && len(ts.mems(t)) == 1 {
		t = ts.Get(ts.mems(t)[0].Type)
	}
	return t != nil && t.Kind == Other
}
