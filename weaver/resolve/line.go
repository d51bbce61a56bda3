package resolve

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/klasy/klasy/aspect"
	"github.com/klasy/klasy/dwarfmap"
	"github.com/klasy/klasy/pattern"
	"github.com/klasy/klasy/weaver/joinpoint"
	"github.com/klasy/klasy/weaver/resolve/accessjp"
	"github.com/klasy/klasy/weaver/resolve/funcnames"
	"github.com/klasy/klasy/weaver/resolve/linecode"
)

// Line join points: line(FILE:LINE) selects the code of one source line
// in every out-of-line body and every inlined copy that holds it, as
// perf probe FILE:N and SystemTap's statement("*@FILE:N") do. The rows
// of FILE:LINE in the line table say where that code is; each row
// belongs to the function the line is written in there — the innermost
// inlined copy holding its address, or the out-of-line body — except
// that a row carrying the call line of an inlined copy belongs to the
// copy's caller. In each such copy the hooks go where the access join
// points' line tier puts them (linePlaces): the line's is_stmt address
// in each basic block that holds one for before advice, past the line's
// code in the block for after advice. within_function(G) keeps the
// copies written in G or inlined into G; argument(v, x) gives &v, v the
// parameter of the function the line is written in (an inlined copy's
// own parameter in a copy); local_var(v, x) gives &v where v is in
// scope, and selects only there. A line without code is an error that
// names the nearest lines with code.

// lineKey identifies one copy of a line's code: its image, file, the
// out-of-line function holding it and the inlined copy (its DIE; 0 for
// the body itself).
type lineKey struct {
	im   *linecode.Image
	file string
	host uint64
	die  uint64
}

// lineCopy is the line's rows in one copy.
type lineCopy struct {
	key   lineKey
	host  dwarfmap.FuncInfo
	owner dwarfmap.Instance // the copy; Inlined false for the body
	addrs map[uint64]bool   // of its rows
}

