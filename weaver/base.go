package weaver

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/klasy/klasy/dwarfmap/dwtype"
)

// ctype is a C type as DWARF names it (dwtype.Namer), as much of it as
// working out addresses needs: pointers to, or arrays of, a struct,
// union or typedef the layouts know, or something else.
type ctype struct {
	base string  // "struct sk_buff", "union u", a typedef name; "" if not known
	ptr  int     // levels of pointer
	dims []int64 // array dimensions, outermost first
}

// parseCType reads a type name: "const struct sk_buff *",
// "struct list_head", "skb_frag_t [17]", "struct page *[4]".
func parseCType(s string) ctype {
	var t ctype
	if i := strings.IndexByte(s, '['); i >= 0 {
		// An array of pointers is spelled "T *[4]" or "T (*)[4]" (a
		// pointer to an array): only the first is kept.
		if strings.Contains(s[:i], "(") {
			return ctype{}
		}
		for _, d := range strings.Split(strings.TrimSuffix(s[i+1:], "]"), "][") {
			n, err := strconv.ParseInt(d, 10, 64)
			if err != nil {
				n = 0 // a flexible array
			}
			t.dims = append(t.dims, n)
		}
		s = s[:i]
	}
	var words []string
	for _, w := range strings.Fields(strings.ReplaceAll(s, "*", " * ")) {
		switch w {
		case "const", "volatile", "restrict", "_Atomic":
		case "*":
			t.ptr++
		default:
			words = append(words, w)
		}
	}
	if len(words) == 2 && (words[0] == "struct" || words[0] == "union") && words[1] != "{...}" {
		t.base = words[0] + " " + words[1]
	} else if len(words) == 1 {
		t.base = words[0]
	}
	return t
}

func (t ctype) String() string {
	s := t.base + strings.Repeat("*", t.ptr)
	for _, d := range t.dims {
		s += fmt.Sprintf("[%d]", d)
	}
	return s
}

// elem is the type an array's element or a pointer's target has.
func (t ctype) elem() (ctype, bool) {
	switch {
	case len(t.dims) > 0:
		return ctype{base: t.base, ptr: t.ptr, dims: t.dims[1:]}, true
	case t.ptr > 0:
		return ctype{base: t.base, ptr: t.ptr - 1}, true
	}
	return ctype{}, false
}

// svKind is where the dynamic part of a symbolic value comes from.
type svKind uint8

const (
	svConst   svKind = iota // nothing: the value is off
	svVar                   // the value of variable name
	svVarAddr               // the address of variable name (in memory)
	svLoad                  // the size bytes at *sub
	svCall                  // the result of a call, only known at the access
)

// sval is a value worked out from a base expression: its dynamic part
// plus a constant byte offset.
type sval struct {
	kind svKind
	name string
	sub  *sval
	size int
	off  int64
}

func (v sval) String() string {
	var s string
	switch v.kind {
	case svConst:
		return fmt.Sprint(v.off)
	case svVar:
		s = v.name
	case svVarAddr:
		s = "&" + v.name
	case svLoad:
		s = fmt.Sprintf("*%d(%s)", v.size, v.sub)
	case svCall:
		s = v.name
	}
	if v.off != 0 {
		s += fmt.Sprintf("%+d", v.off)
	}
	return s
}

// dyn is v without its constant offset.
func (v sval) dyn() sval {
	v.off = 0
	return v
}

// baseEval works out a base expression's value with the types that
// variables have at one place (varType) and the struct layouts
// (layout).
type baseEval struct {
	varType func(name string) (ctype, error)
	layout  func(name string) (*dwtype.Layout, error)
}

// value is what e evaluates to, with its type (zero if not known).
func (ev *baseEval) value(e *bexpr) (sval, ctype, error) {
	switch e.kind {
	case bVar:
		t, err := ev.varType(e.name)
		if err != nil {
			// The type matters only if a member of it is reached.
			t = ctype{}
		}
		return sval{kind: svVar, name: e.name}, t, nil
	case bNum:
		return sval{kind: svConst, off: e.n}, ctype{}, nil
	case bCall:
		return sval{kind: svCall, name: e.name}, ctype{}, nil
	case bAddr:
		a, t, err := ev.addr(e.sub)
		if err != nil {
			return sval{}, ctype{}, err
		}
		t.ptr++
		if len(t.dims) > 0 {
			t = ctype{} // a pointer to an array: not followed
		}
		return a, t, nil
	case bArrow, bDot, bIndex, bDeref:
		a, t, err := ev.addr(e)
		if err != nil {
			return sval{}, ctype{}, err
		}
		if len(t.dims) > 0 {
			// An array decays to its first element's address.
			el, _ := t.elem()
			el.ptr++
			return a, el, nil
		}
		if t.ptr == 0 && t.base != "" && !isScalar(t.base) {
			if l, err := ev.layout(t.base); err == nil && l != nil {
				return sval{}, ctype{}, fmt.Errorf("%s is a %s, not an address", e, t)
			}
		}
		return sval{kind: svLoad, sub: &a, size: 8}, t, nil
	case bCast:
		v, _, err := ev.value(e.sub)
		return v, ctype{base: "char", ptr: 1}, err
	case bAddSub:
		if e.sub.kind != bCast {
			return sval{}, ctype{}, fmt.Errorf("pointer arithmetic on %s", e.sub)
		}
		v, t, err := ev.value(e.sub)
		if err != nil {
			return sval{}, ctype{}, err
		}
		v.off += e.n
		return v, t, nil
	}
	return sval{}, ctype{}, fmt.Errorf("%s", e.name)
}

