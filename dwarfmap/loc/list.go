package loc

import (
	"debug/dwarf"
	"encoding/binary"
	"fmt"

	"github.com/go-delve/delve/pkg/dwarf/godwarf"
	"github.com/go-delve/delve/pkg/dwarf/loclist"

	"github.com/klasy/klasy/dwarfmap/elfimage"
	"github.com/klasy/klasy/internal/mmapfile"
)

// Lists reads the location lists of one compilation unit.
type Lists struct {
	img     *elfimage.Image
	unit    *dwarf.Data // a view of the unit, for its DW_AT_addr_base and DW_AT_loclists_base
	version int
	lowPC   uint64 // the unit's base address
	// The unit DIE's attributes, read once (a Lists answers many At).
	attrs map[dwarf.Attr]attrVal
	addrs *godwarf.DebugAddrSection
}

type attrVal struct {
	v  int64
	ok bool
}

// NewLists returns the location lists of the unit of DWARF version
// version and base address lowPC that d views (as
// elfimage.Image.UnitDWARF gives it).
func NewLists(img *elfimage.Image, d *dwarf.Data, version int, lowPC uint64) *Lists {
	return &Lists{img: img, unit: d, version: version, lowPC: lowPC}
}

// At finds the expression in force at pc in the location list that an
// attribute of class (dwarf.ClassLocListPtr, or dwarf.ClassLocList for
// a DW_FORM_loclistx index) locates at off, with delve's readers for
// DWARF 5 .debug_loclists and DWARF 2-4 .debug_loc. nil means no
// location at pc.
func (l *Lists) At(off int64, class dwarf.Class, pc uint64) (expr []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			if mmapfile.IsFault(r) {
				panic(r) // the image changed: for the caller's mmapfile.Catch
			}
			err = fmt.Errorf("malformed location list at %#x: %v", off, r)
		}
	}()
	img := l.img
	if l.version >= 5 {
		sec := img.Section(".debug_loclists")
		if class == dwarf.ClassLocList {
			// DW_FORM_loclistx: an index into the unit's offset table.
			off, err = l.loclistx(uint64(off))
			if err != nil {
				return nil, err
			}
		}
		if off < 0 || off >= int64(len(sec)) {
			return nil, fmt.Errorf("location list offset %#x outside .debug_loclists", off)
		}
		rd := loclist.NewDwarf5Reader(sec)
		var da *godwarf.DebugAddr
		if a := img.Section(".debug_addr"); len(a) > 0 {
			if l.addrs == nil {
				l.addrs = godwarf.ParseAddr(a)
			}
			da = l.addrs.GetSubsection(l.addrBase())
		}
		e, err := rd.Find(int(off), 0, l.lowPC, pc, da)
		if err != nil || e == nil {
			return nil, err
		}
		return e.Instr, nil
	}
	sec := img.Section(".debug_loc")
	if off < 0 || off >= int64(len(sec)) {
		return nil, fmt.Errorf("location list offset %#x outside .debug_loc", off)
	}
	e, err := loclist.NewDwarf2Reader(sec, 8).Find(int(off), 0, l.lowPC, pc, nil)
	if err != nil || e == nil {
		return nil, err
	}
	return e.Instr, nil
}

func (l *Lists) unitAttr(a dwarf.Attr) (int64, bool) {
	if av, ok := l.attrs[a]; ok {
		return av.v, av.ok
	}
	var v int64
	var ok bool
	r := l.unit.Reader()
	if e, err := r.Next(); err == nil && e != nil {
		v, ok = e.Val(a).(int64)
	}
	if l.attrs == nil {
		l.attrs = map[dwarf.Attr]attrVal{}
	}
	l.attrs[a] = attrVal{v, ok}
	return v, ok
}

func (l *Lists) addrBase() uint64 {
	v, _ := l.unitAttr(dwarf.AttrAddrBase)
	return uint64(v)
}

func (l *Lists) loclistx(i uint64) (int64, error) {
	base, ok := l.unitAttr(dwarf.AttrLoclistsBase)
	sec := l.img.Section(".debug_loclists")
	if !ok || base < 0 || uint64(base)+4*i+4 > uint64(len(sec)) {
		return 0, fmt.Errorf("location list index %d without DW_AT_loclists_base", i)
	}
	return base + int64(binary.LittleEndian.Uint32(sec[uint64(base)+4*i:])), nil
}
