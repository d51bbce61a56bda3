package dwarfmap

import (
	"debug/dwarf"
	"fmt"
	"io"
	"sort"
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

// Struct returns the layout of the struct or union called name ("sk_buff",
// "struct sk_buff" or "union ...").
func (x *Index) Struct(name string) (l *Layout, err error) {
	defer func() {
		if r := recover(); r != nil {
			l, err = nil, fmt.Errorf("malformed debug info for %s: %v", name, r)
		}
	}()
	if err := x.needImage(); err != nil {
		return nil, err
	}
	x, err = x.use(structSecs)
	if err != nil {
		return nil, err
	}
	name = strings.TrimSpace(name)
	want := uint32(0)
	if n, ok := strings.CutPrefix(name, "struct "); ok {
		name, want = strings.TrimSpace(n), KindStruct
	} else if n, ok := strings.CutPrefix(name, "union "); ok {
		name, want = strings.TrimSpace(n), KindUnion
	}
	i := sort.Search(len(x.structs), func(i int) bool { return x.str(x.structs[i].Name) >= name })
	var typedef *Struct
	for ; i < len(x.structs) && x.str(x.structs[i].Name) == name; i++ {
		s := x.structs[i]
		if s.Kind == KindTypedef {
			if want == 0 {
				typedef = &s
			}
			continue
		}
		if want != 0 && s.Kind != want {
			continue
		}
		return x.layout(s)
	}
	if typedef != nil {
		return x.layout(*typedef)
	}
	return nil, fmt.Errorf("no struct or union %q in the debug info", name)
}

func (x *Index) layout(s Struct) (*Layout, error) {
	u := x.units[s.Unit]
	d, err := x.img.UnitDWARF(u.Off, u.End)
	if err != nil {
		return nil, err
	}
	tn := newTypeNamer(d)
	off := dwarf.Offset(s.DIE - u.Off)
	e := tn.entry(off)
	if e == nil {
		return nil, fmt.Errorf("struct %s: no DIE at %#x", x.str(s.Name), s.DIE)
	}
	l := &Layout{Kind: "struct", Name: x.str(s.Name), Size: int64(s.Size)}
	if s.Kind == KindTypedef {
		// Follow typedefs and qualifiers to the struct or union.
		for hops := 0; ; hops++ {
			t, ok := e.Val(dwarf.AttrType).(dwarf.Offset)
			if !ok || hops > 8 {
				return nil, fmt.Errorf("%s is a typedef of void, not of a struct or union", l.Name)
			}
			off, e = t, tn.entry(t)
			if e == nil {
				return nil, fmt.Errorf("typedef %s: no DIE at %#x", l.Name, t)
			}
			if e.Tag == dwarf.TagStructType || e.Tag == dwarf.TagUnionType {
				break
			}
			if e.Tag != dwarf.TagTypedef && e.Tag != dwarf.TagConstType && e.Tag != dwarf.TagVolatileType {
				return nil, fmt.Errorf("%s is a typedef of %s, not of a struct or union", l.Name, tn.name(off))
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
	} else if s.Kind == KindUnion {
		l.Kind = "union"
	}
	if ln, ok := e.Val(dwarf.AttrDeclLine).(int64); ok {
		l.Line = int(ln)
	}
	if fi, ok := e.Val(dwarf.AttrDeclFile).(int64); ok {
		if lr, err := d.LineReader(x.unitEntry(d)); err == nil && lr != nil {
			if fs := lr.Files(); int(fi) < len(fs) && fs[fi] != nil {
				l.File = fs[fi].Name
			}
		}
	}
	l.Members, err = members(tn, off, 0, 0)
	return l, err
}

func (x *Index) unitEntry(d *dwarf.Data) *dwarf.Entry {
	r := d.Reader()
	e, _ := r.Next()
	return e
}

// members lists the members of the struct/union at off, recursing into
// anonymous ones.
func members(tn *typeNamer, off dwarf.Offset, base int64, depth int) ([]Member, error) {
	if depth > 16 {
		return nil, fmt.Errorf("anonymous members nested too deep at %#x", off)
	}
	e := tn.entry(off)
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
		m.Type = tn.name(typ)
		m.Size = tn.size(typ)
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
			if te := tn.entry(typ); te != nil && (te.Tag == dwarf.TagStructType || te.Tag == dwarf.TagUnionType) {
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
