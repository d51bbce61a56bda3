package aspect

// Advice bodies are C. klasy looks into them only for its context
// variables, $pc$ and $retval$, which it replaces when it generates the
// advice module; everything else is the compiler's business (that a
// <replace> returns a value on every path too: the weaver makes gcc's
// -Wreturn-type an error there).

import "fmt"

// Context variables an advice body may use.
const (
	// SpecialPC is the join point's address in the running kernel.
	SpecialPC = "pc"
	// SpecialRetval is the return value, in after advice of an
	// execution join point.
	SpecialRetval = "retval"
)

// Special is one $name$ in an advice body, outside comments and string
// or character literals.
type Special struct {
	Name string
	Off  int // byte offset of the opening $ in Text.S
	End  int // byte offset just past the closing $
}

// Specials returns the $name$ tokens of a C body in order. A $ that does
// not open a $name$ token (GCC allows $ in identifiers) is left alone.
func Specials(body string) []Special {
	var out []Special
	for i := 0; i < len(body); {
		c := body[i]
		switch {
		case c == '/' && i+1 < len(body) && body[i+1] == '/':
			for i < len(body) && body[i] != '\n' {
				i++
			}
		case c == '/' && i+1 < len(body) && body[i+1] == '*':
			j := i + 2
			for j+1 < len(body) && !(body[j] == '*' && body[j+1] == '/') {
				j++
			}
			i = j + 2
		case c == '"' || c == '\'':
			j := i + 1
			for j < len(body) && body[j] != c && body[j] != '\n' {
				if body[j] == '\\' {
					j++
				}
				j++
			}
			i = j + 1
		case c == '$':
			j := i + 1
			for j < len(body) && isIdentByte(body[j]) {
				j++
			}
			if j > i+1 && j < len(body) && body[j] == '$' && (i == 0 || !isIdentByte(body[i-1])) {
				out = append(out, Special{Name: body[i+1 : j], Off: i, End: j + 1})
				i = j + 1
				continue
			}
			i++
		default:
			i++
		}
	}
	return out
}

func isIdentByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// checkBody checks the context variables an advice body uses against
// where it runs: $retval$ exists only after an execution join point.
func (c *checker) checkBody(a *Advice) {
	if a.Pointcut == nil {
		return
	}
	if a.When == "after" {
		// A block's entry has no "after": its end is a branch.
		for _, t := range Leaves(a.Pointcut.Expr) {
			if t.Block != nil {
				c.errf(at(a.Pointcut, t.Pos.Offset), "block(...) selects the entries of basic blocks, which have no after: use <before> advice (after a line's code: line(FILE:LINE))")
			}
			if t.Tracepoint != nil {
				c.errf(at(a.Pointcut, t.Pos.Offset), "tracepoint(...) is an event, which has no after: use <before> advice")
			}
		}
	}
	for _, s := range Specials(a.Body.S) {
		off := a.Body.Offset(s.Off)
		switch s.Name {
		case SpecialPC:
		case SpecialRetval:
			if a.When == Replace {
				c.errf(off, "$retval$ is the value the original function returns, which never runs under <replace>: the replacement gives the function's value with return")
				continue
			}
			if a.When != "after" {
				c.errf(off, "$retval$ is the value a function returns: use it in <after> advice of an execution(...) pointcut, not in <%s>", a.When)
				continue
			}
			if g, what := otherGroup(a.Pointcut); g != nil {
				c.errf(off, "$retval$ is the value a function returns, but this advice also runs after %s (%s); use it only with execution(...) pointcuts", what, alternative(g))
			}
		default:
			c.errf(off, "unknown context variable %s; advice can use $pc$ (the join point's address) and, after an execution, $retval$", fmt.Sprintf("$%s$", s.Name))
		}
	}
}

// otherGroup returns an AND-group of pc that selects other join points
// than executions, and what it selects; nil if every group is an
// execution.
func otherGroup(pc *Pointcut) ([]*Term, string) {
	groups, ok := Groups(pc.Expr)
	if !ok {
		return nil, ""
	}
	for _, g := range groups {
		for _, t := range g {
			switch {
			case t.Access != nil:
				return g, "member accesses"
			case t.Line != nil:
				return g, "a line's code"
			}
		}
	}
	return nil, ""
}

