package resolve

import (
	"errors"
	"fmt"
	"strings"

	"github.com/klasy/klasy/accessinfer"
	"github.com/klasy/klasy/aspect"
	"github.com/klasy/klasy/debugklasy"
	"github.com/klasy/klasy/dwarfmap"
	"github.com/klasy/klasy/internal/suggest"
	"github.com/klasy/klasy/pattern"
	"github.com/klasy/klasy/weaver/joinpoint"
	"github.com/klasy/klasy/weaver/resolve/accessjp"
	"github.com/klasy/klasy/weaver/resolve/linecode"
)

// Access join points: the AND-group's designators and their records
// (the plugin's, or accessinfer's for an image built without it) are
// read here; package accessjp places them.

// ModuleImage is a module built with the plugin, loaded in the target
// kernel, whose join points a resolve finds besides the kernel's.
type ModuleImage struct {
	Name string // as lsmod shows it
	Path string
	X    *dwarfmap.Index
	// Refused says why the running kernel would refuse a hook at an
	// address of the .ko (nil: nothing known).
	Refused joinpoint.Refusal
}

// accessGroup resolves an AND-group of access(...) designators.
func (r *resolver) accessGroup(n int, pc *aspect.Pointcut, g []*aspect.Term, timing joinpoint.Timing) error {
	ag := &accessGroup{r: r, Group: &accessjp.Group{N: n, Timing: timing, Params: joinpoint.PointcutParams(pc), Add: r.add, Lines: r.lines}}
	for _, t := range g {
		switch {
		case t.Access != nil:
			ag.accs = append(ag.accs, t.Access)
		case t.WithinFile != nil:
			p, err := pattern.Compile(strings.Join(t.WithinFile.Path.Parts, ""), pattern.Pointcut)
			if err != nil {
				return r.errAt(pc, t.Pos.Offset, "%v", err)
			}
			ag.Files = append(ag.Files, p)
		case t.WithinFunction != nil:
			p, err := t.WithinFunction.Func.Pattern()
			if err != nil {
				return r.errAt(pc, t.Pos.Offset, "%v", err)
			}
			ag.Funcs = append(ag.Funcs, p)
		case t.Target != nil:
			ag.Target = t.Target
		case t.LocalVar != nil:
			ag.Locals = append(ag.Locals, t.LocalVar)
		case t.Xflow != nil:
			return r.errAt(pc, t.Pos.Offset, "xflow(...) left untranslated: Plan resolves an aspect after weaver.Translate turned its flows into plain advice")
		default:
			return r.errAt(pc, t.Pos.Offset, "%s cannot be woven at access join points", t.Designator())
		}
	}
	accs := ag.accs
	var pats []*pattern.Member
	for _, a := range accs {
		p, err := pattern.CompileMember(a.Struct.Value+"."+a.Member.Value, pattern.Pointcut)
		if err != nil {
			return r.errAt(pc, a.Pos.Offset, "%v", err)
		}
		pats = append(pats, p)
	}
	var recs []accessjp.Rec
	var noTable []*linecode.Image
	for _, im := range r.images() {
		as, err := im.Accesses(pats)
		if errors.Is(err, debugklasy.ErrNoSection) {
			noTable = append(noTable, im)
			continue
		}
		if err != nil {
			return fmt.Errorf("reading the member accesses of %s: %w", im.Label(), err)
		}
		for _, a := range as {
			if ag.kinds(a.Mode) {
				recs = append(recs, accessjp.Rec{Im: im, A: a})
			}
		}
	}
	before := len(r.jps)
	// An image built without the plugin has no records: its accesses
	// are inferred from its DWARF and code (inferred.go), once a struct
	// and member named without wildcards are known to exist.
	if len(noTable) > 0 {
		for _, a := range accs {
			if err := r.checkMember(pc, a); err != nil {
				return err
			}
		}
	}
	inferred := 0
	for _, im := range noTable {
		n, err := ag.inferredGroup(im, pats)
		if err != nil {
			return err
		}
		inferred += n
	}
	if len(recs) == 0 && inferred == 0 {
		for _, a := range accs {
			if err := r.checkMember(pc, a); err != nil {
				return err
			}
		}
	}
	if err := ag.Resolve(recs); err != nil {
		return err
	}
	if len(r.jps) == before {
		group := (&aspect.Expr{Or: &aspect.Or{And: []*aspect.And{{Terms: g}}}}).String()
		r.warn(pc, g[0].Pos.Offset, "%s selects no join point: %s", group, ag.nothingBecause(len(recs)+inferred, len(noTable) > 0))
	}
	return nil
}

