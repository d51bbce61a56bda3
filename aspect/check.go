package aspect

// Semantic checks. They run on a parsed File and return every problem
// found, each at the token it is about.

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/klasy/klasy/internal/suggest"
	"github.com/klasy/klasy/pattern"
)

// maxGroups bounds the AND-groups a pointcut may expand to; beyond it
// the pointcut is rejected rather than expanded without end.
const maxGroups = 1024

// Groups expands e into its AND-groups (disjunctive normal form): the
// join points e selects are those selected by any group, and a group
// selects those matching all its designators. ok is false if there are
// more than maxGroups groups.
func Groups(e *Expr) (groups [][]*Term, ok bool) {
	return dnfOr(e.Or)
}

func dnfOr(o *Or) ([][]*Term, bool) {
	var out [][]*Term
	for _, a := range o.And {
		g, ok := dnfAnd(a)
		if !ok {
			return nil, false
		}
		out = append(out, g...)
		if len(out) > maxGroups {
			return nil, false
		}
	}
	return out, true
}

func dnfAnd(a *And) ([][]*Term, bool) {
	out := [][]*Term{nil}
	for _, t := range a.Terms {
		var alts [][]*Term
		if t.Group != nil {
			var ok bool
			if alts, ok = dnfOr(t.Group); !ok {
				return nil, false
			}
		} else {
			alts = [][]*Term{{t}}
		}
		if len(out)*len(alts) > maxGroups {
			return nil, false
		}
		next := make([][]*Term, 0, len(out)*len(alts))
		for _, g := range out {
			for _, alt := range alts {
				ng := make([]*Term, 0, len(g)+len(alt))
				ng = append(append(ng, g...), alt...)
				next = append(next, ng)
			}
		}
		out = next
	}
	return out, true
}

// Leaves returns the designators of e in source order.
func Leaves(e *Expr) []*Term {
	var out []*Term
	var walk func(o *Or)
	walk = func(o *Or) {
		for _, a := range o.And {
			for _, t := range a.Terms {
				if t.Group != nil {
					walk(t.Group)
				} else {
					out = append(out, t)
				}
			}
		}
	}
	walk(e.Or)
	return out
}

type checker struct {
	f     *File
	flows map[string]*Flow
	diags Diagnostics
}

// Check applies the language's rules to f and returns every violation.
func Check(f *File) Diagnostics {
	c := &checker{f: f, flows: map[string]*Flow{}}
	for _, fl := range f.Flows {
		if fl.Name == "" {
			continue
		}
		if prev, dup := c.flows[fl.Name]; dup {
			c.errf(fl.NameOff, "xflow %q is defined twice (first at line %d); give each flow its own name", fl.Name, f.Position(prev.Off).Line)
			continue
		}
		c.flows[fl.Name] = fl
	}
	for _, a := range f.Advice {
		if a.Pointcut != nil {
			c.pointcut(a.Pointcut, nil)
			c.checkBody(a)
			c.checkBrackets(&a.Body)
			c.checkReplace(a)
		}
	}
	for _, fl := range f.Flows {
		c.flow(fl)
	}
	return c.diags.sortDedup()
}

func (c *checker) errf(off int, format string, args ...any) {
	c.diags = append(c.diags, Diagnostic{Pos: c.f.Position(off), Msg: fmt.Sprintf(format, args...)})
}

// at maps an offset inside a pointcut to the file.
func at(pc *Pointcut, off int) int { return pc.Text.Offset(off) }

// name checks a word of a designator: a pattern (FUNC, STRUCT, MEMBER)
// or a C identifier (variables, domains). example is the designator as
// written, or a sample use for identifiers.
func (c *checker) name(pc *Pointcut, n *Name, what, example string, isPattern bool) {
	v := n.Value
	if isPattern {
		if _, err := n.Pattern(); err != nil {
			c.patternErr(pc, n.Pos.Offset, err, example)
			return
		}
	}
	switch {
	case strings.Contains(v, "*"):
		c.errf(at(pc, n.Pos.Offset+strings.IndexByte(v, '*')), "%s %q cannot contain *: name one C identifier, e.g. %s", what, v, example)
	case !isPattern && strings.Contains(v, "%"):
		c.errf(at(pc, n.Pos.Offset), "%s %q cannot contain the wildcard %%: name one C identifier, e.g. %s", what, v, example)
	case isPattern && !isIdent(strings.ReplaceAll(v, "%", "x")):
		c.errf(at(pc, n.Pos.Offset), "%s pattern %q is not a C identifier with %% wildcards, e.g. %s", what, v, patternExamples[what])
	case !isPattern && !isIdent(v):
		c.errf(at(pc, n.Pos.Offset), "%s %q is not a C identifier: e.g. %s", what, v, example)
	}
}