// bracketProblem is a bracket of advice C that does not pair up: at Off
// in the body (a byte offset in Text.S), Msg says why.
type bracketProblem struct {
	Off int
	Msg string
}

// Brackets finds the braces, parentheses and brackets of a C body that
// do not pair up, outside comments and string or character literals:
// a closer with nothing open (a `}` that would end the function the
// advice is generated into, and let what follows be code of its own), a
// closer of another kind than the last open one, and what is still open
// at the end of the body. Digraphs (<% %> <: :>) count as the brackets
// they are; comments and literals continue over a backslash-newline, as
// the compiler reads them. An unclosed /* comment is a problem too: it
// would swallow the generated code after the body. where says an offset
// of the body as a place in the file, for messages.
func brackets(body string, where func(off int) string) []bracketProblem {
	var out []bracketProblem
	type open struct {
		c   byte
		off int
		tok string
	}
	var stack []open
	closer := map[byte]byte{')': '(', ']': '[', '}': '{'}
	// skipNL returns the index past a backslash-newline at i, or i.
	skipNL := func(i int) int {
		if i < len(body) && body[i] == '\\' {
			if i+1 < len(body) && body[i+1] == '\n' {
				return i + 2
			}
			if i+2 < len(body) && body[i+1] == '\r' && body[i+2] == '\n' {
				return i + 3
			}
		}
		return i
	}
	for i := 0; i < len(body); {
		c := body[i]
		var next byte
		if j := skipNL(i + 1); j < len(body) {
			next = body[j]
		}
		switch {
		case c == '/' && next == '/':
			for i < len(body) && body[i] != '\n' {
				if j := skipNL(i); j != i {
					i = j
					continue
				}
				i++
			}
			continue
		case c == '/' && next == '*':
			j := skipNL(i+1) + 1
			for ; j < len(body); j++ {
				if body[j] == '*' {
					if k := skipNL(j + 1); k < len(body) && body[k] == '/' {
						break
					}
				}
			}
			if j >= len(body) {
				out = append(out, bracketProblem{Off: i, Msg: "/* comment is not closed in this advice"})
				return out
			}
			i = skipNL(j+1) + 1
			continue
		case c == '"' || c == '\'':
			j := i + 1
			for j < len(body) && body[j] != c && body[j] != '\n' {
				if k := skipNL(j); k != j {
					j = k
					continue
				}
				if body[j] == '\\' {
					j++
				}
				j++
			}
			i = j + 1
			continue
		}
		b, n := c, 1
		switch {
		case c == '<' && next == '%':
			b, n = '{', skipNL(i+1)+1-i
		case c == '%' && next == '>':
			b, n = '}', skipNL(i+1)+1-i
		case c == '<' && next == ':':
			b, n = '[', skipNL(i+1)+1-i
		case c == ':' && next == '>':
			b, n = ']', skipNL(i+1)+1-i
		}
		tok := body[i : i+n]
		switch b {
		case '(', '[', '{':
			stack = append(stack, open{b, i, tok})
		case ')', ']', '}':
			want := closer[b]
			switch {
			case len(stack) == 0:
				msg := fmt.Sprintf("`%s` has no `%c` to close in this advice", tok, want)
				if b == '}' {
					msg += ": advice is the inside of a function, and cannot end it; balance its braces"
				}
				out = append(out, bracketProblem{Off: i, Msg: msg})
				return out
			case stack[len(stack)-1].c != want:
				top := stack[len(stack)-1]
				out = append(out, bracketProblem{Off: i, Msg: fmt.Sprintf("`%s` closes the `%s` at %s; balance the brackets", tok, top.tok, where(top.off))})
				return out
			}
			stack = stack[:len(stack)-1]
		}
		i += n
	}
	for _, o := range stack {
		out = append(out, bracketProblem{Off: o.off, Msg: fmt.Sprintf("`%s` is not closed in this advice: advice is the inside of a function; close it before the advice ends", o.tok)})
	}
	return out
}

// checkBrackets reports the brackets of the C text t (an advice body or
// a flow rule's action) that do not pair up, at their place in the file.
func (c *checker) checkBrackets(t *Text) {
	where := func(off int) string {
		pos := c.f.Position(t.Offset(off))
		return fmt.Sprintf("%d:%d", pos.Line, pos.Col)
	}
	for _, p := range brackets(t.S, where) {
		c.errf(t.Offset(p.Off), "%s", p.Msg)
	}
}
