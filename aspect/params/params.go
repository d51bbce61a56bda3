// Package params gives an aspect its parameters: each ${NAME} in the
// aspect's text, in a pointcut or in advice, becomes the value klasy
// weave -D NAME=VALUE gave, before the aspect is parsed (bpftrace's $1,
// a shell's ${NAME}). A ${NAME} without a value, and a -D the aspect
// never uses, are errors at their place; lines keep their numbers, and
// Fix puts a diagnostic's column back where the user wrote it.
package params

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/klasy/klasy/aspect"
)

// Set is the values given with -D, by name: a flag.Value.
type Set map[string]string

// MaxValue bounds a value's length.
const MaxValue = 4096

var nameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Set takes one NAME=VALUE.
func (s Set) Set(v string) error {
	name, value, ok := strings.Cut(v, "=")
	switch {
	case !ok:
		return fmt.Errorf("%q: want NAME=VALUE, as -D PID=42", short(v))
	case !nameRE.MatchString(name):
		return fmt.Errorf("%q: NAME must be a C identifier (letters, digits, _)", short(name))
	case len(value) > MaxValue:
		return fmt.Errorf("%s: a value of %d bytes, more than %d", name, len(value), MaxValue)
	case strings.ContainsAny(value, "<&\n\r\x00"):
		// It goes into XML text as it is: < and & would change the
		// file's structure, a newline its line numbers.
		return fmt.Errorf("%s: a value may not hold <, &, a newline or a NUL byte", name)
	}
	if _, dup := s[name]; dup {
		return fmt.Errorf("%s given twice", name)
	}
	s[name] = value
	return nil
}

func (s Set) String() string {
	var kv []string
	for _, k := range slices.Sorted(maps.Keys(s)) {
		kv = append(kv, k+"="+s[k])
	}
	return strings.Join(kv, " ")
}

// short quotes at most 40 bytes of s.
func short(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// use is one ${NAME} replaced: its line, its column in the text as
// written (1-based, bytes) and its length there and in the expansion.
type use struct {
	line, col         int
	written, expanded int
}

// Expansion is what Expand replaced, to put positions back.
type Expansion struct {
	uses []use
}

var useRE = regexp.MustCompile(`\$\{([^}\n]{0,64})\}`)

// Expand replaces each ${NAME} of src with its value in s. Its
// diagnostics (positions in src as written) name a ${NAME} without a
// value, a malformed one, and each value of s src never uses.
func Expand(filename string, src []byte, s Set) ([]byte, *Expansion, aspect.Diagnostics) {
	var diags aspect.Diagnostics
	var out []byte
	e := &Expansion{}
	used := map[string]bool{}
	line, lineStart, last := 1, 0, 0
	advance := func(to int) {
		for i := last; i < to; i++ {
			if src[i] == '\n' {
				line, lineStart = line+1, i+1
			}
		}
		last = to
	}
	for _, m := range useRE.FindAllSubmatchIndex(src, -1) {
		advance(m[0])
		pos := aspect.Position{Filename: filename, Line: line, Col: m[0] - lineStart + 1}
		name := string(src[m[2]:m[3]])
		value, ok := s[name]
		switch {
		case !nameRE.MatchString(name):
			diags = append(diags, aspect.Diagnostic{Pos: pos, Msg: fmt.Sprintf("${%s}: a parameter's name is a C identifier, as ${PID}", short(name))})
			continue
		case !ok:
			diags = append(diags, aspect.Diagnostic{Pos: pos, Msg: fmt.Sprintf("${%s} has no value: give -D %s=VALUE", name, name)})
			continue
		}
		used[name] = true
		out = append(out, src[len(out)-e.delta():m[0]]...)
		out = append(out, value...)
		e.uses = append(e.uses, use{line: line, col: pos.Col, written: m[1] - m[0], expanded: len(value)})
	}
	out = append(out, src[len(out)-e.delta():]...)
	for _, name := range slices.Sorted(maps.Keys(s)) {
		if !used[name] {
			diags = append(diags, aspect.Diagnostic{Pos: aspect.Position{Filename: filename},
				Msg: fmt.Sprintf("-D %s: the aspect has no ${%s}", name, name)})
		}
	}
	if len(diags) > 0 {
		return nil, nil, diags
	}
	return out, e, nil
}

// delta is how much longer the expansion is so far than what it
// replaced.
func (e *Expansion) delta() int {
	d := 0
	for _, u := range e.uses {
		d += u.expanded - u.written
	}
	return d
}

// Fix puts each diagnostic's column, counted in the expanded text, back
// in the text as written: a column inside a value is its ${NAME}'s.
func (e *Expansion) Fix(diags aspect.Diagnostics) aspect.Diagnostics {
	if e == nil || len(e.uses) == 0 {
		return diags
	}
	out := slices.Clone(diags)
	for i := range out {
		out[i].Pos.Col = e.col(out[i].Pos.Line, out[i].Pos.Col)
	}
	return out
}

// col maps column c of line in the expansion to the text as written.
func (e *Expansion) col(line, c int) int {
	shift := 0 // how much longer the line's expansion is before c
	for _, u := range e.uses {
		if u.line != line {
			continue
		}
		start := u.col + shift // the value's column in the expansion
		if c < start {
			break
		}
		if c < start+u.expanded {
			return u.col
		}
		shift += u.expanded - u.written
	}
	return c - shift
}
