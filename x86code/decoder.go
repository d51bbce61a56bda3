package x86code

import (
	"encoding/binary"
	"slices"

	"golang.org/x/arch/x86/x86asm"
)

// Decoder decodes as Decode does, faster over a whole image: x86asm's
// table walk costs ~200 ns an instruction, and most instructions of a
// kernel share their shape (prefixes, opcode, ModRM, SIB) with one
// decoded before, differing only in their displacement, immediate or
// branch offset. A Decoder keeps, for each such shape of the common
// opcodes it knows the layout of, x86asm's answer (a template), and
// gives the next instruction of that shape the template with its
// displacement, immediate or offset put in, as x86asm stores them (an
// immediate sign- or zero-extended as the one the template was made
// from shows, until a negative one does: until then only immediates
// both extend alike are put in). Any other instruction, and the first
// of each shape, goes to x86asm. The templates are all kept, found by
// a hash of the shape in a table of their numbers (a map cost more
// than the decoding it saved): a kernel has some 30,000 shapes (7 MB
// of templates). Not safe for concurrent use: one per goroutine.
type Decoder struct {
	// index holds, by a hash of the shape (on a collision the next
	// place), 1 + the number of its template in temps, 0 where empty;
	// never more than half full. Four bytes a place, not the template:
	// the table of 8,192 templates in two places a shape it replaces
	// (1.5 MB, no larger for the caches' sake) pushed out and decoded
	// again 63,000 of the built kernel's instructions, 3,500
	// instructions of x86asm each.
	index []uint32
	shift uint8 // 64 - log2(len(index))
	// temps are the templates, in blocks of 1,024 (a growing slice
	// would leave its old arrays, 8 MB for Debian's, to the collector,
	// and the peak memory with them).
	temps [][]template
	ntemp int
	// mems are memory operands put in an instruction's Args lately, by
	// a hash: an operand put in again (the same base register and
	// displacement) shares its Arg rather than taking a new one.
	mems *[256]memArg
}

type memArg struct {
	m x86asm.Mem
	a x86asm.Arg
}

// memArg returns m as an Arg.
func (d *Decoder) memArg(m x86asm.Mem) x86asm.Arg {
	if d.mems == nil {
		d.mems = new([256]memArg)
	}
	h := (uint64(m.Base) | uint64(m.Index)<<8 | uint64(m.Scale)<<16 | uint64(m.Segment)<<24 ^ uint64(m.Disp)<<32) * 0x9e3779b97f4a7c15
	e := &d.mems[h>>56]
	if e.a == nil || e.m != m {
		e.m, e.a = m, m
	}
	return e.a
}

// indexBits is the starting size of a Decoder's index.
const indexBits = 14

// shapeKey is an instruction's bytes but its displacement, immediate
// and branch offset: REX, opcode (two bytes after 0f), ModRM, SIB,
// flags and the legacy prefixes.
type shapeKey struct {
	bytes uint64
	pfx   uint32
}

type template struct {
	key shapeKey
	ext immExt
	acc accCode // inst's, for each instruction of its shape
	// The arguments holding the memory operand, the branch offset and
	// the immediate (argsAt): where the shape's parts go.
	memAt, relAt, immAt uint8
	inst                x86asm.Inst
}

// argsAt sets t's memAt, relAt and immAt from its instruction.
func (t *template) argsAt() {
	for i, a := range t.inst.Args {
		switch a.(type) {
		case x86asm.Mem:
			t.memAt = uint8(i)
		case x86asm.Rel:
			t.relAt = uint8(i)
		case x86asm.Imm:
			t.immAt = uint8(i)
		}
	}
}

// immExt is how x86asm extends a shape's immediate to an Imm.
type immExt uint8

const (
	immEither   immExt = iota // not known: only non-negative ones seen
	immSigned                 // sign-extended
	immUnsigned               // zero-extended
)

// shape is where an instruction's variable parts are.
type shape struct {
	key              shapeKey
	imm              uint32
	n                uint8 // length
	dispOff, dispLen uint8 // a memory operand's displacement
	relOff, relLen   uint8 // a branch's offset
	immLen           uint8 // an immediate's bytes (imm: their value)
}

// Opcode layouts: a ModRM byte, and the immediate's size.
const (
	opModRM = 1 << 4 // followed by a ModRM byte
	opRel   = 1 << 5 // the immediate is a branch offset
	opKnown = 1 << 6
	// The immediate only with ModRM's reg field 0 or 1 (test; not,
	// neg, mul, div have none).
	opGroup3 = 1 << 7
	immMask  = 0x0f // immediate bytes
)

