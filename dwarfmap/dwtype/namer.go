// Package dwtype reads C types from DWARF: their names as C declares
// them ("struct sock *", "const char *", "u32[4]"), their sizes, and the
// layouts of structs and unions (members, offsets, bitfields), as
// pahole prints them.
package dwtype

import (
	"debug/dwarf"
	"fmt"
	"strings"
)

// Namer spells the DWARF types of one debug/dwarf view the way C
// declares them ("struct sock *", "const char *", "u32[4]"), which is
// what a kernel developer writes in advice; delve's godwarf prints
// Go-like syntax. It caches what it has spelled; it is not safe for
// concurrent use.
type Namer struct {
	r     *dwarf.Reader
	names map[dwarf.Offset]string
	sizes map[dwarf.Offset]int64
}

// NewNamer returns a Namer of the types in d.
func NewNamer(d *dwarf.Data) *Namer {
	return &Namer{r: d.Reader(), names: map[dwarf.Offset]string{}, sizes: map[dwarf.Offset]int64{}}
}

// Entry returns the DIE at off, nil if there is none.
func (t *Namer) Entry(off dwarf.Offset) *dwarf.Entry {
	t.r.Seek(off)
	e, err := t.r.Next()
	if err != nil {
		return nil
	}
	return e
}

// Name returns the C spelling of the type at off.
func (t *Namer) Name(off dwarf.Offset) string {
	if n, ok := t.names[off]; ok {
		return n
	}
	t.names[off] = "?" // cycle guard
	n := t.spell(off, "")
	t.names[off] = n
	return n
}

// spell writes the declarator-aware spelling of type off around inner
// (the declarator so far, e.g. "*" or "[4]").
func (t *Namer) spell(off dwarf.Offset, inner string) string {
	join := func(base, decl string) string {
		if decl == "" {
			return base
		}
		if strings.HasPrefix(decl, "[") || strings.HasPrefix(decl, "(") {
			return base + decl
		}
		return base + " " + decl
	}
	e := t.Entry(off)
	if e == nil {
		return join("?", inner)
	}
	sub, hasSub := e.Val(dwarf.AttrType).(dwarf.Offset)
	name, _ := e.Val(dwarf.AttrName).(string)
	switch e.Tag {
	case dwarf.TagBaseType, dwarf.TagTypedef, dwarf.TagUnspecifiedType:
		return join(name, inner)
	case dwarf.TagStructType, dwarf.TagUnionType, dwarf.TagEnumerationType:
		kw := map[dwarf.Tag]string{dwarf.TagStructType: "struct", dwarf.TagUnionType: "union", dwarf.TagEnumerationType: "enum"}[e.Tag]
		if name == "" {
			name = "{...}"
		}
		return join(kw+" "+name, inner)
	case dwarf.TagPointerType:
		if !hasSub {
			return join("void", "*"+inner)
		}
		return t.spell(sub, "*"+inner)
	case dwarf.TagConstType, dwarf.TagVolatileType, dwarf.TagRestrictType, dwarf.TagAtomicType:
		q := map[dwarf.Tag]string{dwarf.TagConstType: "const", dwarf.TagVolatileType: "volatile", dwarf.TagRestrictType: "restrict", dwarf.TagAtomicType: "_Atomic"}[e.Tag]
		if !hasSub {
			return join("void", strings.TrimSpace(q+" "+inner))
		}
		if strings.HasPrefix(inner, "*") || inner == "" {
			// "const char *" reads better than "char const *".
			s := t.spell(sub, "")
			if inner == "" {
				return q + " " + s
			}
			if strings.HasPrefix(inner, "*") {
				return q + " " + join(s, inner)
			}
		}
		return t.spell(sub, q+" "+inner)
	case dwarf.TagArrayType:
		dims := ""
		if e.Children {
			for {
				c, err := t.r.Next()
				if err != nil || c == nil || c.Tag == 0 {
					break
				}
				if c.Tag != dwarf.TagSubrangeType {
					continue
				}
				if n, ok := c.Val(dwarf.AttrCount).(int64); ok {
					dims += fmt.Sprintf("[%d]", n)
				} else if ub, ok := c.Val(dwarf.AttrUpperBound).(int64); ok {
					dims += fmt.Sprintf("[%d]", ub+1)
				} else {
					dims += "[]"
				}
			}
		}
		if strings.HasPrefix(inner, "*") {
			inner = "(" + inner + ")"
		}
		if !hasSub {
			return join("?", inner+dims)
		}
		return t.spell(sub, inner+dims)
	case dwarf.TagSubroutineType:
		ret := "void"
		if hasSub {
			ret = t.Name(sub)
		}
		var args []string
		if e.Children {
			var params []dwarf.Offset
			for {
				c, err := t.r.Next()
				if err != nil || c == nil || c.Tag == 0 {
					break
				}
				if c.Tag == dwarf.TagFormalParameter {
					if o, ok := c.Val(dwarf.AttrType).(dwarf.Offset); ok {
						params = append(params, o)
					}
				} else if c.Tag == dwarf.TagUnspecifiedParameters {
					params = append(params, 0)
				}
			}
			for _, p := range params {
				if p == 0 {
					args = append(args, "...")
				} else {
					args = append(args, t.Name(p))
				}
			}
		}
		if len(args) == 0 {
			args = []string{"void"}
		}
		return ret + " (" + inner + ")(" + strings.Join(args, ", ") + ")"
	}
	return join(name, inner)
}

// Size returns the byte size of the type at off (0 if unknown).
func (t *Namer) Size(off dwarf.Offset) int64 {
	if s, ok := t.sizes[off]; ok {
		return s
	}
	t.sizes[off] = 0
	e := t.Entry(off)
	if e == nil {
		return 0
	}
	var s int64
	if bs, ok := e.Val(dwarf.AttrByteSize).(int64); ok {
		s = bs
	} else if sub, ok := e.Val(dwarf.AttrType).(dwarf.Offset); ok {
		switch e.Tag {
		case dwarf.TagTypedef, dwarf.TagConstType, dwarf.TagVolatileType, dwarf.TagRestrictType, dwarf.TagAtomicType:
			s = t.Size(sub)
		case dwarf.TagArrayType:
			n := int64(1)
			if e.Children {
				for {
					c, err := t.r.Next()
					if err != nil || c == nil || c.Tag == 0 {
						break
					}
					if k, ok := c.Val(dwarf.AttrCount).(int64); ok {
						n *= k
					} else if ub, ok := c.Val(dwarf.AttrUpperBound).(int64); ok {
						n *= ub + 1
					} else if c.Tag == dwarf.TagSubrangeType {
						n = 0
					}
				}
			}
			s = n * t.Size(sub)
		}
	} else if e.Tag == dwarf.TagPointerType {
		s = 8
	}
	t.sizes[off] = s
	return s
}
