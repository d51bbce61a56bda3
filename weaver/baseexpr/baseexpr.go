package baseexpr

import (
	"fmt"
	"strconv"
	"strings"
)

// The plugin records how the address of an accessed struct is computed
// as a C expression (debugklasy.Base.Expr): "skb" for skb->len, "&s" for
// s.len, "p->thread" for p->thread->fs, "&t->sched_info" for
// t->sched_info.last_arrival, "(char *)node - 24" after container_of,
// "skb_shinfo(skb)" for a call. This file parses that expression (the
// plugin's describer in gcc-patches/klasy.cc writes exactly this
// grammar) and works out the struct's address from it: the dynamic part
// (a variable's value, a load, a call) plus a constant byte offset that
// struct layouts give.

// ExprKind is a node of a base expression.
type ExprKind uint8

const (
	Var     ExprKind = iota // name
	bNum                    // n
	Call                    // name(...), opaque
	bAddr                   // &sub
	bDeref                  // *(sub)
	bArrow                  // sub->name (name may be a.b.c: nested members)
	bDot                    // sub.name
	bIndex                  // sub[n], or sub[?] when !constIdx
	bCast                   // (char *)sub
	bAddSub                 // sub + n or sub - n (n signed), at the top or in parentheses
	bOpaque                 // what klasy does not compute (integer arithmetic of two values, "?")
)

type Expr struct {
	Kind     ExprKind
	Name     string
	n        int64
	constIdx bool
	sub      *Expr
}

func (e *Expr) String() string {
	if e == nil {
		return "<nil>"
	}
	switch e.Kind {
	case Var, Call:
		return e.Name
	case bNum:
		return fmt.Sprint(e.n)
	case bAddr:
		return "&" + e.sub.String()
	case bDeref:
		return "*(" + e.sub.String() + ")"
	case bArrow:
		return e.sub.String() + "->" + e.Name
	case bDot:
		return e.sub.String() + "." + e.Name
	case bIndex:
		if !e.constIdx {
			return e.sub.String() + "[?]"
		}
		return fmt.Sprintf("%s[%d]", e.sub, e.n)
	case bCast:
		return "(char *)" + e.sub.String()
	case bAddSub:
		return fmt.Sprintf("(%s %+d)", e.sub, e.n)
	}
	return "?"
}

// Parse parses a recorded base expression.
func Parse(s string) (*Expr, error) {
	p := &bparser{s: s}
	e, err := p.expr()
	if err != nil {
		return nil, fmt.Errorf("base %q: %v", s, err)
	}
	if p.i != len(p.s) {
		return nil, fmt.Errorf("base %q: unexpected %q", s, p.s[p.i:])
	}
	return e, nil
}

type bparser struct {
	s string
	i int
}

func (p *bparser) peek(t string) bool { return strings.HasPrefix(p.s[p.i:], t) }

func (p *bparser) eat(t string) bool {
	if p.peek(t) {
		p.i += len(t)
		return true
	}
	return false
}

// expr: unary { (" + " | " - ") unary }
func (p *bparser) expr() (*Expr, error) {
	e, err := p.unary()
	if err != nil {
		return nil, err
	}
	for {
		sign := int64(1)
		switch {
		case p.eat(" + "):
		case p.eat(" - "):
			sign = -1
		default:
			return e, nil
		}
		r, err := p.unary()
		if err != nil {
			return nil, err
		}
		if r.Kind != bNum {
			e = &Expr{Kind: bOpaque, Name: "arithmetic of two values"}
			continue
		}
		e = &Expr{Kind: bAddSub, sub: e, n: sign * r.n}
	}
}

func (p *bparser) unary() (*Expr, error) {
	switch {
	case p.eat("&"):
		sub, err := p.unary()
		if err != nil {
			return nil, err
		}
		return &Expr{Kind: bAddr, sub: sub}, nil
	case p.eat("*("):
		sub, err := p.expr()
		if err != nil {
			return nil, err
		}
		if !p.eat(")") {
			return nil, fmt.Errorf("no ) after *(")
		}
		return p.postfix(&Expr{Kind: bDeref, sub: sub})
	case p.eat("(char *)"):
		sub, err := p.unary()
		if err != nil {
			return nil, err
		}
		return &Expr{Kind: bCast, sub: sub}, nil
	}
	prim, err := p.primary()
	if err != nil {
		return nil, err
	}
	return p.postfix(prim)
}

