package dwarfmap

import (
	"debug/dwarf"
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/klasy/klasy/dwarfmap/dwtype"
	"github.com/klasy/klasy/internal/mmapfile"
)

// ReturnClass says how a function's value comes back to its caller on
// x86-64: nothing, an integer in rax (bool, char, enum, int, long, ...),
// a pointer in rax, or something else (a struct or union by value, a
// float in xmm0, a 128-bit integer in rax:rdx).
type ReturnClass uint8

const (
	ReturnVoid ReturnClass = iota
	ReturnInt
	ReturnPointer
	ReturnOther
)

// Return is the type a function returns.
type Return struct {
	Class ReturnClass
	// C spells the type for a C declaration that needs no header beyond
	// linux/types.h: typedefs resolved to their base type, enums to
	// their underlying integer type, a pointer to anything but a named
	// struct or union, a base type or void spelled void *.
	C string
	// Declared is the type as the function declares it (typedefs kept),
	// for messages.
	Declared string
	Size     int64
	// RegArgs: the function takes at most six arguments, each an integer
	// or a pointer, not variadic, and returns nothing, an integer or a
	// pointer: every argument is in a register at its entry and the value
	// in rax, so a trampoline may call its body from a frame of its own
	// (weaver/runtime's direct after hooks).
	RegArgs bool
}

// ReturnType reads the return type of function fi from its DWARF: the
// DW_AT_type of its subprogram, or of the abstract origin or declaration
// it refers to.
func (x *Index) ReturnType(fi FuncInfo) (ret Return, err error) {
	defer mmapfile.Catch(&err, debug.SetPanicOnFault(true))
	if err := x.needImage(); err != nil {
		return Return{}, err
	}
	if x, err = x.use(funcAtSecs); err != nil {
		return Return{}, err
	}
	if fi.index < 0 || fi.index >= len(x.t.Funcs) {
		return Return{}, fmt.Errorf("%s: not a function of this index", fi.Name)
	}
	f := x.t.Funcs[fi.index]
	u := x.t.Units[f.Unit]
	d, err := x.img.UnitDWARF(u.Off, u.End)
	if err != nil {
		return Return{}, err
	}
	r := d.Reader()
	off := dwarf.Offset(f.DIE - u.Off)
	for hops := 0; ; hops++ {
		r.Seek(off)
		e, err := r.Next()
		if err != nil || e == nil {
			return Return{}, fmt.Errorf("reading the DWARF of %s at %#x: %v", fi.Name, off, err)
		}
		next, more := e.Val(dwarf.AttrAbstractOrigin).(dwarf.Offset)
		if !more {
			next, more = e.Val(dwarf.AttrSpecification).(dwarf.Offset)
		}
		more = more && hops < 4
		ret, found := Return{Class: ReturnVoid, C: "void", Declared: "void"}, !more
		tn := dwtype.NewNamer(d)
		if t, ok := e.Val(dwarf.AttrType).(dwarf.Offset); ok {
			ret, found = classify(tn, t), true
		}
		if found {
			ret.RegArgs = ret.Class != ReturnOther && regArgs(r, e, tn)
			return ret, nil
		}
		off = next
	}
}

// regArgs says whether the subprogram e, just read by r, declares at
// most six parameters, each an integer or a pointer, and no "...".
func regArgs(r *dwarf.Reader, e *dwarf.Entry, tn *dwtype.Namer) bool {
	if !e.Children {
		return true
	}
	n := 0
	for {
		c, err := r.Next()
		if err != nil || c == nil {
			return false
		}
		switch c.Tag {
		case 0:
			return n <= 6
		case dwarf.TagUnspecifiedParameters:
			return false
		case dwarf.TagFormalParameter:
			n++
			t, ok := c.Val(dwarf.AttrType).(dwarf.Offset)
			if !ok {
				return false
			}
			if k := classify(tn, t); k.Class != ReturnInt && k.Class != ReturnPointer {
				return false
			}
		}
		if c.Children {
			r.SkipChildren()
		}
	}
}

// classify works out the class and C spelling of type t.
func classify(tn *dwtype.Namer, t dwarf.Offset) Return {
	ret := Return{Class: ReturnOther, Declared: tn.Name(t), Size: tn.Size(t)}
	e := stripped(tn, t, true)
	if e == nil {
		return ret
	}
	switch e.Tag {
	case dwarf.TagBaseType:
		enc, _ := e.Val(dwarf.AttrEncoding).(int64)
		name, _ := e.Val(dwarf.AttrName).(string)
		if isIntEncoding(enc) && ret.Size >= 1 && ret.Size <= 8 && name != "" {
			ret.Class, ret.C = ReturnInt, name
		}
	case dwarf.TagEnumerationType:
		if ret.Size < 1 || ret.Size > 8 {
			return ret
		}
		ret.Class, ret.C = ReturnInt, map[int64]string{1: "unsigned char", 2: "unsigned short", 4: "int", 8: "long"}[ret.Size]
		if u, ok := e.Val(dwarf.AttrType).(dwarf.Offset); ok {
			if b := stripped(tn, u, true); b != nil && b.Tag == dwarf.TagBaseType {
				if name, _ := b.Val(dwarf.AttrName).(string); name != "" {
					ret.C = name
				}
			}
		}
	case dwarf.TagPointerType:
		ret.Class, ret.C = ReturnPointer, "void *"
		sub, ok := e.Val(dwarf.AttrType).(dwarf.Offset)
		if !ok {
			return ret
		}
		konst := ""
		if q := stripped(tn, sub, false); q != nil && q.Tag == dwarf.TagConstType {
			konst = "const "
		}
		p := stripped(tn, sub, true)
		if p == nil {
			return ret
		}
		name, _ := p.Val(dwarf.AttrName).(string)
		switch {
		case name == "":
		case p.Tag == dwarf.TagStructType:
			ret.C = konst + "struct " + name + " *"
		case p.Tag == dwarf.TagUnionType:
			ret.C = konst + "union " + name + " *"
		case p.Tag == dwarf.TagBaseType:
			ret.C = konst + name + " *"
		}
	}
	return ret
}

// stripped follows typedefs (and, if quals, const, volatile, restrict
// and _Atomic) from t to the type underneath; nil if t is unreadable or
// void.
func stripped(tn *dwtype.Namer, t dwarf.Offset, quals bool) *dwarf.Entry {
	for i := 0; i < 16; i++ {
		e := tn.Entry(t)
		if e == nil {
			return nil
		}
		switch e.Tag {
		case dwarf.TagTypedef:
		case dwarf.TagConstType, dwarf.TagVolatileType, dwarf.TagRestrictType, dwarf.TagAtomicType:
			if !quals {
				return e
			}
		default:
			return e
		}
		sub, ok := e.Val(dwarf.AttrType).(dwarf.Offset)
		if !ok {
			return nil
		}
		t = sub
	}
	return nil
}

// isIntEncoding: DW_ATE_boolean, signed, signed_char, unsigned,
// unsigned_char, UTF.
func isIntEncoding(enc int64) bool {
	switch enc {
	case 0x02, 0x05, 0x06, 0x07, 0x08, 0x10:
		return true
	}
	return false
}

// String is the declared type with its class, for messages.
func (r Return) String() string {
	if r.Class == ReturnVoid {
		return "void"
	}
	return strings.TrimSpace(r.Declared)
}