// lineGroup resolves an AND-group of line(FILE:LINE).
func (r *resolver) lineGroup(n int, pc *aspect.Pointcut, g []*aspect.Term, timing joinpoint.Timing) error {
	var ln *aspect.Term
	var funcs []*pattern.Pattern
	var within []string // their text
	var locals []*aspect.LocalVar
	var args []*aspect.Argument
	for _, t := range g {
		switch {
		case t.Line != nil:
			ln = t
		case t.WithinFunction != nil:
			p, err := t.WithinFunction.Func.Pattern()
			if err != nil {
				return r.errAt(pc, t.Pos.Offset, "%v", err)
			}
			funcs, within = append(funcs, p), append(within, t.WithinFunction.Func.Value)
		case t.LocalVar != nil:
			locals = append(locals, t.LocalVar)
		case t.Argument != nil:
			args = append(args, t.Argument)
		default:
			return r.errAt(pc, t.Pos.Offset, "%s cannot be woven at line join points", t.Designator())
		}
	}
	spec := strings.Join(ln.Line.Path.Parts, "") + ":" + ln.Line.Num.Value
	filePat, err := pattern.Compile(strings.Join(ln.Line.Path.Parts, ""), pattern.Pointcut)
	if err != nil {
		return r.errAt(pc, ln.Pos.Offset, "%v", err)
	}
	line, err := strconv.Atoi(ln.Line.Num.Value)
	if err != nil || line <= 0 {
		return r.errAt(pc, ln.Line.Num.Pos.Offset, "line(%s): %q is not a line number", spec, ln.Line.Num.Value)
	}
	params := joinpoint.PointcutParams(pc)
	var files []string // matched, in any image
	var copies []*lineCopy
	for _, im := range r.images() {
		b, err := im.Batch()
		if err != nil {
			return err
		}
		these := b.FileNames(func(name string) bool { return pattern.MatchPath(filePat, name) })
		files = append(files, these...)
		byKey := map[lineKey]*lineCopy{}
		for _, file := range these {
			for _, row := range b.LineRows(file, line) {
				host, ok := b.FuncAt(row.Addr)
				if !ok {
					continue
				}
				owner := lineOwner(b, row.Addr, b.FileName(row), line, host)
				k := lineKey{im, file, host.Entry, owner.DIE}
				c := byKey[k]
				if c == nil {
					c = &lineCopy{key: k, host: host, owner: owner, addrs: map[uint64]bool{}}
					byKey[k] = c
					copies = append(copies, c)
				}
				c.addrs[row.Addr] = true
			}
		}
	}
	if len(files) == 0 {
		return r.errAt(pc, ln.Pos.Offset, "line(%s): no source file %s in the line tables of %s%s", spec, matchWord(strings.Join(ln.Line.Path.Parts, "")), r.images()[0].Label(), funcnames.NearestFileIn(strings.Join(ln.Line.Path.Parts, ""), r.images()))
	}
	if len(copies) == 0 {
		return r.errAt(pc, ln.Pos.Offset, "line(%s): %s", spec, r.noCodeAt(files, line))
	}
	slices.SortStableFunc(copies, func(a, b *lineCopy) int {
		if c := cmp.Compare(a.key.im.Module, b.key.im.Module); c != 0 {
			return c
		}
		return cmp.Compare(a.host.Entry, b.host.Entry)
	})
	selected, before := 0, len(r.jps)
	var where []string
	for _, c := range copies {
		name := c.owner.Name
		if !slices.Contains(where, name) {
			where = append(where, name)
		}
		if !pattern.MatchAll(funcs, true, c.owner.Name, c.host.Name) {
			continue
		}
		selected++
		if err := r.lineCopy(n, timing, c, line, args, locals, params); err != nil {
			return err
		}
	}
	switch {
	case selected == 0:
		return r.errAt(pc, ln.Pos.Offset, "line(%s): its code is in %s, none of them selected by within_function(...)%s", spec, strings.Join(where, ", "), funcnames.Unselected(r.x, where, within))
	case len(r.jps) == before:
		var vs []string
		for _, lv := range locals {
			vs = append(vs, lv.Local.Value)
		}
		return r.errAt(pc, ln.Pos.Offset, "line(%s): %s is in scope at none of its %d copies of code", spec, strings.Join(vs, ", "), selected)
	}
	return nil
}

// noCodeAt says that line has no code in files, and which lines nearest
// to it above and below have.
func (r *resolver) noCodeAt(files []string, line int) string {
	var parts []string
	for _, file := range files[:min(len(files), 3)] {
		var lines []int
		for _, im := range r.images() {
			if b, err := im.Batch(); err == nil {
				lines = append(lines, b.LinesWithCode(file)...)
			}
		}
		slices.Sort(lines)
		i, _ := slices.BinarySearch(lines, line)
		var near []string
		if i > 0 {
			near = append(near, fmt.Sprintf("%d above", lines[i-1]))
		}
		if i < len(lines) {
			near = append(near, fmt.Sprintf("%d below", lines[i]))
		}
		s := fmt.Sprintf("%s:%d has no code (the compiler merged or removed it, or it holds no statement)", file, line)
		if len(near) > 0 {
			s += "; the nearest lines with code are " + strings.Join(near, " and ")
		} else {
			s += "; no line of it has code"
		}
		parts = append(parts, s)
	}
	if len(files) > 3 {
		parts = append(parts, fmt.Sprintf("and %d more files match", len(files)-3))
	}
	return strings.Join(parts, "; ")
}

// lineOwner is the copy of a function whose line a row at addr (of
// file:line) is: the innermost inlined copy holding addr of a function
// whose definition in file spans line (from its declaration to the next
// function's), unless that copy is called on this very line (the call's
// own rows share the callee's first address); else the out-of-line body.
// (The compiler interleaves a caller's code with an inlined copy's.)
func lineOwner(b *dwarfmap.Batch, addr uint64, file string, line int, host dwarfmap.FuncInfo) dwarfmap.Instance {
	for _, c := range b.CopiesAt(addr) {
		if c.CallLine == line && c.CallFile == file {
			continue // the row is the caller's
		}
		if c.DeclFile != file || c.DeclLine > line {
			continue
		}
		if next := b.NextDecl(file, c.DeclLine); next == 0 || line < next {
			return c
		}
	}
	return dwarfmap.Instance{Name: host.Name, Host: host.Name, HostFile: host.File, Ranges: host.Ranges, HostRanges: host.Ranges}
}