func isScalar(base string) bool {
	switch base {
	case "char", "int", "long", "short", "unsigned", "signed", "_Bool", "void":
		return true
	}
	return strings.HasSuffix(base, "_t") && strings.HasPrefix(base, "u") // u32_t-like typedefs
}

// addr is the address of the object the lvalue e names, with its type.
func (ev *baseEval) addr(e *bexpr) (sval, ctype, error) {
	switch e.kind {
	case bVar:
		t, err := ev.varType(e.name)
		if err != nil {
			t = ctype{}
		}
		return sval{kind: svVarAddr, name: e.name}, t, nil
	case bDeref:
		v, t, err := ev.value(e.sub)
		if err != nil {
			return sval{}, ctype{}, err
		}
		el, ok := t.elem()
		if !ok {
			el = ctype{}
		}
		return v, el, nil
	case bArrow:
		v, t, err := ev.value(e.sub)
		if err != nil {
			return sval{}, ctype{}, err
		}
		obj, ok := t.elem()
		if !ok || obj.base == "" || obj.ptr != 0 || len(obj.dims) != 0 {
			return sval{}, ctype{}, fmt.Errorf("the type of %s is not known here", e.sub)
		}
		return ev.members(v, obj, e.name)
	case bDot:
		a, t, err := ev.addr(e.sub)
		if err != nil {
			return sval{}, ctype{}, err
		}
		if t.base == "" || t.ptr != 0 || len(t.dims) != 0 {
			return sval{}, ctype{}, fmt.Errorf("the type of %s is not known here", e.sub)
		}
		return ev.members(a, t, e.name)
	case bIndex:
		if !e.constIdx {
			return sval{}, ctype{}, fmt.Errorf("%s has an index that is not a constant", e)
		}
		_, st, err := ev.value(e.sub) // the type only
		var a sval
		var el ctype
		if err == nil && len(st.dims) == 0 && st.ptr > 0 {
			// A pointer indexed: its value.
			a, _, err = ev.value(e.sub)
			el, _ = st.elem()
		} else {
			// An array indexed: its address, as value gives it.
			a, st, err = ev.value(e.sub)
			el, _ = st.elem()
		}
		if err != nil {
			return sval{}, ctype{}, err
		}
		if e.n != 0 {
			size, err := ev.sizeOf(el)
			if err != nil {
				return sval{}, ctype{}, fmt.Errorf("%s: %v", e, err)
			}
			a.off += e.n * size
		}
		return a, el, nil
	}
	return sval{}, ctype{}, fmt.Errorf("%s is not an object klasy can locate", e)
}

// members adds the offsets of path (a.b.c) in the struct t at a.
func (ev *baseEval) members(a sval, t ctype, path string) (sval, ctype, error) {
	for _, name := range strings.Split(path, ".") {
		l, err := ev.layout(t.base)
		if err != nil {
			return sval{}, ctype{}, err
		}
		m, ok := member(l, name)
		if !ok {
			return sval{}, ctype{}, fmt.Errorf("%s has no member %s", t.base, name)
		}
		a.off += m.Offset
		t = parseCType(m.Type)
	}
	return a, t, nil
}

// member finds a member by name, also in anonymous members.
func member(l *dwtype.Layout, name string) (dwtype.Member, bool) {
	for _, m := range l.Members {
		if m.Name == name {
			return m, true
		}
	}
	return dwtype.Member{}, false
}

func (ev *baseEval) sizeOf(t ctype) (int64, error) {
	if t.ptr > 0 && len(t.dims) == 0 {
		return 8, nil
	}
	el := ctype{base: t.base, ptr: t.ptr}
	var size int64
	if el.ptr > 0 {
		size = 8
	} else {
		if el.base == "" {
			return 0, fmt.Errorf("the element size is not known")
		}
		l, err := ev.layout(el.base)
		if err != nil {
			return 0, err
		}
		size = l.Size
	}
	for _, d := range t.dims {
		size *= d
	}
	return size, nil
}