// patternErr reports a pattern that package pattern rejects, starting at
// off in the pointcut; example is the designator, which the message shows
// with * turned into %.
func (c *checker) patternErr(pc *Pointcut, off int, err error, example string) {
	var pe *pattern.Error
	if !errors.As(err, &pe) {
		c.errf(at(pc, off), "%v", err)
		return
	}
	msg := pe.Msg
	if msg == pattern.StarInPointcut {
		msg += " (" + strings.ReplaceAll(example, "*", "%") + ")"
	}
	c.errf(at(pc, off+pe.Offset), "%s", msg)
}

var patternExamples = map[string]string{
	"function":  "vfs_read or skb_%",
	"structure": "sk_buff or %",
	"member":    "data or d%",
}

// lexical checks each designator's arguments on their own.
func (c *checker) lexical(pc *Pointcut, t *Term) {
	var sb strings.Builder
	t.write(&sb)
	self := sb.String() // for "write ... instead" in wildcard errors
	switch {
	case t.Execution != nil:
		c.name(pc, t.Execution.Func, "function", self, true)
	case t.Access != nil:
		c.name(pc, t.Access.Struct, "structure", self, true)
		c.name(pc, t.Access.Member, "member", self, true)
		if k := t.Access.Kind; k != nil && !slices.Contains(AccessKinds, k.Value) {
			c.errf(at(pc, k.Pos.Offset), "access kind %q is none of %s: write access(%s.%s, write)%s", k.Value, strings.Join(AccessKinds, ", "), t.Access.Struct.Value, t.Access.Member.Value, suggest.DidYouMean(k.Value, AccessKinds))
		}
	case t.WithinFile != nil:
		c.path(pc, t.WithinFile.Path, "within_file", self)
		if d := t.WithinFile.Domain; d != nil {
			c.name(pc, d, "domain", "within_file(netfront.c@linuxU)", false)
		}
	case t.Line != nil:
		c.path(pc, t.Line.Path, "line", self)
		n := t.Line.Num
		if v, err := strconv.Atoi(n.Value); err != nil || v <= 0 || n.Value[0] == '0' {
			c.errf(at(pc, n.Pos.Offset), "line number %q is not a number from 1 up: write line(FILE:LINE), e.g. line(fs/namei.c:3820)", n.Value)
		}
	case t.Block != nil:
		c.name(pc, t.Block.Func, "function", self, true)
	case t.Tracepoint != nil:
		c.name(pc, t.Tracepoint.Subsys, "tracepoint subsystem", "tracepoint(sched:sched_switch)", false)
		c.name(pc, t.Tracepoint.Event, "tracepoint", "tracepoint(sched:sched_switch)", false)
	case t.WithinFunction != nil:
		c.name(pc, t.WithinFunction.Func, "function", self, true)
		if d := t.WithinFunction.Domain; d != nil {
			c.name(pc, d, "domain", "within_function(netif_rx@linux0)", false)
		}
	case t.Target != nil:
		c.name(pc, t.Target.Var, "advice variable", "target(skb)", false)
	case t.LocalVar != nil:
		c.name(pc, t.LocalVar.Local, "local variable", "local_var(n, np)", false)
		c.name(pc, t.LocalVar.Var, "advice variable", "local_var(n, np)", false)
	case t.Argument != nil:
		c.name(pc, t.Argument.Param, "parameter", "argument(size, sizep)", false)
		c.name(pc, t.Argument.Var, "advice variable", "argument(size, sizep)", false)
	case t.Xflow != nil:
		c.name(pc, t.Xflow.Flow, "flow name", "xflow(netflow, skb)", false)
		c.name(pc, t.Xflow.Var, "advice variable", "xflow(netflow, skb)", false)
		if t.Xflow.ID != nil {
			c.name(pc, t.Xflow.ID, "flow ID variable", "xflow(netflow, skb, id)", false)
		}
	case t.Unknown != nil:
		var known []string
		for _, d := range Designators {
			known = append(known, d.Name)
		}
		c.errf(at(pc, t.Pos.Offset), "unknown pointcut designator %s: klasy knows %s", t.Unknown.Name, strings.Join(known, ", "))
	}
}