var oneByte, twoByte [256]uint8

func init() {
	set := func(t *[256]uint8, fl uint8, ops ...int) {
		for _, o := range ops {
			t[o] = fl | opKnown
		}
	}
	// ModRM, no immediate: ALU ops, mov, lea, test, xchg, movsxd, the
	// group of inc/dec/call/jmp/push through memory, shifts by 1 or cl.
	set(&oneByte, opModRM, 0x00, 0x01, 0x02, 0x03, 0x08, 0x09, 0x0a, 0x0b, 0x10, 0x11, 0x12, 0x13,
		0x18, 0x19, 0x1a, 0x1b, 0x20, 0x21, 0x22, 0x23, 0x28, 0x29, 0x2a, 0x2b, 0x30, 0x31, 0x32, 0x33,
		0x38, 0x39, 0x3a, 0x3b, 0x63, 0x84, 0x85, 0x86, 0x87, 0x88, 0x89, 0x8a, 0x8b, 0x8d,
		0xd0, 0xd1, 0xd2, 0xd3, 0xfe, 0xff)
	set(&oneByte, opModRM|1, 0x80, 0x83, 0xc0, 0xc1, 0xc6, 0x6b)
	set(&oneByte, opModRM|4, 0x81, 0xc7, 0x69)
	// No ModRM: push, pop, ret, int3, nop, leave, cltq/cqto, hlt.
	for r := 0x50; r <= 0x5f; r++ {
		set(&oneByte, 0, r)
	}
	set(&oneByte, 0, 0xc3, 0xcc, 0x90, 0xc9, 0x98, 0x99, 0xf4)
	// String instructions (rep stos, rep movs).
	set(&oneByte, 0, 0xa4, 0xa5, 0xaa, 0xab, 0xac, 0xad)
	set(&oneByte, opModRM|opGroup3|1, 0xf6)
	set(&oneByte, opModRM|opGroup3|4, 0xf7)
	set(&oneByte, 1, 0x6a, 0xa8, 0x04, 0x0c, 0x14, 0x1c, 0x24, 0x2c, 0x34, 0x3c)
	set(&oneByte, 4, 0x68, 0xa9, 0x05, 0x0d, 0x15, 0x1d, 0x25, 0x2d, 0x35, 0x3d)
	for r := 0xb8; r <= 0xbf; r++ {
		set(&oneByte, 4, r) // mov $imm32 (not with REX.W: imm64)
	}
	set(&oneByte, opRel|1, 0xeb)
	for c := 0x70; c <= 0x7f; c++ {
		set(&oneByte, opRel|1, c)
	}
	set(&oneByte, opRel|4, 0xe8, 0xe9)
	// 0f: movzx, movsx, cmovcc, setcc, bt*, imul, nopl, cmpxchg, xadd.
	set(&twoByte, opModRM, 0xb6, 0xb7, 0xbe, 0xbf, 0xaf, 0x1f, 0xa3, 0xab, 0xb3, 0xbb, 0xb1, 0xc1, 0xa5, 0xad)
	for c := 0x40; c <= 0x4f; c++ {
		set(&twoByte, opModRM, c)
	}
	for c := 0x90; c <= 0x9f; c++ {
		set(&twoByte, opModRM, c)
	}
	set(&twoByte, opModRM|1, 0xba, 0xa4, 0xac)
	set(&twoByte, 0, 0x0b)       // ud2
	set(&twoByte, opModRM, 0xb9) // ud1
	for c := 0x80; c <= 0x8f; c++ {
		set(&twoByte, opRel|4, c)
	}
}

// isPrefix reports whether c is a legacy prefix Decoder knows the
// effect of on the layout: segments (%gs: per-CPU data), lock, rep and
// the operand size (0x66: a 16-bit immediate). Not the address size.
func isPrefix(c byte) bool {
	switch c {
	case 0x26, 0x2e, 0x36, 0x3e, 0x64, 0x65, 0x66, 0xf0, 0xf2, 0xf3:
		return true
	}
	return false
}