func (p *bparser) postfix(e *Expr) (*Expr, error) {
	for {
		switch {
		case p.eat("->"):
			name := p.members()
			if name == "" {
				return nil, fmt.Errorf("no member after ->")
			}
			e = &Expr{Kind: bArrow, sub: e, Name: name}
		case p.peek(".") && !p.peek(".."):
			p.i++
			name := p.members()
			if name == "" {
				return nil, fmt.Errorf("no member after .")
			}
			e = &Expr{Kind: bDot, sub: e, Name: name}
		case p.eat("["):
			start := p.i
			if err := p.skipBalanced('[', ']'); err != nil {
				return nil, err
			}
			idx := p.s[start : p.i-1]
			n, err := strconv.ParseInt(idx, 10, 64)
			e = &Expr{Kind: bIndex, sub: e, n: n, constIdx: err == nil}
		default:
			return e, nil
		}
	}
}

// members reads a.b.c after -> or . (a member of a member).
func (p *bparser) members() string {
	start := p.i
	for {
		if p.ident() == "" {
			break
		}
		if !p.peek(".") || p.peek("..") {
			break
		}
		// a.b: another member follows only if an identifier does.
		save := p.i
		p.i++
		if p.i >= len(p.s) || !isIdentStart(p.s[p.i]) {
			p.i = save
			break
		}
	}
	return p.s[start:p.i]
}

func isIdentStart(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func (p *bparser) ident() string {
	start := p.i
	for p.i < len(p.s) {
		c := p.s[p.i]
		if isIdentStart(c) || p.i > start && c >= '0' && c <= '9' {
			p.i++
			continue
		}
		break
	}
	return p.s[start:p.i]
}

// skipBalanced skips to just past the close matching an open already
// read.
func (p *bparser) skipBalanced(open, close byte) error {
	depth := 1
	for p.i < len(p.s) {
		c := p.s[p.i]
		p.i++
		switch c {
		case '(', '[':
			depth++
		case ')', ']':
			depth--
			if depth == 0 {
				if c != close {
					return fmt.Errorf("%c closed by %c", open, c)
				}
				return nil
			}
		}
	}
	return fmt.Errorf("unclosed %c", open)
}

func (p *bparser) primary() (*Expr, error) {
	switch {
	case p.eat("("):
		// A parenthesized expression, or an indirect callee "(f)(...)".
		e, err := p.expr()
		if err != nil {
			return nil, err
		}
		if !p.eat(")") {
			return nil, fmt.Errorf("no ) closing (")
		}
		if p.eat("(") {
			if err := p.skipBalanced('(', ')'); err != nil {
				return nil, err
			}
			return &Expr{Kind: Call, Name: "an indirect call"}, nil
		}
		return e, nil
	case p.eat("<retval>"):
		return &Expr{Kind: bOpaque, Name: "the function's return value"}, nil
	case p.eat("?"):
		return &Expr{Kind: bOpaque, Name: "an expression the plugin could not describe"}, nil
	}
	if p.i < len(p.s) && (p.s[p.i] == '-' || p.s[p.i] >= '0' && p.s[p.i] <= '9') {
		start := p.i
		p.i++
		for p.i < len(p.s) && (p.s[p.i] >= '0' && p.s[p.i] <= '9') {
			p.i++
		}
		n, err := strconv.ParseInt(p.s[start:p.i], 10, 64)
		if err != nil {
			return nil, err
		}
		return &Expr{Kind: bNum, n: n}, nil
	}
	name := p.ident()
	if name == "" {
		if p.i < len(p.s) {
			return nil, fmt.Errorf("unexpected %q", p.s[p.i:])
		}
		return nil, fmt.Errorf("unexpected end")
	}
	if p.eat("(") {
		if err := p.skipBalanced('(', ')'); err != nil {
			return nil, err
		}
		return &Expr{Kind: Call, Name: name + "(...)"}, nil
	}
	return &Expr{Kind: Var, Name: name}, nil
}
