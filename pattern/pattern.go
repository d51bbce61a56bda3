// Package pattern is klasy's one name pattern: the function, structure
// and member names of pointcuts (execution(tcp_%), access(sk_buff.%)),
// and of the commands that list join points (klasy funcs, klasy
// accesses). A wildcard matches any run of characters, the empty run
// included; every other byte matches itself.
//
// Which bytes are wildcards depends on where the pattern is written
// (Syntax): in a pointcut only %, as in the dissertation's language, where
// * would read as a C pointer; on the command line both % and *, since
// users type tcp_* as they do for perf probe -F.
//
// A pattern is compiled once and matched in time linear in the name: no
// input makes it backtrack (see Match).
package pattern

import (
	"fmt"
	"strings"
)

// Syntax says which bytes of a pattern are wildcards.
type Syntax int

const (
	// CommandLine: % and * both match any run of characters.
	CommandLine Syntax = iota
	// Pointcut: % matches any run of characters; * is an error.
	Pointcut
)

// Pattern is a compiled name pattern.
type Pattern struct {
	text string
	// parts are the literal runs between wildcards (runs of wildcards
	// count as one): one part for a pattern without a wildcard, else the
	// prefix, the runs in between and the suffix, any of them empty.
	parts []string
}

// Error is a pattern its syntax does not allow. Offset is the byte of
// Pattern it is about, for callers that place it in a file.
type Error struct {
	Pattern string
	Offset  int
	Msg     string
}

func (e *Error) Error() string { return fmt.Sprintf("pattern %q: %s", e.Pattern, e.Msg) }

// StarInPointcut is the message for a * in a pointcut pattern.
const StarInPointcut = "`*` is not a wildcard in a pointcut; use `%`"

// Compile checks s in the given syntax and compiles it.
func Compile(s string, syntax Syntax) (*Pattern, error) {
	if s == "" {
		return nil, &Error{Pattern: s, Msg: "empty pattern: name something, e.g. tcp_sendmsg or tcp_%"}
	}
	wild := "%*"
	if syntax == Pointcut {
		if i := strings.IndexByte(s, '*'); i >= 0 {
			return nil, &Error{Pattern: s, Offset: i, Msg: StarInPointcut}
		}
		wild = "%"
	}
	p := &Pattern{text: s}
	rest := s
	for {
		i := strings.IndexAny(rest, wild)
		if i < 0 {
			p.parts = append(p.parts, rest)
			return p, nil
		}
		p.parts = append(p.parts, rest[:i])
		// A run of wildcards is one wildcard.
		for i < len(rest) && strings.IndexByte(wild, rest[i]) >= 0 {
			i++
		}
		rest = rest[i:]
	}
}

// MustCompile is Compile for patterns known to be valid; it panics
// otherwise.
func MustCompile(s string, syntax Syntax) *Pattern {
	p, err := Compile(s, syntax)
	if err != nil {
		panic(err)
	}
	return p
}

// String returns the pattern as written.
func (p *Pattern) String() string { return p.text }

// Literal returns the one name p matches, if it has no wildcard.
func (p *Pattern) Literal() (string, bool) {
	if len(p.parts) == 1 {
		return p.parts[0], true
	}
	return "", false
}

// Prefix returns the text every name p matches begins with: the
// pattern up to its first wildcard, or all of it without one. Indexes
// sorted by name look up the range of names with this prefix and match
// only those.
func (p *Pattern) Prefix() string { return p.parts[0] }

// Match reports whether name matches p. The prefix and suffix are
// anchored; each literal run in between is then taken at its leftmost
// occurrence after the previous one, which cannot lose a match (a later
// occurrence leaves less room for the runs after it). Each byte of name
// is thus scanned once by strings.Index, whatever the pattern: there is
// no backtracking.
func (p *Pattern) Match(name string) bool {
	parts := p.parts
	if len(parts) == 1 {
		return name == parts[0]
	}
	first, last := parts[0], parts[len(parts)-1]
	if len(name) < len(first)+len(last) || !strings.HasPrefix(name, first) || !strings.HasSuffix(name, last) {
		return false
	}
	name = name[len(first) : len(name)-len(last)]
	for _, mid := range parts[1 : len(parts)-1] {
		i := strings.Index(name, mid)
		if i < 0 {
			return false
		}
		name = name[i+len(mid):]
	}
	return true
}