// shapeOf finds the shape of the instruction at the start of b, ok
// false if it is not of an opcode Decoder knows (two REX, VEX, more
// than four prefixes, ...) or b is too short for it.
func shapeOf(b []byte) (s shape, ok bool) {
	p := 0
	var pfx uint32
	opsize := false
	for p < len(b) && isPrefix(b[p]) {
		if p == 4 {
			return s, false
		}
		pfx = pfx<<8 | uint32(b[p])
		opsize = opsize || b[p] == 0x66
		p++
	}
	var rex byte
	if p < len(b) && b[p]&0xf0 == 0x40 {
		rex, p = b[p], p+1
	}
	if p >= len(b) {
		return s, false
	}
	op1, op2 := b[p], byte(0)
	fl := oneByte[op1]
	p++
	if op1 == 0x0f {
		if p >= len(b) {
			return s, false
		}
		op2 = b[p]
		fl = twoByte[op2]
		p++
	}
	if fl&opKnown == 0 || (op1 >= 0xb8 && op1 <= 0xbf && rex&8 != 0) {
		return s, false
	}
	var modrm, sib byte
	var flags uint64 = 1
	if fl&opModRM != 0 {
		if p >= len(b) {
			return s, false
		}
		modrm = b[p]
		p++
		flags |= 2
		mod, rm := modrm>>6, modrm&7
		if mod != 3 && rm == 4 {
			if p >= len(b) {
				return s, false
			}
			sib = b[p]
			p++
			flags |= 4
		}
		switch {
		case mod == 1:
			s.dispOff, s.dispLen = uint8(p), 1
		case mod == 2, mod == 0 && rm == 5, mod == 0 && rm == 4 && sib&7 == 5:
			s.dispOff, s.dispLen = uint8(p), 4
		}
		p += int(s.dispLen)
	}
	n := int(fl & immMask)
	if fl&opGroup3 != 0 && modrm>>3&7 > 1 {
		n = 0
	}
	if opsize && rex&8 == 0 && n == 4 {
		if fl&opRel != 0 {
			return s, false // a 16-bit offset
		}
		n = 2
	}
	if p+n > len(b) {
		return s, false
	}
	if fl&opRel != 0 {
		s.relOff, s.relLen = uint8(p), uint8(n)
	} else {
		for i := n - 1; i >= 0; i-- {
			s.imm = s.imm<<8 | uint32(b[p+i])
		}
		s.immLen = uint8(n)
	}
	p += n
	s.n = uint8(p)
	s.key = shapeKey{bytes: uint64(rex) | uint64(op1)<<8 | uint64(op2)<<16 | uint64(modrm)<<24 | uint64(sib)<<32 | flags<<40, pfx: pfx}
	return s, true
}

// immNeg reports whether the immediate's top bit is set: its sign- and
// zero-extension differ.
func (s *shape) immNeg() bool {
	return s.immLen > 0 && s.imm>>(8*s.immLen-1)&1 != 0
}

// immArg is the immediate extended as ext says.
func (s *shape) immArg(ext immExt) x86asm.Imm {
	if ext == immSigned && s.immNeg() {
		return x86asm.Imm(int64(s.imm) - 1<<(8*s.immLen))
	}
	return x86asm.Imm(s.imm)
}

// disp and rel read the variable parts as decode gives them: a
// displacement and an offset sign-extended.
func (s *shape) disp(b []byte) int64 {
	if s.dispLen == 1 {
		return int64(int8(b[s.dispOff]))
	}
	return int64(int32(binary.LittleEndian.Uint32(b[s.dispOff:])))
}

func (s *shape) rel(b []byte) x86asm.Rel {
	if s.relLen == 1 {
		return x86asm.Rel(int8(b[s.relOff]))
	}
	return x86asm.Rel(int32(binary.LittleEndian.Uint32(b[s.relOff:])))
}

// Decode is x86asm.Decode(b, 64), its 32-bit displacement
// sign-extended (decode).
func (d *Decoder) Decode(b []byte) (x86asm.Inst, error) {
	var inst x86asm.Inst
	_, err := d.decodeInto(&inst, b)
	return inst, err
}