// path checks the file pattern of within_file or line (designator).
func (c *checker) path(pc *Pointcut, p *Path, designator, self string) {
	example := "within_file(net/core/dev.c)"
	if designator == "line" {
		example = "line(fs/namei.c:3820)"
	}
	for i, tok := range p.Tokens {
		if strings.TrimSpace(tok.Value) == "" {
			if i > 0 && i+1 < len(p.Tokens) {
				c.errf(at(pc, p.Tokens[i+1].Pos.Offset), "blank inside the file pattern of %s: write the path without spaces, e.g. %s", designator, example)
			}
			continue
		}
		if _, err := pattern.Compile(tok.Value, pattern.Pointcut); err != nil {
			c.patternErr(pc, tok.Pos.Offset, err, self)
		}
	}
}

// boundVar returns the advice variable a designator binds, if any.
func boundVar(t *Term) *Name {
	switch {
	case t.Target != nil:
		return t.Target.Var
	case t.LocalVar != nil:
		return t.LocalVar.Var
	case t.Argument != nil:
		return t.Argument.Var
	}
	return nil
}

// rule is the flow rule a pointcut belongs to, nil for advice.
func (c *checker) pointcut(pc *Pointcut, r *Rule) {
	leaves := Leaves(pc.Expr)
	for _, t := range leaves {
		c.lexical(pc, t)
	}
	groups, ok := Groups(pc.Expr)
	if !ok {
		c.errf(at(pc, 0), "pointcut expands to more than %d AND-groups; split it into several <advice>", maxGroups)
		return
	}
	for _, g := range groups {
		c.group(pc, g, r)
	}
}

