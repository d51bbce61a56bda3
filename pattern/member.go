package pattern

import (
	"fmt"
	"strings"
)

// Member is a STRUCT.MEMBER pattern, which selects member accesses:
// access(sk_buff.%) in a pointcut, 'sk_buff.*' for klasy accesses.
type Member struct {
	Struct, Member *Pattern
}

// CompileMember checks and compiles a STRUCT.MEMBER pattern: each part is
// a C identifier with wildcards; nested members (a.b.c) are not
// selectable, since an access is recorded against the innermost struct.
func CompileMember(s string, syntax Syntax) (*Member, error) {
	wild := "% or * as a wildcard"
	if syntax == Pointcut {
		wild = "% as the wildcard"
	}
	st, mem, ok := strings.Cut(s, ".")
	if !ok || st == "" || mem == "" {
		return nil, &Error{Pattern: s, Msg: fmt.Sprintf("not STRUCT.MEMBER (use %s: sk_buff.%%)", wild)}
	}
	if i := strings.IndexByte(mem, '.'); i >= 0 {
		return nil, &Error{Pattern: s, Offset: len(st) + 1 + i, Msg: "nested members are not selectable; name the inner struct: inner_struct.member"}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '.' || c == '%' || c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9':
		case c == '*' && syntax == Pointcut:
			return nil, &Error{Pattern: s, Offset: i, Msg: StarInPointcut}
		case c == '*':
		default:
			return nil, &Error{Pattern: s, Offset: i, Msg: fmt.Sprintf("%q is not allowed (C identifiers with %s)", s[i:i+1], wild)}
		}
	}
	m := &Member{}
	var err error
	if m.Struct, err = Compile(st, syntax); err != nil {
		return nil, err
	}
	if m.Member, err = Compile(mem, syntax); err != nil {
		return nil, err
	}
	return m, nil
}

// String returns the pattern as STRUCT.MEMBER.
func (m *Member) String() string { return m.Struct.String() + "." + m.Member.String() }

// Match reports whether the member mem of structure st matches m. An
// anonymous structure without a typedef has the name "": only a struct
// part that is all wildcards matches it.
func (m *Member) Match(st, mem string) bool {
	return m.Struct.Match(st) && m.Member.Match(mem)
}

// MustCompileMember is CompileMember for patterns known to be valid; it
// panics otherwise.
func MustCompileMember(s string, syntax Syntax) *Member {
	m, err := CompileMember(s, syntax)
	if err != nil {
		panic(err)
	}
	return m
}
