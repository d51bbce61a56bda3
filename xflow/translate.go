package xflow

// Translation of xflow definitions into plain advice (dissertation
// ch. 5.4.1, Figures 5.12-5.20). The generated code calls the flow ID
// runtime:
//
//	int  get_new_flowid(void);                      a fresh, non-zero ID
//	void register_flowid(FLOW, void *obj, int id);  obj now carries id
//	int  get_flowid(FLOW, void *obj);               0 if obj carries none
//	void remove_flowid(FLOW, void *obj);            obj carries none
//	void truncate_flowid(FLOW, int id, int bits);   id is cut to its low bits
//	void flowid_not_found(FLOW);                    an xout found no ID
//	KLASY_SET_FLOW(id)                              the hit's records carry id
//
// where FLOW is the flow's name as a C identifier, declared by the weaver
// (one pointer-to-ID table per flow; weaver/runtime/klasy_rt.h has the
// macros and says how). truncate_flowid comes before xin_* store an ID in
// fields narrower than its 32 bits, so the runtime can count the IDs that
// become ambiguous.

import (
	"fmt"
	"slices"
	"strings"

	"github.com/klasy/klasy/aspect"
)

// Translate returns a plain aspect equivalent to f: every flow rule
// becomes an advice placed before the user's advice (so flow IDs are up
// to date when user advice runs at the same join point), and advice
// using xflow(...) runs its body only for data of the flow. f must have
// passed aspect.Check.
func Translate(f *aspect.File) (*aspect.File, error) {
	t := &translator{in: f, names: newNamer(f)}
	out := f.Derived()
	out.Imports = f.Imports
	if len(f.Flows) > 0 {
		var flows []string
		for _, fl := range f.Flows {
			flows = append(flows, fl.Name)
		}
		out.Comment = fmt.Sprintf("translated by klasy translate from %s; flow tables the weaver declares: %s", f.Name, strings.Join(flows, ", "))
	}
	for _, fl := range f.Flows {
		counts := map[aspect.RuleKind]int{}
		for _, r := range fl.Rules {
			counts[r.Kind]++
			a, err := t.rule(fl, r, counts[r.Kind])
			if err != nil {
				return nil, fmt.Errorf("translating <%s> of xflow %s: %w", r.Kind, fl.Name, err)
			}
			out.Advice = append(out.Advice, a)
		}
	}
	for _, a := range f.Advice {
		as, err := t.advice(a)
		if err != nil {
			return nil, fmt.Errorf("translating advice at %s: %w", f.Position(a.Off), err)
		}
		out.Advice = append(out.Advice, as...)
	}
	return out, nil
}

type translator struct {
	in    *aspect.File
	names *namer
	fid   int // counter for flow ID variables of xflow(...) without a third parameter
}

// namer makes the hidden variable names. They all start with a prefix
// that occurs nowhere in the input aspect, so they cannot collide with
// anything the user wrote, and they are built from flow names and rule
// numbers, so the same input always gives the same names.
type namer struct{ prefix string }

func newNamer(f *aspect.File) *namer {
	var texts []string
	for _, im := range f.Imports {
		texts = append(texts, im.Header)
	}
	for _, a := range f.Advice {
		texts = append(texts, a.Body.S)
		if a.Pointcut != nil {
			texts = append(texts, a.Pointcut.Text.S)
		}
	}
	for _, fl := range f.Flows {
		texts = append(texts, fl.Name)
		for _, r := range fl.Rules {
			if r.Pointcut != nil {
				texts = append(texts, r.Pointcut.Text.S)
			}
			if r.Action != nil {
				texts = append(texts, r.Action.S)
			}
			if r.Select != nil {
				texts = append(texts, r.Select.LocalVar.Value)
			}
			if p := r.Pass; p != nil {
				texts = append(texts, p.Name.Value, p.From.Value, p.To.Value)
				for _, fd := range p.Fields {
					texts = append(texts, fd.Member.Value)
				}
			}
		}
	}
	all := strings.Join(texts, "\n")
	prefix := "__kx"
	for k := 1; strings.Contains(all, prefix); k++ {
		prefix = fmt.Sprintf("__kx%d", k)
	}
	return &namer{prefix: prefix}
}

func (n *namer) name(parts ...string) string {
	return n.prefix + "_" + strings.Join(parts, "_")
}