// group checks one AND-group: the designators that must hold together.
func (c *checker) group(pc *Pointcut, g []*Term, r *Rule) {
	var access, execution, lines, blocks, tps []*Term
	for _, t := range g {
		switch {
		case t.Tracepoint != nil:
			tps = append(tps, t)
		case t.Access != nil:
			access = append(access, t)
		case t.Execution != nil:
			execution = append(execution, t)
		case t.Line != nil:
			lines = append(lines, t)
		case t.Block != nil:
			blocks = append(blocks, t)
		}
	}
	pos := func(t *Term) int { return at(pc, t.Pos.Offset) }
	var selectors [][]*Term // the kinds of join points the group selects
	for _, k := range [][]*Term{access, execution, lines, blocks, tps} {
		if len(k) > 0 {
			selectors = append(selectors, k)
		}
	}
	switch {
	case len(selectors) == 0:
		c.errf(pos(g[0]), "%s: every AND-group of a pointcut needs an access(...), an execution(...), a line(...), a block(...) or a tracepoint(...) to select join points, e.g. access(sk_buff.data) AND %s", alternative(g), g[0].Designator()+"(...)")
		return
	case len(access) > 0 && len(execution) > 0:
		c.errf(pos(execution[0]), "access and execution cannot be joined by AND: no join point is both a member access and a function execution; join them with OR or write two <advice>")
		return
	case len(selectors) > 1:
		// Point at the first designator of another kind than the
		// first one.
		var a, b *Term
		for _, t := range g {
			if d := t.Designator(); kindOf[d] != "" {
				if a == nil {
					a = t
				} else if b == nil && d != a.Designator() {
					b = t
				}
			}
		}
		c.errf(pos(b), "%s and %s cannot be joined by AND: no join point is both %s and %s; join them with OR or write two <advice>", a.Designator(), b.Designator(), kindOf[a.Designator()], kindOf[b.Designator()])
		return
	case len(execution) > 0:
		for _, t := range g {
			// within_file picks among static functions of one name,
			// within_function among inlined copies (§4.3.4 forbade both
			// only because Kerninst reached neither).
			if t.Execution == nil && t.Argument == nil && t.Unknown == nil && t.WithinFile == nil && t.WithinFunction == nil {
				hint := ""
				if t.Target != nil || t.LocalVar != nil {
					hint = "; to get a parameter write argument(PARAM, VAR)"
				}
				c.errf(pos(t), "%s cannot be combined with execution: execution is joined by AND only with execution(...), argument(...), within_file(...) and within_function(...)%s", t.Designator(), hint)
			}
		}
	case len(lines) > 0:
		if len(lines) > 1 {
			c.errf(pos(lines[1]), "line(...) cannot be joined by AND with another line(...): a join point is on one line; join them with OR")
		}
		for _, t := range g {
			// within_function picks the copies of the line's code in
			// one function or inlined into it.
			if t.Line == nil && t.WithinFunction == nil && t.LocalVar == nil && t.Argument == nil && t.Unknown == nil {
				c.errf(pos(t), "%s cannot be combined with line: line is joined by AND only with within_function(...), local_var(...) and argument(...)%s", t.Designator(), combineHint(t, "line"))
			}
		}
	case len(tps) > 0:
		// The advice's parameters are the event's arguments: nothing
		// else binds or narrows a tracepoint.
		for _, t := range g {
			if t.Tracepoint == nil && t.Unknown == nil {
				c.errf(pos(t), "%s cannot be combined with tracepoint: a tracepoint(...) stands alone in its AND-group, and its advice reads the event's arguments by their names (next->pid)", t.Designator())
			}
		}
		if len(tps) > 1 {
			c.errf(pos(tps[1]), "tracepoint(...) cannot be joined by AND with another tracepoint(...): an event is one tracepoint; join them with OR or write two <advice>")
		}
	case len(blocks) > 0:
		for _, t := range g {
			// within_file picks among static functions of one name.
			if t.Block == nil && t.WithinFile == nil && t.LocalVar == nil && t.Argument == nil && t.Unknown == nil {
				c.errf(pos(t), "%s cannot be combined with block: block is joined by AND only with block(...), within_file(...), local_var(...) and argument(...)%s", t.Designator(), combineHint(t, "block"))
			}
		}
	}
	bound := map[string]*Term{}
	for _, t := range g {
		if len(execution) == 0 && len(lines) == 0 && len(blocks) == 0 && t.Argument != nil {
			c.errf(pos(t), "argument(...) needs an execution(...), a line(...) or a block(...) in the same AND-group; at member accesses bind locals with local_var(LOCAL, VAR)")
		}
		if v := boundVar(t); v != nil {
			if prev, dup := bound[v.Value]; dup && prev != t {
				c.errf(at(pc, v.Pos.Offset), "advice variable %s is bound twice in this AND-group; give each binding its own name", v.Value)
			}
			bound[v.Value] = t
		}
	}
	ids := map[string]bool{}
	for _, t := range g {
		x := t.Xflow
		if x == nil {
			continue
		}
		if x.ID != nil {
			if ids[x.ID.Value] {
				c.errf(at(pc, x.ID.Pos.Offset), "flow ID variable %s is given by two xflow(...) of this AND-group; give each its own name", x.ID.Value)
			}
			ids[x.ID.Value] = true
		}
		if r != nil {
			c.errf(pos(t), "xflow(...) cannot be used inside a flow definition; it selects data of a flow in an <advice>")
			continue
		}
		if _, ok := c.flows[x.Flow.Value]; !ok && isIdent(x.Flow.Value) {
			c.errf(at(pc, x.Flow.Pos.Offset), "no xflow named %s is defined; %s", x.Flow.Value, c.declared())
		}
		if _, clash := bound[x.Flow.Value]; clash {
			c.errf(at(pc, x.Flow.Pos.Offset), "flow name %s is also an advice variable of this AND-group; the generated code names the flow %s, so rename the variable", x.Flow.Value, x.Flow.Value)
		}
		if b, ok := bound[x.Var.Value]; !ok || b.Argument != nil {
			c.errf(at(pc, x.Var.Pos.Offset), "xflow(%s, %s): %s is not bound in this AND-group; bind it with target(%s) or local_var(LOCAL, %s)", x.Flow.Value, x.Var.Value, x.Var.Value, x.Var.Value, x.Var.Value)
		}
		if x.ID != nil {
			if _, clash := bound[x.ID.Value]; clash {
				c.errf(at(pc, x.ID.Pos.Offset), "flow ID variable %s is already bound in this AND-group; choose another name, e.g. id", x.ID.Value)
			}
			if _, clash := bound[x.ID.Value]; !clash && x.ID.Value == x.Var.Value {
				c.errf(at(pc, x.ID.Pos.Offset), "flow ID variable %s is the same as the structure variable; choose another name, e.g. id", x.ID.Value)
			}
		}
	}
	if r != nil && r.Action == nil && len(access) == 0 {
		c.errf(pos(selectors[0][0]), "the pointcut of <%s> must select member accesses with access(...): klasy finds the flow's structure through target or local_var there; for execution pointcuts write the code yourself in <action>", r.Kind)
	}
}

// kindOf names the kind of join point each selecting designator
// selects, for messages.
var kindOf = map[string]string{
	"access":     "a member access",
	"execution":  "a function's execution",
	"line":       "a source line's code",
	"block":      "a basic block's entry",
	"tracepoint": "a tracepoint's event",
}

