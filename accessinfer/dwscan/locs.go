package dwscan

import (
	"encoding/binary"
	"math"
)

// Piece is where a variable lives over the code [lo, hi): expr, a
// DWARF location expression.
type Piece struct {
	Lo, Hi uint64
	Expr   []byte
}

// Everywhere marks a location given by a single expression: valid
// wherever its scope is.
const Everywhere = math.MaxUint64

// unitLocs reads the location lists of one compilation unit. Unlike
// dwarfmap/loc's Lists, which finds the entry at one PC, it lists all
// entries of a list at once: tracking needs each variable's location
// over the whole function.
type unitLocs struct {
	version  int
	lowPC    uint64
	addrBase uint64 // DW_AT_addr_base into .debug_addr
	llBase   int64  // DW_AT_loclists_base
	loc      []byte // .debug_loc (DWARF 2-4)
	// buf holds the pieces of the list last read: the caller copies
	// them out.
	buf      []Piece
	loclists []byte // .debug_loclists (DWARF 5)
	addr     []byte // .debug_addr
}

func uleb(b []byte, i *int) uint64 {
	var v uint64
	var s uint
	for *i < len(b) {
		c := b[*i]
		*i++
		if s < 64 {
			v |= uint64(c&0x7f) << s
		}
		s += 7
		if c < 0x80 {
			break
		}
	}
	return v
}

func sleb(b []byte, i *int) int64 {
	var v int64
	var s uint
	var c byte
	for *i < len(b) {
		c = b[*i]
		*i++
		if s < 64 {
			v |= int64(c&0x7f) << s
		}
		s += 7
		if c < 0x80 {
			break
		}
	}
	if s < 64 && c&0x40 != 0 {
		v |= -1 << s
	}
	return v
}

func (u *unitLocs) addrx(i uint64) (uint64, bool) {
	o := u.addrBase + 8*i
	if o+8 > uint64(len(u.addr)) {
		return 0, false
	}
	return binary.LittleEndian.Uint64(u.addr[o:]), true
}

// loclistx turns a DW_FORM_loclistx index into a section offset.
func (u *unitLocs) loclistx(i uint64) (int64, bool) {
	o := uint64(u.llBase) + 4*i
	if u.llBase <= 0 || o+4 > uint64(len(u.loclists)) {
		return 0, false
	}
	return u.llBase + int64(binary.LittleEndian.Uint32(u.loclists[o:])), true
}

// list returns the entries of the location list at off (nil if it
// cannot be read: then nothing is known of the variable).
func (u *unitLocs) list(off int64) []Piece {
	if u.version >= 5 {
		return u.list5(off)
	}
	return u.list4(off)
}

func (u *unitLocs) list5(off int64) []Piece {
	b := u.loclists
	if off < 0 || off >= int64(len(b)) {
		return nil
	}
	i := int(off)
	base := u.lowPC
	out := u.buf[:0]
	defer func() { u.buf = out[:0] }()
	expr := func(lo, hi uint64) bool {
		n := int(uleb(b, &i))
		if n < 0 || i+n > len(b) {
			return false
		}
		if lo < hi {
			out = append(out, Piece{lo, hi, b[i : i+n]})
		}
		i += n
		return true
	}
	u64 := func() uint64 {
		if i+8 > len(b) {
			i = len(b)
			return 0
		}
		v := binary.LittleEndian.Uint64(b[i:])
		i += 8
		return v
	}
	for i < len(b) {
		kind := b[i]
		i++
		switch kind {
		case 0: // DW_LLE_end_of_list
			return out
		case 1: // DW_LLE_base_addressx
			a, ok := u.addrx(uleb(b, &i))
			if !ok {
				return nil
			}
			base = a
		case 2: // DW_LLE_startx_endx
			lo, ok1 := u.addrx(uleb(b, &i))
			hi, ok2 := u.addrx(uleb(b, &i))
			if !ok1 || !ok2 || !expr(lo, hi) {
				return nil
			}
		case 3: // DW_LLE_startx_length
			lo, ok := u.addrx(uleb(b, &i))
			n := uleb(b, &i)
			if !ok || !expr(lo, lo+n) {
				return nil
			}
		case 4: // DW_LLE_offset_pair
			lo := uleb(b, &i)
			hi := uleb(b, &i)
			if !expr(base+lo, base+hi) {
				return nil
			}
		case 5: // DW_LLE_default_location: not used by GCC; nothing known
			return nil
		case 6: // DW_LLE_base_address
			base = u64()
		case 7: // DW_LLE_start_end
			lo := u64()
			hi := u64()
			if !expr(lo, hi) {
				return nil
			}
		case 8: // DW_LLE_start_length
			lo := u64()
			n := uleb(b, &i)
			if !expr(lo, lo+n) {
				return nil
			}
		default:
			return nil
		}
	}
	return out
}