// and appends designators to each OR alternative of a pointcut, so that
// they bind to every alternative without a new pair of parentheses: a
// pointcut nested as deep as klasy check allows stays within the limit.
func and(pc *aspect.Pointcut, extra ...string) (*aspect.Pointcut, error) {
	var alts []string
	for _, a := range pc.Expr.Or.And {
		alt := (&aspect.Expr{Or: &aspect.Or{And: []*aspect.And{a}}}).String()
		for _, e := range extra {
			alt += " AND " + e
		}
		alts = append(alts, alt)
	}
	return aspect.ParsePointcut(strings.Join(alts, " OR "))
}

// code formats generated C lines at the indentation Format uses for
// advice bodies.
func code(lines ...string) aspect.Text {
	var b strings.Builder
	b.WriteByte('\n')
	for _, l := range lines {
		if l != "" {
			b.WriteString("      ")
		}
		b.WriteString(l)
		b.WriteByte('\n')
	}
	b.WriteString("    ")
	return aspect.PlainText(b.String())
}

func (t *translator) rule(fl *aspect.Flow, r *aspect.Rule, n int) (*aspect.Advice, error) {
	if r.Action != nil {
		// The user wrote the registration code and its bindings.
		return &aspect.Advice{Pointcut: r.Pointcut, When: "before", Body: *r.Action}, nil
	}
	switch r.Kind {
	case aspect.Start, aspect.Quit:
		h := t.names.name(fl.Name, fmt.Sprintf("%s%d", r.Kind, n))
		bind, obj := "target("+h+")", h
		if r.Select != nil {
			bind, obj = "local_var("+r.Select.LocalVar.Value+", "+h+")", "*(void **)"+h
		}
		pc, err := and(r.Pointcut, bind)
		if err != nil {
			return nil, err
		}
		stmt := fmt.Sprintf("register_flowid(%s, %s, get_new_flowid());", fl.Name, obj)
		if r.Kind == aspect.Quit {
			stmt = fmt.Sprintf("remove_flowid(%s, %s);", fl.Name, obj)
		}
		return &aspect.Advice{Off: r.Off, Pointcut: pc, When: "before", Body: at(code(stmt), r.Off)}, nil
	case aspect.Transit:
		return t.transit(fl, r, n)
	}
	return nil, fmt.Errorf("unknown rule kind %q", r.Kind)
}