// combineHint says what to write instead of a designator that cannot go
// with a line(...) or block(...).
func combineHint(t *Term, with string) string {
	switch {
	case t.Target != nil:
		return "; target(...) is the struct of an access(...): at a " + with + " bind locals with local_var(LOCAL, VAR)"
	case t.WithinFile != nil && with == "line":
		return "; line(FILE:LINE) names its file already"
	case t.WithinFunction != nil && with == "block":
		return "; block(FUNCTION) names its function already"
	case t.Xflow != nil:
		return "; xflow(...) follows the structs of access(...) join points"
	}
	return ""
}

// alternative prints an AND-group for messages.
func alternative(g []*Term) string {
	var b strings.Builder
	for i, t := range g {
		if i > 0 {
			b.WriteString(" AND ")
		}
		t.write(&b)
	}
	return b.String()
}

func (c *checker) declared() string {
	if len(c.f.Flows) == 0 {
		return `define it in the aspect with <xflow name="NAME"> ... </xflow>`
	}
	var names []string
	for _, fl := range c.f.Flows {
		names = append(names, fl.Name)
	}
	return "defined flows: " + strings.Join(names, ", ")
}

func (c *checker) flow(fl *Flow) {
	xin := map[string]*Pass{}
	for _, r := range fl.Rules {
		if r.Pointcut != nil {
			c.pointcut(r.Pointcut, r)
		}
		if r.Action != nil {
			c.checkBrackets(r.Action)
		}
		if p := r.Pass; p != nil && (p.Kind == XinMove || p.Kind == XinCopy) {
			if prev, dup := xin[p.Name.Value]; dup && p.Name.Value != "" {
				c.errf(p.Name.Off, "<%s name=%q> repeats the name of the <%s> at line %d; each inter-domain channel needs its own name", p.Kind, p.Name.Value, prev.Kind, c.f.Position(prev.Off).Line)
				continue
			}
			xin[p.Name.Value] = p
		}
	}
	for _, r := range fl.Rules {
		p := r.Pass
		if p == nil {
			continue
		}
		if (p.Kind == XoutMove || p.Kind == XoutCopy) && p.Name.Value != "" {
			if _, ok := xin[p.Name.Value]; !ok {
				var names []string
				for n := range xin {
					names = append(names, n)
				}
				slices.Sort(names)
				hint := "add a <transit> with <xin_move name=\"" + p.Name.Value + "\" ...> that stores the flow ID in a header"
				if len(names) > 0 {
					hint = "names of xin_move/xin_copy in this flow: " + strings.Join(names, ", ")
				}
				c.errf(p.Name.Off, "<%s name=%q> names no <xin_move> or <xin_copy> of xflow %s; %s", p.Kind, p.Name.Value, fl.Name, hint)
			}
		}
		for _, a := range []Attr{p.From, p.To} {
			if a.Value == fl.Name {
				c.errf(a.Off, "variable %q has the name of the flow; the generated code names the flow %s, so the variable needs another name", a.Value, fl.Name)
			}
		}
		if r.Pointcut != nil {
			// The translation declares from and to as locals of the
			// advice body; a binding of the same name would clash.
			for _, t := range Leaves(r.Pointcut.Expr) {
				if v := boundVar(t); v != nil {
					for _, a := range []Attr{p.From, p.To} {
						if a.Value == v.Value {
							c.errf(a.Off, "%q is already bound by %s in the <transit>'s pointcut; klasy binds from and to itself with local_var, so drop that binding or use another advice variable name there", a.Value, t.Designator())
						}
					}
				}
			}
		}
		if p.Kind != Move && p.Kind != Copy && r.Pointcut != nil {
			if _, ok := HeaderStruct(r.Pointcut); !ok {
				v := p.To.Value
				if p.Kind == XoutMove || p.Kind == XoutCopy {
					v = p.From.Value
				}
				c.errf(p.Off, "<%s> reads or writes bits of %s's header fields, so klasy needs the structure type of %s: the <transit>'s pointcut must access exactly one structure, named without %%, e.g. access(netif_tx_request.flags)", p.Kind, v, v)
			}
		}
	}
}

// HeaderStruct returns the one structure named by the access designators
// of pc, which is the type of the header variable of an inter-domain pass.
func HeaderStruct(pc *Pointcut) (string, bool) {
	name := ""
	for _, t := range Leaves(pc.Expr) {
		if t.Access == nil {
			continue
		}
		s := t.Access.Struct.Value
		if !isIdent(s) || name != "" && s != name {
			return "", false
		}
		name = s
	}
	return name, name != ""
}
