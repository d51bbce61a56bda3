package dwtype

import (
	"debug/dwarf"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/go-delve/delve/pkg/dwarf/op"

	"github.com/klasy/klasy/internal/bytereader"
)

// Member is one member of a struct or union layout. Members of anonymous
// structs and unions are listed after their container with Depth+1 and
// offsets from the start of the outermost type.
type Member struct {
	Name      string `json:"name"` // "" for an anonymous struct/union member
	Type      string `json:"type"`
	Offset    int64  `json:"offset"` // bytes
	Size      int64  `json:"size"`   // bytes (of the storage unit for bitfields)
	BitOffset int64  `json:"bit_offset,omitempty"`
	BitSize   int64  `json:"bit_size,omitempty"` // 0 unless a bitfield
	Depth     int    `json:"depth"`
}

// Layout is a struct or union layout.
type Layout struct {
	Kind    string   `json:"kind"` // struct or union
	Name    string   `json:"name"`
	Size    int64    `json:"size"`
	Typedef string   `json:"typedef_of,omitempty"` // set when Name is a typedef
	File    string   `json:"file,omitempty"`
	Line    int      `json:"line,omitempty"`
	Members []Member `json:"members"`
}

// ErrNoDIE is returned (wrapped) by LayoutOf when off names no DIE.
var ErrNoDIE = errors.New("no DIE")

// LayoutOf returns the layout of the struct or union at off in d, or of
// the struct or union a typedef at off names (through typedefs, const and
// volatile).
func LayoutOf(d *dwarf.Data, off dwarf.Offset) (*Layout, error) {
	tn := NewNamer(d)
	e := tn.Entry(off)
	if e == nil {
		return nil, fmt.Errorf("%w at %#x", ErrNoDIE, off)
	}
	name, _ := e.Val(dwarf.AttrName).(string)
	size, _ := e.Val(dwarf.AttrByteSize).(int64)
	l := &Layout{Kind: "struct", Name: name, Size: size}
	switch e.Tag {
	case dwarf.TagUnionType:
		l.Kind = "union"
	case dwarf.TagTypedef:
		// Follow typedefs and qualifiers to the struct or union.
		for hops := 0; ; hops++ {
			t, ok := e.Val(dwarf.AttrType).(dwarf.Offset)
			if !ok || hops > 8 {
				return nil, fmt.Errorf("%s is a typedef of void, not of a struct or union", l.Name)
			}
			off, e = t, tn.Entry(t)
			if e == nil {
				return nil, fmt.Errorf("typedef %s: no DIE at %#x", l.Name, t)
			}
			if e.Tag == dwarf.TagStructType || e.Tag == dwarf.TagUnionType {
				break
			}
			if e.Tag != dwarf.TagTypedef && e.Tag != dwarf.TagConstType && e.Tag != dwarf.TagVolatileType {
				return nil, fmt.Errorf("%s is a typedef of %s, not of a struct or union", l.Name, tn.Name(off))
			}
		}
		l.Size, _ = e.Val(dwarf.AttrByteSize).(int64)
		if e.Tag == dwarf.TagUnionType {
			l.Kind = "union"
		}
		if tag, _ := e.Val(dwarf.AttrName).(string); tag != "" {
			l.Typedef = l.Kind + " " + tag
		} else {
			l.Typedef = l.Kind + " {...}"
		}
	case dwarf.TagStructType:
	default:
		return nil, fmt.Errorf("%s at %#x is a %s, not a struct, union or typedef", l.Name, off, e.Tag)
	}
	if ln, ok := e.Val(dwarf.AttrDeclLine).(int64); ok {
		l.Line = int(ln)
	}
	if fi, ok := e.Val(dwarf.AttrDeclFile).(int64); ok {
		if cu, _ := d.Reader().Next(); cu != nil {
			if lr, err := d.LineReader(cu); err == nil && lr != nil {
				if fs := lr.Files(); int(fi) < len(fs) && fs[fi] != nil {
					l.File = fs[fi].Name
				}
			}
		}
	}
	var err error
	l.Members, err = members(tn, off, 0, 0)
	return l, err
}