func (t *translator) transit(fl *aspect.Flow, r *aspect.Rule, n int) (*aspect.Advice, error) {
	p := r.Pass
	base := fmt.Sprintf("transit%d", n)
	hFrom, hTo, id := t.names.name(fl.Name, base, "from"), t.names.name(fl.Name, base, "to"), t.names.name(fl.Name, base, "id")
	pc, err := and(r.Pointcut, "local_var("+p.From.Value+", "+hFrom+")", "local_var("+p.To.Value+", "+hTo+")")
	if err != nil {
		return nil, err
	}
	from, to := p.From.Value, p.To.Value
	var lines []string
	switch p.Kind {
	case aspect.Move, aspect.Copy:
		lines = []string{
			fmt.Sprintf("void *%s = *(void **)%s;", from, hFrom),
			fmt.Sprintf("void *%s = *(void **)%s;", to, hTo),
			fmt.Sprintf("int %s = get_flowid(%s, %s);", id, fl.Name, from),
			fmt.Sprintf("if (%s != 0) {", id),
			fmt.Sprintf("  register_flowid(%s, %s, %s);", fl.Name, to, id),
		}
		if p.Kind.Removes() {
			lines = append(lines, fmt.Sprintf("  remove_flowid(%s, %s);", fl.Name, from))
		}
		lines = append(lines, "}")
	case aspect.XinMove, aspect.XinCopy:
		st, ok := aspect.HeaderStruct(r.Pointcut)
		if !ok {
			return nil, fmt.Errorf("<%s>: no single structure type for %s", p.Kind, to)
		}
		lines = []string{
			fmt.Sprintf("void *%s = *(void **)%s;", from, hFrom),
			fmt.Sprintf("struct %s *%s = *(void **)%s;", st, to, hTo),
			fmt.Sprintf("unsigned long long %s = (unsigned int)get_flowid(%s, %s);", id, fl.Name, from),
			fmt.Sprintf("if (%s != 0) {", id),
		}
		// Fields narrower than an ID keep its low bits only: the
		// runtime counts the ID as ambiguous if another ID live in the
		// table has the same ones.
		if kept := keptBits(p.Fields); kept < 32 {
			lines = append(lines, fmt.Sprintf("  truncate_flowid(%s, %s, %d);", fl.Name, id, kept))
		}
		// The ID is stored from its low bits upward: the first field
		// gets the lowest bits. Bits beyond the fields are dropped. It
		// is shifted in 64 bits because a field may be 32 bits wide,
		// and shifting a 32-bit int by 32 is undefined in C.
		for i, fd := range p.Fields {
			m := to + "->" + fd.Member.Value
			lines = append(lines, fmt.Sprintf("  %s = (%s & ~((__typeof__(%s))%s << %d)) | ((__typeof__(%s))(%s & %s) << %d);",
				m, m, m, mask(fd.Size), fd.Offset, m, id, mask(fd.Size), fd.Offset))
			if i < len(p.Fields)-1 {
				lines = append(lines, fmt.Sprintf("  %s >>= %d;", id, fd.Size))
			}
		}
		if p.Kind.Removes() {
			lines = append(lines, fmt.Sprintf("  remove_flowid(%s, %s);", fl.Name, from))
		}
		lines = append(lines, "}")
	case aspect.XoutMove, aspect.XoutCopy:
		st, ok := aspect.HeaderStruct(r.Pointcut)
		if !ok {
			return nil, fmt.Errorf("<%s>: no single structure type for %s", p.Kind, from)
		}
		in := xinNamed(fl, p.Name.Value)
		if in == nil {
			return nil, fmt.Errorf("<%s name=%q>: no xin_move or xin_copy of that name", p.Kind, p.Name.Value)
		}
		lines = []string{
			fmt.Sprintf("struct %s *%s = *(void **)%s;", st, from, hFrom),
			fmt.Sprintf("void *%s = *(void **)%s;", to, hTo),
			fmt.Sprintf("unsigned int %s = 0;", id),
		}
		shift := 0
		for _, fd := range in.Fields {
			// A flow ID has 32 bits; fields past them carry only zeros
			// (ch. 5.3.1: upper bits that do not fit are ignored).
			if shift < 32 {
				m := from + "->" + fd.Member.Value
				lines = append(lines, fmt.Sprintf("%s |= (unsigned int)((%s >> %d) & %s) << %d;", id, m, fd.Offset, mask(fd.Size), shift))
			}
			shift += fd.Size
		}
		if p.Kind.Removes() {
			// Give the header back its original bits.
			for _, fd := range in.Fields {
				m := from + "->" + fd.Member.Value
				lines = append(lines, fmt.Sprintf("%s &= ~((__typeof__(%s))%s << %d);", m, m, mask(fd.Size), fd.Offset))
			}
		}
		// A header without an ID registers nothing; the runtime counts
		// it (status: noid).
		lines = append(lines,
			fmt.Sprintf("if (%s != 0)", id),
			fmt.Sprintf("  register_flowid(%s, %s, (int)%s);", fl.Name, to, id),
			"else",
			fmt.Sprintf("  flowid_not_found(%s);", fl.Name))
	default:
		return nil, fmt.Errorf("unknown pass <%s>", p.Kind)
	}
	return &aspect.Advice{Off: r.Off, Pointcut: pc, When: "before", Body: at(code(lines...), r.Off)}, nil
}

// at places generated code at offset off of the aspect file (the rule
// or advice it comes from), where the weaver's #line directives and
// compiler errors point.
func at(t aspect.Text, off int) aspect.Text {
	t.Start = off
	return t
}

func mask(bits int) string { return fmt.Sprintf("0x%xU", uint64(1)<<bits-1) }

// keptBits is how many bits of a flow ID the fields hold.
func keptBits(fields []*aspect.Field) int {
	n := 0
	for _, fd := range fields {
		n += fd.Size
	}
	return n
}

func xinNamed(fl *aspect.Flow, name string) *aspect.Pass {
	for _, r := range fl.Rules {
		if p := r.Pass; p != nil && (p.Kind == aspect.XinMove || p.Kind == aspect.XinCopy) && p.Name.Value == name {
			return p
		}
	}
	return nil
}

// flowCheck is one xflow(...) of an AND-group, with how its variable is
// bound there (target gives the structure, local_var a pointer to it).
type flowCheck struct {
	flow, v, id string
	local       bool
}