// decodeInto is Decode into *inst, with its accCode.
func (d *Decoder) decodeInto(inst *x86asm.Inst, b []byte) (accCode, error) {
	s, ok := shapeOf(b)
	if !ok {
		var err error
		*inst, err = decode(b)
		return accessCode(inst), err
	}
	if d.index == nil {
		d.index, d.shift = make([]uint32, 1<<indexBits), 64-indexBits
	}
	at := d.place(s.key)
	var t *template
	if e := d.index[at]; e != 0 {
		t = d.temp(e)
	}
	if t != nil && (t.ext != immEither || !s.immNeg()) {
		*inst = t.inst
		// Straight to the arguments the shape's parts go in (fits made
		// sure each is there, one of its kind).
		if s.dispLen > 0 {
			if a := inst.Args[t.memAt].(x86asm.Mem); s.disp(b) != a.Disp {
				a.Disp = s.disp(b)
				inst.Args[t.memAt] = d.memArg(a)
			}
		}
		if s.relLen > 0 {
			inst.Args[t.relAt] = s.rel(b)
		}
		if s.immLen > 0 {
			if v := s.immArg(t.ext); v != inst.Args[t.immAt].(x86asm.Imm) {
				inst.Args[t.immAt] = v
			}
		}
		return t.acc, nil
	}
	var err error
	*inst, err = decode(b)
	if err != nil {
		return 0, err
	}
	acc := accessCode(inst)
	if ext, ok := s.fits(inst, b); ok {
		if t != nil {
			// The same shape: what its immediate's extension is, now known.
			t.ext, t.inst = max(t.ext, ext), *inst
		} else {
			if d.ntemp%tempBlock == 0 {
				d.temps = append(d.temps, make([]template, 0, tempBlock))
			}
			last := &d.temps[len(d.temps)-1]
			*last = append(*last, template{key: s.key, ext: ext, acc: acc, inst: *inst})
			(*last)[len(*last)-1].argsAt()
			d.ntemp++
			d.index[at] = uint32(d.ntemp)
			if 2*d.ntemp > len(d.index) {
				d.grow()
			}
		}
	}
	return acc, nil
}

const tempBlock = 1024

// temp is template number e (1 up) of d.temps.
func (d *Decoder) temp(e uint32) *template {
	return &d.temps[(e-1)/tempBlock][(e-1)%tempBlock]
}

// place is where key's template is in d.index, or the empty place it
// goes to.
func (d *Decoder) place(key shapeKey) int {
	h := (key.bytes ^ uint64(key.pfx)<<29) * 0x9e3779b97f4a7c15
	mask := len(d.index) - 1
	for at := int(h >> d.shift); ; at = (at + 1) & mask {
		e := d.index[at]
		if e == 0 || d.temp(e).key == key {
			return at
		}
	}
}

// grow doubles d.index, its templates placed again.
func (d *Decoder) grow() {
	d.index, d.shift = make([]uint32, 2*len(d.index)), d.shift-1
	for e := 1; e <= d.ntemp; e++ {
		d.index[d.place(d.temp(uint32(e)).key)] = uint32(e)
	}
}

// fits reports whether x86asm's inst is of the shape s found: the
// same length, and the displacement, offset and immediate where s has
// them (in one argument each), so that the template serves the shape;
// and how its immediate is extended (immEither: not negative, both
// alike).
func (s *shape) fits(inst *x86asm.Inst, b []byte) (immExt, bool) {
	if inst.Len != int(s.n) {
		return 0, false
	}
	mems, rels, imms := 0, 0, 0
	ext := immEither
	for _, a := range inst.Args {
		switch a := a.(type) {
		case x86asm.Mem:
			mems++
			if s.dispLen > 0 && a.Disp != s.disp(b) || s.dispLen == 0 && a.Disp != 0 {
				return 0, false
			}
		case x86asm.Rel:
			rels++
			if s.relLen == 0 || a != s.rel(b) {
				return 0, false
			}
		case x86asm.Imm:
			// Without an immediate in the bytes, one the shape
			// gives (shl $1), in the template.
			if s.immLen == 0 {
				continue
			}
			imms++
			switch {
			case !s.immNeg() && a == s.immArg(immEither):
			case a == s.immArg(immSigned):
				ext = immSigned
			case a == s.immArg(immUnsigned):
				ext = immUnsigned
			default:
				return 0, false
			}
		}
	}
	ok := mems <= 1 && rels == int(min(s.relLen, 1)) && (s.dispLen == 0 || mems == 1) && imms == int(min(s.immLen, 1))
	return ext, ok
}

// DecodeAppend is DecodeAppend with d.
func (d *Decoder) DecodeAppend(dst []Insn, code []byte, base uint64) []Insn {
	for off := 0; off < len(code); {
		pc := base + uint64(off)
		// One more place, not zeroed first: decodeInto writes all of it.
		dst = slices.Grow(dst, 1)
		dst = dst[:len(dst)+1]
		in := &dst[len(dst)-1]
		in.PC = pc
		var err error
		in.acc, err = d.decodeInto(&in.Inst, code[off:])
		if err != nil || in.Inst.Len == 0 {
			dst = dst[:len(dst)-1]
			off++
			continue
		}
		off += in.Inst.Len
	}
	return dst
}
