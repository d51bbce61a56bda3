package aspect

import (
	"slices"
	"strconv"
	"strings"
)

// Which domain an advice goes to (dissertation §5.4.2). A pointcut's
// within_file(F@D) and within_function(G@D) hold only in domain D, where
// they are within_file(F) and within_function(G); their other designators
// hold in every domain. A pointcut being an OR of AND-groups
// (Groups), a group goes to the domains all its qualifiers name:
// every domain when it has none, D when they all name D, none when they
// name two. An advice goes to the domains of its groups, and in each is
// resolved with only the groups that go there.

// groupDomain is the one domain g's qualifiers name ("" none), and
// whether they agree (false: two domains, so the group goes nowhere).
func groupDomain(g []*Term) (string, bool) {
	dom := ""
	for _, t := range g {
		d := t.Domain()
		switch {
		case d == nil:
		case dom == "":
			dom = d.Value
		case !strings.EqualFold(dom, d.Value):
			return "", false
		}
	}
	return dom, true
}

// Domain is t's @DOMAIN qualifier, nil if it has none.
func (t *Term) Domain() *Name {
	switch {
	case t.WithinFile != nil:
		return t.WithinFile.Domain
	case t.WithinFunction != nil:
		return t.WithinFunction.Domain
	}
	return nil
}

// DomainGroups are the AND-groups of a pointcut that go to domain dom;
// with dom "" (a weave of one kernel, no domains file) every group,
// qualified or not, as the resolver then refuses a qualifier.
func DomainGroups(groups [][]*Term, dom string) [][]*Term {
	if dom == "" {
		return groups
	}
	var out [][]*Term
	for _, g := range groups {
		if d, ok := groupDomain(g); ok && (d == "" || strings.EqualFold(d, dom)) {
			out = append(out, g)
		}
	}
	return out
}

// AdviceDomains says, for each advice of f in order, which of the
// domains (names from a domains file) receive it. An aspect that names
// a domain not among them, or an advice no domain receives, gets
// diagnostics at the pointcut.
func AdviceDomains(f *File, domains []string) ([][]string, Diagnostics) {
	known := func(n string) bool {
		return slices.ContainsFunc(domains, func(d string) bool { return strings.EqualFold(d, n) })
	}
	var diags Diagnostics
	at := func(pc *Pointcut, off int) Position { return f.Position(pc.Text.Offset(off)) }
	out := make([][]string, len(f.Advice))
	for i, a := range f.Advice {
		groups, ok := Groups(a.Pointcut.Expr)
		if !ok {
			diags = append(diags, Diagnostic{Pos: at(a.Pointcut, 0), Msg: "pointcut has too many AND-groups"})
			continue
		}
		bad := false
		for _, g := range groups {
			for _, t := range g {
				if d := t.Domain(); d != nil && !known(d.Value) {
					diags = append(diags, Diagnostic{Pos: at(a.Pointcut, d.Pos.Offset),
						Msg: "domain " + d.Value + ": the domains file has no such domain (it has " + strings.Join(domains, ", ") + ")"})
					bad = true
				}
			}
		}
		if bad {
			continue
		}
		for _, d := range domains {
			if len(DomainGroups(groups, d)) > 0 {
				out[i] = append(out[i], d)
			}
		}
		if len(out[i]) == 0 {
			diags = append(diags, Diagnostic{Pos: at(a.Pointcut, 0),
				Msg: "advice " + strconv.Itoa(i+1) + " goes to no domain: each AND-group of its pointcut names two domains with @"})
		}
	}
	if len(diags) > 0 {
		return nil, diags
	}
	return out, nil
}