func (u *unitLocs) list4(off int64) []Piece {
	b := u.loc
	if off < 0 || off >= int64(len(b)) {
		return nil
	}
	i := int(off)
	base := u.lowPC
	out := u.buf[:0]
	defer func() { u.buf = out[:0] }()
	for i+16 <= len(b) {
		lo := binary.LittleEndian.Uint64(b[i:])
		hi := binary.LittleEndian.Uint64(b[i+8:])
		i += 16
		if lo == 0 && hi == 0 {
			return out
		}
		if lo == ^uint64(0) {
			base = hi
			continue
		}
		if i+2 > len(b) {
			return nil
		}
		n := int(binary.LittleEndian.Uint16(b[i:]))
		i += 2
		if i+n > len(b) {
			return nil
		}
		if lo < hi {
			out = append(out, Piece{base + lo, base + hi, b[i : i+n]})
		}
		i += n
	}
	return out
}

// DWARF expression opcodes the tracker reads.
const (
	opAddr          = 0x03
	opReg0          = 0x50
	opReg31         = 0x6f
	opBreg0         = 0x70
	opBreg31        = 0x8f
	opRegx          = 0x90
	opFbreg         = 0x91
	opStackValue    = 0x9f
	opCallFrameCFA  = 0x9c
	opPiece         = 0x93
	opImplicitValue = 0x9e
)

// Where is what a location expression says about a variable's value.
type Where struct {
	Kind  uint8 // wNone, wReg, wRegPlus, wFrame, wAddr
	Reg   int   // DWARF register
	Off   int64 // wRegPlus: value = reg + off; wFrame: at frame base + off
	addr  uint64
	whole bool // the expression describes the whole variable (no DW_OP_piece)
}

const (
	LocNone    = iota
	LocReg     // the value is in reg
	LocRegPlus // the value is reg + off (DW_OP_bregN off; DW_OP_stack_value)
	LocFrame   // the variable is in memory at the frame base + off
	LocAddr    // the variable is in memory at addr
	// LocConst: the value is the address off (DW_OP_addr; DW_OP_stack_value),
	// a pointer GCC propagated as a constant (tk_setup_internals'
	// tk, always &tk_core.timekeeper).
	LocConst
)

// Describe reads the few expression shapes a compiler uses for a
// variable that lives in one place; anything else (pieces, entry
// values, computed values) says nothing.
func Describe(e []byte) Where {
	if len(e) == 0 {
		return Where{}
	}
	c := e[0]
	i := 1
	switch {
	case c >= opReg0 && c <= opReg31 && len(e) == 1:
		return Where{Kind: LocReg, Reg: int(c - opReg0), whole: true}
	case c == opRegx:
		r := uleb(e, &i)
		if i == len(e) {
			return Where{Kind: LocReg, Reg: int(r), whole: true}
		}
	case c >= opBreg0 && c <= opBreg31:
		o := sleb(e, &i)
		if i+1 == len(e) && e[i] == opStackValue {
			return Where{Kind: LocRegPlus, Reg: int(c - opBreg0), Off: o, whole: true}
		}
	case c == opFbreg:
		o := sleb(e, &i)
		if i == len(e) {
			return Where{Kind: LocFrame, Off: o, whole: true}
		}
	case c == opAddr && len(e) == 9:
		return Where{Kind: LocAddr, addr: binary.LittleEndian.Uint64(e[1:]), whole: true}
	case c == opAddr && len(e) == 10 && e[9] == opStackValue:
		return Where{Kind: LocConst, Off: int64(binary.LittleEndian.Uint64(e[1:9])), whole: true}
	}
	return Where{}
}
