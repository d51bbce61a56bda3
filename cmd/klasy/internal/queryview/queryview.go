// Package queryview prints the answers of klasy's queries of a kernel
// image (klasy lines, vars and funcs) and of a binary's accesses to
// struct members (klasy accesses): a table, or one JSON object per row
// with addresses as hex strings.
package queryview

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/klasy/klasy/accessinfer"
	"github.com/klasy/klasy/debugklasy"
	"github.com/klasy/klasy/dwarfmap"
	"github.com/klasy/klasy/dwarfmap/dwtype"
)

// Lines prints the code of source lines: file:line, function, addresses.
func Lines(w io.Writer, lines []dwarfmap.Line, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		for _, l := range lines {
			type out struct {
				dwarfmap.Line
				Addrs []string `json:"addrs"`
			}
			if err := enc.Encode(out{l, hexAddrs(l.Addrs)}); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	for _, l := range lines {
		note := ""
		if l.FallbackFor != 0 {
			note = fmt.Sprintf("  (stands in for line %d, %s advice)", l.FallbackFor, l.Fallback)
		}
		if l.Inlined != "" {
			note += "  (inlined " + l.Inlined + ")"
		}
		fmt.Fprintf(tw, "%s:%d\t%s\t%s%s\n", l.File, l.Line, l.Function, strings.Join(hexAddrs(l.Addrs), " "), note)
	}
	return tw.Flush()
}

// Vars prints the variables at addresses of x: under each address its
// function+offset, a row per variable with its kind, declaration and
// location.
func Vars(w io.Writer, x *dwarfmap.Index, vars []dwarfmap.Var, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		for _, v := range vars {
			fn := ""
			if f, ok := x.FuncAt(v.Addr); ok {
				fn = f.Name
			}
			type out struct {
				Addr     string `json:"addr"`
				Function string `json:"function"`
				dwarfmap.Var
			}
			if err := enc.Encode(out{fmt.Sprintf("%#x", v.Addr), fn, v}); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	var last uint64
	for i, v := range vars {
		if i == 0 || v.Addr != last {
			f, _ := x.FuncAt(v.Addr)
			where := fmt.Sprintf("%s+%#x", f.Name, v.Addr-f.Entry)
			if v.Addr < f.Entry {
				where = fmt.Sprintf("%s-%#x", f.Name, f.Entry-v.Addr) // a .cold part
			}
			note := ""
			if v.FallbackFor != 0 {
				note = fmt.Sprintf("  (line %d has no code: line %d, in the same basic block, stands in)", v.FallbackFor, v.Line)
			}
			fmt.Fprintf(tw, "@%#x <%s>%s\n", v.Addr, where, note)
			last = v.Addr
		}
		scope := ""
		if strings.HasPrefix(v.Scope, "inline ") {
			scope = "  [" + v.Scope + "]"
		}
		fmt.Fprintf(tw, "\t%s\t%s\t%s%s\n", v.Kind, dwtype.Declare(v.Type, v.Name), v.Location, scope)
	}
	return tw.Flush()
}

// Funcs prints functions: name, linkage, file:line, address ranges and
// inlined copies.
func Funcs(w io.Writer, fs []dwarfmap.FuncInfo, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		for _, f := range fs {
			type out struct {
				dwarfmap.FuncInfo
				Ranges [][2]string `json:"ranges"`
			}
			if err := enc.Encode(out{f, hexRanges(f.Ranges)}); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	for _, f := range fs {
		var rs []string
		for _, r := range f.Ranges {
			rs = append(rs, fmt.Sprintf("%#x-%#x", r[0], r[1]))
		}
		kind := "static"
		if f.External {
			kind = "global"
		}
		if f.InlineOnly {
			kind, rs = "inline only", nil
		}
		inl := ""
		if f.Inlined > 0 {
			inl = fmt.Sprintf("%d inlined", f.Inlined)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s:%d\t%s\t%s\n", f.Name, kind, f.File, f.Line, strings.Join(rs, ","), inl)
	}
	return tw.Flush()
}

func hexAddrs(as []uint64) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = fmt.Sprintf("%#x", a)
	}
	return out
}

func hexRanges(rs [][2]uint64) [][2]string {
	out := make([][2]string, len(rs))
	for i, r := range rs {
		out[i] = [2]string{fmt.Sprintf("%#x", r[0]), fmt.Sprintf("%#x", r[1])}
	}
	return out
}

// Inlines prints the inlined copies of the functions fs (of pattern), in
// x: name, caller, call site, address ranges.
func Inlines(w io.Writer, x *dwarfmap.Index, fs []dwarfmap.FuncInfo, pattern string, asJSON bool) error {
	enc := json.NewEncoder(w)
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	seen := map[string]bool{}
	n := 0
	for _, f := range fs {
		if seen[f.Name] {
			continue
		}
		seen[f.Name] = true
		for _, in := range x.Inlines(f.Name) {
			n++
			if asJSON {
				type out struct {
					dwarfmap.InlineInfo
					Ranges [][2]string `json:"ranges"`
				}
				if err := enc.Encode(out{in, hexRanges(in.Ranges)}); err != nil {
					return err
				}
				continue
			}
			var rs []string
			for _, r := range in.Ranges {
				rs = append(rs, fmt.Sprintf("%#x-%#x", r[0], r[1]))
			}
			fmt.Fprintf(tw, "%s\tin %s\t%s:%d\t%s\n", in.Name, in.Caller, in.CallFile, in.CallLine, strings.Join(rs, ","))
		}
	}
	if n == 0 {
		return fmt.Errorf("no inlined copies of the functions matching %q", pattern)
	}
	return tw.Flush()
}

// AccessJSON is one line of `klasy accesses --json`.
type AccessJSON struct {
	Struct       string `json:"struct"`
	Member       string `json:"member"`
	Mode         string `json:"mode"`
	File         string `json:"file"`
	Line         int    `json:"line"`
	Column       int    `json:"column,omitempty"`
	Function     string `json:"function"`
	FunctionFile string `json:"function_file"`
	Base         string `json:"base"`
	BaseKind     string `json:"base_kind"`
	BaseVar      string `json:"base_var,omitempty"`
	BaseOffset   int64  `json:"base_offset,omitempty"`
	BaseReason   string `json:"base_reason,omitempty"`
	Spelling     string `json:"spelling,omitempty"`
	StmtLine     int    `json:"stmt_line,omitempty"`
	Declared     string `json:"declared,omitempty"`
	Union        bool   `json:"union,omitempty"`
	Bitfield     bool   `json:"bitfield,omitempty"`
	ViaAnonymous bool   `json:"via_anonymous,omitempty"`
	// BitOffset is nil when the layout is not constant (a member after a
	// variable-length array): 0 would be a wrong offset.
	BitOffset     *uint64 `json:"bit_offset,omitempty"`
	OffsetUnknown bool    `json:"offset_unknown,omitempty"`
	BitSize       uint64  `json:"bit_size"`
}

// NewAccessJSON is a as klasy accesses --json prints it.
func NewAccessJSON(a *debugklasy.Access) AccessJSON {
	j := AccessJSON{
		Struct: a.Struct, Member: a.Member, Mode: a.Mode.String(),
		File: a.File, Line: a.Line, Column: a.Col,
		Function: a.Function.Name, FunctionFile: a.Function.File,
		Base: a.Base.Expr, BaseKind: a.Base.Kind.String(), BaseVar: a.Base.Var,
		BaseOffset: a.Base.Offset, BaseReason: a.Base.Reason,
		StmtLine: a.StmtLine, Union: a.Union, Bitfield: a.Bitfield, ViaAnonymous: a.ViaAnon,
		OffsetUnknown: a.NoOffset, BitSize: a.BitSize,
	}
	if !a.NoOffset {
		off := a.BitOffset
		j.BitOffset = &off
	}
	if a.SpellFile != "" {
		j.Spelling = fmt.Sprintf("%s:%d:%d", a.SpellFile, a.SpellLine, a.SpellCol)
	}
	if a.AnonType {
		j.Declared = fmt.Sprintf("%s:%d", a.DeclFile, a.DeclLine)
	}
	return j
}

// Accesses prints accesses to struct members: location, function,
// member, mode and base; nothing when there are none.
func Accesses(w io.Writer, hits []debugklasy.Access, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		for i := range hits {
			if err := enc.Encode(NewAccessJSON(&hits[i])); err != nil {
				return err
			}
		}
	} else if len(hits) > 0 {
		tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "LOCATION\tFUNCTION\tACCESS\tMODE\tBASE")
		for i := range hits {
			a := &hits[i]
			loc := fmt.Sprintf("%s:%d", a.File, a.Line)
			if a.StmtLine != 0 {
				loc += fmt.Sprintf(" (stmt %d)", a.StmtLine)
			}
			base := a.Base.Kind.String() + " " + a.Base.Expr
			if a.Base.Kind == debugklasy.Unsupported {
				base = "unsupported: " + a.Base.Reason
			}
			fmt.Fprintf(tw, "%s\t%s\t%s.%s\t%s\t%s\n", loc, a.Function.Name, a.StructName(), a.Member, a.Mode, base)
		}
		tw.Flush()
	}
	return nil
}

