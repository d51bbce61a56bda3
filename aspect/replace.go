package aspect

// <replace> advice: the new body of one function (issue 13, DKM's
// nullify and replace). The weaver hooks the function's entry and
// returns to its caller with the value the advice returns, so the
// pointcut must name exactly one out-of-line function: the rules below
// check what can be checked without the kernel image; the resolver
// checks the rest (one body, no inlined copies, an ftrace site).

import "strings"

// checkReplace applies the rules of <replace> to a's pointcut: a single
// AND-group (no OR) of one execution(FUNC) without wildcards, optionally
// with argument(...) and within_file(...).
func (c *checker) checkReplace(a *Advice) {
	pc := a.Pointcut
	if a.When != Replace || pc == nil {
		return
	}
	if or := firstOr(pc.Expr.Or); or != nil {
		c.errf(at(pc, or.Pos.Offset), "<replace> is the new body of one function, so its pointcut cannot join alternatives with OR: write one <advice> per function")
		return
	}
	groups, ok := Groups(pc.Expr)
	if !ok || len(groups) != 1 {
		return
	}
	var execs []*Term
	for _, t := range groups[0] {
		if t.Execution != nil {
			execs = append(execs, t)
		}
	}
	if len(execs) == 0 {
		c.errf(at(pc, 0), "<replace> needs execution(FUNC): it is the new body of the function FUNC")
		return
	}
	// Other designators than argument and within_file are refused with
	// execution by the group's own rules; within_function is not.
	for _, t := range groups[0] {
		if t.WithinFunction != nil {
			c.errf(at(pc, t.Pos.Offset), "within_function cannot be used in the pointcut of <replace>: it selects inlined copies by their caller, and a replacement replaces the function's out-of-line body; to choose among static functions of one name use within_file(FILE)")
		}
	}
	if len(execs) > 1 {
		c.errf(at(pc, execs[1].Pos.Offset), "<replace> replaces one function: its pointcut has one execution(FUNC), not %d", len(execs))
		return
	}
	f := execs[0].Execution.Func
	if i := strings.IndexByte(f.Value, '%'); i >= 0 {
		c.errf(at(pc, f.Pos.Offset+i), "execution(%s): <replace> replaces one function, so name it without the wildcard %%", f.Value)
	}
}

// firstOr returns the second alternative of the first OR in o or in a
// parenthesized group inside it, nil if the expression has no OR.
func firstOr(o *Or) *And {
	if len(o.And) > 1 {
		return o.And[1]
	}
	for _, a := range o.And {
		for _, t := range a.Terms {
			if t.Group != nil {
				if alt := firstOr(t.Group); alt != nil {
					return alt
				}
			}
		}
	}
	return nil
}