// lineCopy adds the join points of the line in one copy of its code.
func (r *resolver) lineCopy(n int, timing joinpoint.Timing, c *lineCopy, line int, args []*aspect.Argument, locals []*aspect.LocalVar, params []string) error {
	im := c.key.im
	b, err := im.Batch()
	if err != nil {
		return err
	}
	newJP := func() *joinpoint.JoinPoint {
		jp := &joinpoint.JoinPoint{Advice: n, Timing: timing, Kind: joinpoint.Kprobe, Module: im.Module, Function: c.owner.Name, File: c.key.file, Line: line}
		if c.owner.Inlined {
			jp.InlinedIn = c.host.Name
		}
		return jp
	}
	hl := r.lines.Get(b, im, c.key.file, line, c.host.Ranges)
	lc := hl.Code(line, func(addr uint64) bool { return c.addrs[addr] }, nil)
	if lc.Empty() {
		jp := newJP()
		jp.Skipped = "no code: the line's rows in this copy own no instruction"
		r.add(jp)
		return nil
	}
	places, err := linecode.Places(b, lc)
	if err != nil {
		jp := newJP()
		jp.Skipped = "no code: " + err.Error()
		r.add(jp)
		return nil
	}
	scope := c.owner.Name
	if c.owner.Inlined {
		scope = "inline " + c.owner.Name
	}
	for _, pl := range places {
		jp := newJP()
		jp.Addr = pl.Before
		if timing == joinpoint.After {
			jp.Addr = pl.After
		}
		if jp.Skipped = linecode.CheckHookAddr(b, im, c.host.Name, jp.Addr); jp.Skipped != "" {
			r.add(jp)
			continue
		}
		vals, skip, inScope := r.bindAt(b, im, jp.Addr, scope, args, locals, params)
		if !inScope {
			continue
		}
		jp.Args, jp.Skipped = vals, skip
		r.add(jp)
	}
	return nil
}

// bindAt computes the advice's context values at a hook at addr inside
// the function scope names ("f", or "inline f" for an inlined copy):
// argument(v, x) from scope's parameter v, local_var(v, x) from the
// innermost v in scope. inScope is false when a local_var's variable is
// not in scope there: the join point is not selected. A value that
// cannot be computed skips the join point with the reason.
func (r *resolver) bindAt(b *dwarfmap.Batch, im *linecode.Image, addr uint64, scope string, args []*aspect.Argument, locals []*aspect.LocalVar, params []string) (vals []joinpoint.Arg, skip string, inScope bool) {
	if len(params) == 0 {
		return nil, "", true
	}
	module := im.Module
	var locs []dwarfmap.VarLoc
	if len(args) > 0 {
		var err error
		if locs, err = b.VarLocsAt(addr); err != nil {
			return nil, "reading variable locations: " + err.Error(), true
		}
	}
	out := make([]joinpoint.Arg, len(params))
	for i, p := range params {
		out[i] = joinpoint.Arg{Param: p}
		if arg := argumentFor(args, p); arg != nil {
			out[i].Var = arg.Param.Value
			v, why := argumentValue(locs, arg, scope, false, module)
			if why != "" && skip == "" {
				skip = why
			}
			out[i].Value = v
			continue
		}
		for _, lv := range locals {
			if lv.Var.Value != p {
				continue
			}
			out[i].Var = lv.Local.Value
			v, why, ok := accessjp.LocalVarValue(b, addr, lv, scope, module)
			if !ok {
				return nil, "", false
			}
			if why != "" && skip == "" {
				skip = why
			}
			out[i].Value = v
		}
	}
	if skip != "" {
		return nil, skip, true
	}
	return out, "", true
}