// InferredAccess is an access accessinfer found, at the line of its
// instruction.
type InferredAccess struct {
	accessinfer.Access
	File string
	Line int
	// Where is the instruction's place when its address means nothing
	// by itself: SECTION+OFFSET in a module (.text+0x1a); "" prints PC.
	Where string
}

// pc is the instruction's address, or its place in a module.
func (a *InferredAccess) pc() string {
	if a.Where != "" {
		return a.Where
	}
	return fmt.Sprintf("%#x", a.PC)
}

// InferredAccessJSON is one line of klasy accesses --json for a binary
// without .debug_klasy.
type InferredAccessJSON struct {
	Struct    string `json:"struct"`
	Member    string `json:"member"`
	Mode      string `json:"mode"`
	File      string `json:"file"`
	Line      int    `json:"line"`
	Function  string `json:"function"`
	InlinedIn string `json:"inlined_in,omitempty"`
	PC        string `json:"pc"`
	Base      string `json:"base"`
	Source    string `json:"source"` // "inferred"
	Bitfield  bool   `json:"bitfield,omitempty"`
	BitOffset int64  `json:"bit_offset"`
	BitSize   int64  `json:"bit_size"`
}

// InferredAccesses prints inferred accesses as Accesses prints the
// plugin's: LOCATION FUNCTION ACCESS MODE, then PC and where the base's
// type came from.
func InferredAccesses(w io.Writer, rows []InferredAccess, asJSON bool) error {
	fn := func(a *InferredAccess) (string, string) {
		if len(a.Calls) > 0 {
			return a.Calls[0].Func, a.Func
		}
		return a.Func, ""
	}
	if asJSON {
		enc := json.NewEncoder(w)
		for i := range rows {
			a := &rows[i]
			f, in := fn(a)
			j := InferredAccessJSON{Struct: a.Struct, Member: a.Member, Mode: debugklasy.ModeOf(a.Kind).String(), File: a.File, Line: a.Line,
				Function: f, InlinedIn: in, PC: a.pc(), Base: a.Why, Source: "inferred",
				Bitfield: a.Bitfield, BitOffset: a.BitOffset, BitSize: a.BitSize}
			if err := enc.Encode(j); err != nil {
				return err
			}
		}
		return nil
	}
	if len(rows) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "LOCATION\tFUNCTION\tACCESS\tMODE\tPC\tBASE")
	for i := range rows {
		a := &rows[i]
		f, in := fn(a)
		if in != "" {
			f += " (in " + in + ")"
		}
		fmt.Fprintf(tw, "%s:%d\t%s\t%s.%s\t%s\t%s\t%s\n", a.File, a.Line, f, a.Struct, a.Member, debugklasy.ModeOf(a.Kind), a.pc(), a.Why)
	}
	return tw.Flush()
}
