package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"text/tabwriter"

	"github.com/klasy/klasy/debugklasy"
	"github.com/klasy/klasy/pattern"
)

func init() {
	register(&command{
		Name:    "accesses",
		Summary: "list the struct member accesses a pattern selects (from .debug_klasy)",
		Help:    helpText("accesses"),
		Run:     runAccesses,
	})
}

// accessJSON is one line of `klasy accesses --json`.
type accessJSON struct {
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

func toJSON(a *debugklasy.Access) accessJSON {
	j := accessJSON{
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

func runAccesses(s *stdio, args []string) error {
	fs := newFlagSet("accesses")
	asJSON := fs.Bool("json", false, "")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		return usageError{Msg: fmt.Sprintf("want BINARY and 'STRUCT.MEMBER', got %d arguments", fs.NArg())}
	}
	bin, pat := fs.Arg(0), fs.Arg(1)
	p, err := pattern.CompileMember(pat, pattern.CommandLine)
	if err != nil {
		return usageError{Msg: err.Error()}
	}
	t, err := debugklasy.Open(bin)
	if err != nil {
		var ve *debugklasy.VersionError
		if errors.Is(err, debugklasy.ErrNoSection) || errors.As(err, &ve) {
			return err
		}
		return fmt.Errorf("reading accesses: %w", err)
	}
	hits := t.Query(p)
	if *asJSON {
		enc := json.NewEncoder(s.Out)
		for i := range hits {
			if err := enc.Encode(toJSON(&hits[i])); err != nil {
				return err
			}
		}
	} else if len(hits) > 0 {
		tw := tabwriter.NewWriter(s.Out, 0, 8, 2, ' ', 0)
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
	if err := s.flush(); err != nil {
		return err // no summary of output that was lost
	}
	if len(hits) == 0 {
		fmt.Fprintf(s.Err, "klasy accesses: no access matches %s in %s (%d accesses in %d compilation units)\n", pat, bin, len(t.Accesses), t.Units)
		return exitError{Code: 1}
	}
	fmt.Fprintf(s.Err, "klasy accesses: %d of %d accesses match %s\n", len(hits), len(t.Accesses), pat)
	return nil
}