// advice translates user advice. Advice without xflow(...) is kept as
// is. Otherwise the pointcut is split into its AND-groups, xflow(...)
// removed from each, and groups needing the same flow checks share one
// advice whose body runs only when the checks pass (Figure 5.18).
func (t *translator) advice(a *aspect.Advice) ([]*aspect.Advice, error) {
	groups, ok := aspect.Groups(a.Pointcut.Expr)
	if !ok {
		return nil, fmt.Errorf("pointcut has too many AND-groups")
	}
	uses := false
	for _, g := range groups {
		for _, term := range g {
			uses = uses || term.Xflow != nil
		}
	}
	if !uses {
		return []*aspect.Advice{a}, nil
	}
	type part struct {
		checks []flowCheck
		alts   []string
	}
	var parts []*part
	byKey := map[string]*part{}
	for _, g := range groups {
		bound := map[string]bool{} // advice variable -> bound by local_var
		for _, term := range g {
			switch {
			case term.Target != nil:
				bound[term.Target.Var.Value] = false
			case term.LocalVar != nil:
				bound[term.LocalVar.Var.Value] = true
			}
		}
		var checks []flowCheck
		var rest []string
		for _, term := range g {
			if x := term.Xflow; x != nil {
				fc := flowCheck{flow: x.Flow.Value, v: x.Var.Value, local: bound[x.Var.Value]}
				if x.ID != nil {
					fc.id = x.ID.Value
				}
				checks = append(checks, fc)
				continue
			}
			rest = append(rest, (&aspect.Expr{Or: &aspect.Or{And: []*aspect.And{{Terms: []*aspect.Term{term}}}}}).String())
		}
		key := fmt.Sprint(checks)
		p := byKey[key]
		if p == nil {
			p = &part{checks: checks}
			byKey[key] = p
			parts = append(parts, p)
		}
		alt := strings.Join(rest, " AND ")
		if !slices.Contains(p.alts, alt) {
			p.alts = append(p.alts, alt)
		}
	}
	var out []*aspect.Advice
	for _, p := range parts {
		pc, err := aspect.ParsePointcut(strings.Join(p.alts, " OR "))
		if err != nil {
			return nil, err
		}
		body := a.Body.S
		if len(p.checks) > 0 {
			body = t.wrap(body, p.checks)
		}
		out = append(out, &aspect.Advice{Off: a.Off, Pointcut: pc, When: a.When, Body: at(aspect.PlainText(body), a.Body.Offset(0))})
	}
	return out, nil
}

// wrap puts the user's body inside the flow ID checks of Figure 5.18:
// the body runs only if every checked structure belongs to its flow.
func (t *translator) wrap(body string, checks []flowCheck) string {
	var b strings.Builder
	b.WriteByte('\n')
	indent := "      "
	first := ""
	for _, c := range checks {
		id := c.id
		if id == "" {
			t.fid++
			id = t.names.name(fmt.Sprintf("fid%d", t.fid))
		}
		if first == "" {
			first = id
		}
		obj := c.v
		if c.local {
			obj = "*(void **)" + c.v
		}
		fmt.Fprintf(&b, "%sint %s = get_flowid(%s, %s);\n", indent, id, c.flow, obj)
		fmt.Fprintf(&b, "%sif (%s != 0) {\n", indent, id)
		indent += "  "
	}
	// The hit's records carry the (first) flow's ID: klasy trace
	// follows the flow by it, across CPUs and kernels.
	fmt.Fprintf(&b, "%sKLASY_SET_FLOW(%s);\n", indent, first)
	b.WriteString(reindent(body, indent))
	for range checks {
		indent = indent[:len(indent)-2]
		fmt.Fprintf(&b, "%s}\n", indent)
	}
	b.WriteString("    ")
	return b.String()
}

// reindent moves the user's body to indent, keeping its relative
// indentation. A body with backslash-continued lines (which may be inside
// string literals) is left exactly as written.
func reindent(body, indent string) string {
	body = strings.TrimRight(strings.TrimLeft(body, "\r\n"), " \t\r\n")
	lines := strings.Split(body, "\n")
	common, set := "", false
	for _, l := range lines {
		if strings.HasSuffix(strings.TrimRight(l, "\r"), "\\") {
			return body + "\n"
		}
		if strings.TrimSpace(l) == "" {
			continue
		}
		lead := l[:len(l)-len(strings.TrimLeft(l, " \t"))]
		if !set {
			common, set = lead, true
			continue
		}
		for !strings.HasPrefix(lead, common) {
			common = common[:len(common)-1]
		}
	}
	var b strings.Builder
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			b.WriteByte('\n')
			continue
		}
		b.WriteString(indent + strings.TrimPrefix(l, common) + "\n")
	}
	return b.String()
}