// members lists the members of the struct/union at off, recursing into
// anonymous ones.
func members(tn *Namer, off dwarf.Offset, base int64, depth int) ([]Member, error) {
	if depth > 16 {
		return nil, fmt.Errorf("anonymous members nested too deep at %#x", off)
	}
	e := tn.Entry(off)
	if e == nil || !e.Children {
		return nil, nil
	}
	var kids []*dwarf.Entry
	for {
		c, err := tn.r.Next()
		if err != nil {
			return nil, err
		}
		if c == nil || c.Tag == 0 {
			break
		}
		if c.Tag == dwarf.TagMember {
			kids = append(kids, c)
		}
		if c.Children {
			tn.r.SkipChildren()
		}
	}
	var out []Member
	for _, c := range kids {
		m := Member{Depth: depth}
		m.Name, _ = c.Val(dwarf.AttrName).(string)
		typ, _ := c.Val(dwarf.AttrType).(dwarf.Offset)
		m.Type = tn.Name(typ)
		m.Size = tn.Size(typ)
		var loc int64
		switch v := c.Val(dwarf.AttrDataMemberLoc).(type) {
		case int64:
			loc = v
		case []byte:
			// DW_OP_plus_uconst N, as older compilers emit.
			if len(v) > 1 && op.Opcode(v[0]) == op.DW_OP_plus_uconst {
				loc = int64(bytereader.New(v[1:]).ULEB128())
			}
		}
		m.Offset = base + loc
		if bs, ok := c.Val(dwarf.AttrBitSize).(int64); ok {
			m.BitSize = bs
			if dbo, ok := c.Val(dwarf.AttrDataBitOffset).(int64); ok {
				// DWARF 4+: bits from the start of the containing struct.
				m.Offset = base + dbo/8
				m.BitOffset = dbo % 8
			} else if bo, ok := c.Val(dwarf.AttrBitOffset).(int64); ok {
				// DWARF 2/3: from the most significant bit of the storage
				// unit at data_member_location; little-endian x86 here.
				unit, _ := c.Val(dwarf.AttrByteSize).(int64)
				if unit == 0 {
					unit = m.Size
				}
				dbo := loc*8 + unit*8 - bo - bs
				m.Offset = base + dbo/8
				m.BitOffset = dbo % 8
			}
		}
		out = append(out, m)
		if m.Name == "" {
			if te := tn.Entry(typ); te != nil && (te.Tag == dwarf.TagStructType || te.Tag == dwarf.TagUnionType) {
				sub, err := members(tn, typ, m.Offset, depth+1)
				if err != nil {
					return nil, err
				}
				out = append(out, sub...)
			}
		}
	}
	return out, nil
}

// Print writes the layout like pahole: type, name, offset and size.
func (l *Layout) Print(w io.Writer) {
	if l.Typedef != "" {
		fmt.Fprintf(w, "typedef %s {\t/* %s: size %d", l.Typedef, l.Name, l.Size)
	} else {
		fmt.Fprintf(w, "%s %s {\t/* size %d", l.Kind, l.Name, l.Size)
	}
	if l.File != "" {
		fmt.Fprintf(w, ", %s:%d", l.File, l.Line)
	}
	fmt.Fprintln(w, " */")
	for _, m := range l.Members {
		ind := strings.Repeat("\t", m.Depth+1)
		name := m.Name
		if name == "" {
			name = "<anonymous>"
		}
		if m.BitSize != 0 {
			fmt.Fprintf(w, "%s%s:%d;\t/* %d:%d %d */\n", ind, Declare(m.Type, name), m.BitSize, m.Offset, m.BitOffset, m.Size)
		} else {
			fmt.Fprintf(w, "%s%s;\t/* %d %d */\n", ind, Declare(m.Type, name), m.Offset, m.Size)
		}
	}
	if l.Typedef != "" {
		fmt.Fprintf(w, "} %s;\n", l.Name)
		return
	}
	fmt.Fprintln(w, "};")
}

// Declare writes a C declaration of name with the type spelled typ:
// "char[48]" and "cb" give "char cb[48]", "void (*)(int)" and "fn" give
// "void (*fn)(int)", "struct sock *" and "sk" give "struct sock *sk".
func Declare(typ, name string) string {
	if i := strings.Index(typ, "(*"); i >= 0 {
		j := i + 2
		for j < len(typ) && typ[j] == '*' {
			j++
		}
		return typ[:j] + name + typ[j:]
	}
	if i := strings.IndexByte(typ, '['); i >= 0 {
		return strings.TrimRight(typ[:i], " ") + " " + name + typ[i:]
	}
	if strings.HasSuffix(typ, "*") {
		return typ + name
	}
	return typ + " " + name
}