// nothingBecause says why a group selected nothing.
func (ag *accessGroup) nothingBecause(nrecs int, inferred bool) string {
	switch {
	case nrecs == 0 && inferred:
		return "no access of that member is recorded by the plugin or found in the code (inferred from DWARF and the instructions, which leave out what they cannot decide)"
	case nrecs == 0:
		return "no access of that member is recorded in the code the plugin compiled"
	case ag.Selected == 0:
		return fmt.Sprintf("none of the %d accesses recorded is in the functions and files the pointcut names", nrecs)
	}
	return fmt.Sprintf("of the %d copies of the code that hold the accesses, none has the local_var(...) variables in scope", ag.Selected)
}

// images lists the kernel and the modules.
func (r *resolver) images() []*linecode.Image {
	if r.imgs == nil {
		r.imgs = []*linecode.Image{{X: r.x, Refused: r.opt.Refused}}
		for _, m := range r.opt.Modules {
			r.imgs = append(r.imgs, &linecode.Image{Module: m.Name, X: m.X, Refused: m.Refused})
		}
	}
	return r.imgs
}

func (r *resolver) warn(pc *aspect.Pointcut, off int, format string, args ...any) {
	if r.opt.Warn != nil {
		r.opt.Warn(joinpoint.Warning{Pos: r.f.Position(pc.Text.Offset(off)), Msg: fmt.Sprintf(format, args...)})
	}
}

// checkMember fails when access(S.M) names, without wildcards, a struct
// or a member that no image's DWARF has, with the nearest names.
func (r *resolver) checkMember(pc *aspect.Pointcut, a *aspect.Access) error {
	st, stWild := a.Struct.Value, strings.Contains(a.Struct.Value, "%")
	if stWild {
		return nil
	}
	var names []string
	for _, im := range r.images() {
		b, err := im.Batch()
		if err != nil {
			return err
		}
		l, err := b.Struct(st)
		if err == nil && l != nil {
			if strings.Contains(a.Member.Value, "%") {
				return nil
			}
			var members []string
			for _, m := range l.Members {
				if m.Name == a.Member.Value {
					return nil
				}
				if m.Name != "" {
					members = append(members, m.Name)
				}
			}
			return r.errAt(pc, a.Member.Pos.Offset, "access(%s.%s): %s %s has no member %s%s", st, a.Member.Value, l.Kind, st, a.Member.Value, suggest.DidYouMean(a.Member.Value, members))
		}
		names = append(names, b.StructNames()...)
	}
	return r.errAt(pc, a.Struct.Pos.Offset, "access(%s.%s): no struct or union %s in %s%s", st, a.Member.Value, st, r.images()[0].Label(), suggest.DidYouMean(st, names))
}

// accessGroup is an AND-group of access(...) being resolved: the
// placement is accessjp's.
type accessGroup struct {
	r    *resolver
	accs []*aspect.Access
	*accessjp.Group
}

// inferredGroup resolves the group in image im from its inferred
// accesses, and says how many the patterns selected.
func (ag *accessGroup) inferredGroup(im *linecode.Image, pats []*pattern.Member) (int, error) {
	accs, _, err := accessinfer.Select(im.X.Image(), func(st, mem string) bool { return matchMember(pats, st, mem) }, ag.r.opt.Progress)
	if err != nil {
		return 0, fmt.Errorf("inferring the member accesses of %s: %w", im.Label(), err)
	}
	b, err := im.Batch()
	if err != nil {
		return 0, err
	}
	n := 0
	for i := range accs {
		if ag.kinds(debugklasy.ModeOf(accs[i].Kind)) {
			ag.Inferred(b, im, &accs[i])
			n++
		}
	}
	return n, nil
}

// kinds reports whether the group's access(S.M, KIND) terms select an
// access of mode m.
func (ag *accessGroup) kinds(m debugklasy.Mode) bool {
	for _, a := range ag.accs {
		if !a.Selects(m.String()) {
			return false
		}
	}
	return true
}

func matchMember(pats []*pattern.Member, st, mem string) bool {
	for _, p := range pats {
		if !p.Match(st, mem) {
			return false
		}
	}
	return true
}
