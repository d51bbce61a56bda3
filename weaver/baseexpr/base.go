package baseexpr

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/klasy/klasy/dwarfmap/dwtype"
)

// CType is a C type as DWARF names it (dwtype.Namer), as much of it as
// working out addresses needs: pointers to, or arrays of, a struct,
// union or typedef the layouts know, or something else.
type CType struct {
	base string  // "struct sk_buff", "union u", a typedef name; "" if not known
	ptr  int     // levels of pointer
	dims []int64 // array dimensions, outermost first
}

// ParseCType reads a type name: "const struct sk_buff *",
// "struct list_head", "skb_frag_t [17]", "struct page *[4]".
func ParseCType(s string) CType {
	var t CType
	if i := strings.IndexByte(s, '['); i >= 0 {
		// An array of pointers is spelled "T *[4]" or "T (*)[4]" (a
		// pointer to an array): only the first is kept.
		if strings.Contains(s[:i], "(") {
			return CType{}
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

func (t CType) String() string {
	s := t.base + strings.Repeat("*", t.ptr)
	for _, d := range t.dims {
		s += fmt.Sprintf("[%d]", d)
	}
	return s
}

// elem is the type an array's element or a pointer's target has.
func (t CType) elem() (CType, bool) {
	switch {
	case len(t.dims) > 0:
		return CType{base: t.base, ptr: t.ptr, dims: t.dims[1:]}, true
	case t.ptr > 0:
		return CType{base: t.base, ptr: t.ptr - 1}, true
	}
	return CType{}, false
}

// SVKind is where the dynamic part of a symbolic value comes from.
type SVKind uint8

const (
	SVConst   SVKind = iota // nothing: the value is off
	SVVar                   // the value of variable name
	SVVarAddr               // the address of variable name (in memory)
	SVLoad                  // the size bytes at *sub
	SVCall                  // the result of a call, only known at the access
)

// SVal is a value worked out from a base expression: its dynamic part
// plus a constant byte offset.
type SVal struct {
	Kind SVKind
	Name string
	Sub  *SVal
	Size int
	Off  int64
}

func (v SVal) String() string {
	var s string
	switch v.Kind {
	case SVConst:
		return fmt.Sprint(v.Off)
	case SVVar:
		s = v.Name
	case SVVarAddr:
		s = "&" + v.Name
	case SVLoad:
		s = fmt.Sprintf("*%d(%s)", v.Size, v.Sub)
	case SVCall:
		s = v.Name
	}
	if v.Off != 0 {
		s += fmt.Sprintf("%+d", v.Off)
	}
	return s
}

// dyn is v without its constant offset.
func (v SVal) dyn() SVal {
	v.Off = 0
	return v
}

// Eval works out a base expression's value with the types that
// variables have at one place (varType) and the struct layouts
// (layout).
type Eval struct {
	VarType func(name string) (CType, error)
	Layout  func(name string) (*dwtype.Layout, error)
}

// Value is what e evaluates to, with its type (zero if not known).
func (ev *Eval) Value(e *Expr) (SVal, CType, error) {
	switch e.Kind {
	case Var:
		t, err := ev.VarType(e.Name)
		if err != nil {
			// The type matters only if a member of it is reached.
			t = CType{}
		}
		return SVal{Kind: SVVar, Name: e.Name}, t, nil
	case bNum:
		return SVal{Kind: SVConst, Off: e.n}, CType{}, nil
	case Call:
		return SVal{Kind: SVCall, Name: e.Name}, CType{}, nil
	case bAddr:
		a, t, err := ev.addr(e.sub)
		if err != nil {
			return SVal{}, CType{}, err
		}
		t.ptr++
		if len(t.dims) > 0 {
			t = CType{} // a pointer to an array: not followed
		}
		return a, t, nil
	case bArrow, bDot, bIndex, bDeref:
		a, t, err := ev.addr(e)
		if err != nil {
			return SVal{}, CType{}, err
		}
		if len(t.dims) > 0 {
			// An array decays to its first element's address.
			el, _ := t.elem()
			el.ptr++
			return a, el, nil
		}
		if t.ptr == 0 && t.base != "" && !isScalar(t.base) {
			if l, err := ev.Layout(t.base); err == nil && l != nil {
				return SVal{}, CType{}, fmt.Errorf("%s is a %s, not an address", e, t)
			}
		}
		return SVal{Kind: SVLoad, Sub: &a, Size: 8}, t, nil
	case bCast:
		v, _, err := ev.Value(e.sub)
		return v, CType{base: "char", ptr: 1}, err
	case bAddSub:
		if e.sub.Kind != bCast {
			return SVal{}, CType{}, fmt.Errorf("pointer arithmetic on %s", e.sub)
		}
		v, t, err := ev.Value(e.sub)
		if err != nil {
			return SVal{}, CType{}, err
		}
		v.Off += e.n
		return v, t, nil
	}
	return SVal{}, CType{}, fmt.Errorf("%s", e.Name)
}

func isScalar(base string) bool {
	switch base {
	case "char", "int", "long", "short", "unsigned", "signed", "_Bool", "void":
		return true
	}
	return strings.HasSuffix(base, "_t") && strings.HasPrefix(base, "u") // u32_t-like typedefs
}

// addr is the address of the object the lvalue e names, with its type.
func (ev *Eval) addr(e *Expr) (SVal, CType, error) {
	switch e.Kind {
	case Var:
		t, err := ev.VarType(e.Name)
		if err != nil {
			t = CType{}
		}
		return SVal{Kind: SVVarAddr, Name: e.Name}, t, nil
	case bDeref:
		v, t, err := ev.Value(e.sub)
		if err != nil {
			return SVal{}, CType{}, err
		}
		el, ok := t.elem()
		if !ok {
			el = CType{}
		}
		return v, el, nil
	case bArrow:
		v, t, err := ev.Value(e.sub)
		if err != nil {
			return SVal{}, CType{}, err
		}
		obj, ok := t.elem()
		if !ok || obj.base == "" || obj.ptr != 0 || len(obj.dims) != 0 {
			return SVal{}, CType{}, fmt.Errorf("the type of %s is not known here", e.sub)
		}
		return ev.members(v, obj, e.Name)
	case bDot:
		a, t, err := ev.addr(e.sub)
		if err != nil {
			return SVal{}, CType{}, err
		}
		if t.base == "" || t.ptr != 0 || len(t.dims) != 0 {
			return SVal{}, CType{}, fmt.Errorf("the type of %s is not known here", e.sub)
		}
		return ev.members(a, t, e.Name)
	case bIndex:
		if !e.constIdx {
			return SVal{}, CType{}, fmt.Errorf("%s has an index that is not a constant", e)
		}
		_, st, err := ev.Value(e.sub) // the type only
		var a SVal
		var el CType
		if err == nil && len(st.dims) == 0 && st.ptr > 0 {
			// A pointer indexed: its value.
			a, _, err = ev.Value(e.sub)
			el, _ = st.elem()
		} else {
			// An array indexed: its address, as value gives it.
			a, st, err = ev.Value(e.sub)
			el, _ = st.elem()
		}
		if err != nil {
			return SVal{}, CType{}, err
		}
		if e.n != 0 {
			size, err := ev.sizeOf(el)
			if err != nil {
				return SVal{}, CType{}, fmt.Errorf("%s: %v", e, err)
			}
			a.Off += e.n * size
		}
		return a, el, nil
	}
	return SVal{}, CType{}, fmt.Errorf("%s is not an object klasy can locate", e)
}

// members adds the offsets of path (a.b.c) in the struct t at a.
func (ev *Eval) members(a SVal, t CType, path string) (SVal, CType, error) {
	for _, name := range strings.Split(path, ".") {
		l, err := ev.Layout(t.base)
		if err != nil {
			return SVal{}, CType{}, err
		}
		m, ok := member(l, name)
		if !ok {
			return SVal{}, CType{}, fmt.Errorf("%s has no member %s", t.base, name)
		}
		a.Off += m.Offset
		t = ParseCType(m.Type)
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

func (ev *Eval) sizeOf(t CType) (int64, error) {
	if t.ptr > 0 && len(t.dims) == 0 {
		return 8, nil
	}
	el := CType{base: t.base, ptr: t.ptr}
	var size int64
	if el.ptr > 0 {
		size = 8
	} else {
		if el.base == "" {
			return 0, fmt.Errorf("the element size is not known")
		}
		l, err := ev.Layout(el.base)
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
