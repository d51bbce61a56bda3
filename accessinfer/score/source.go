package score

import (
	"bytes"
	"os"
	"path/filepath"
)

// sourceLines reads the kernel's source files, for the accesses the
// plugin cannot record (bitfield tests): whether the source names the
// member at the instruction's lines is then the evidence.
type sourceLines struct {
	dir   string
	files map[string][][]byte
}

// line is line n (1-based) of file name (relative to the source tree,
// as dwarfmap prints it), or nil.
func (s *sourceLines) line(name string, n int) []byte {
	if s == nil || s.dir == "" {
		return nil
	}
	ls, ok := s.files[name]
	if !ok {
		p := name
		if !filepath.IsAbs(p) {
			p = filepath.Join(s.dir, name)
		}
		if b, err := os.ReadFile(p); err == nil {
			ls = bytes.Split(b, []byte("\n"))
		}
		s.files[name] = ls
	}
	if n < 1 || n > len(ls) {
		return nil
	}
	return ls[n-1]
}

// namesMember says whether text accesses a member called m: "->m" or
// ".m" not followed by an identifier's character.
func namesMember(text []byte, m string) bool {
	if m == "" {
		return false
	}
	for _, op := range []string{"->", "."} {
		pat := []byte(op + m)
		for rest := text; ; {
			i := bytes.Index(rest, pat)
			if i < 0 {
				break
			}
			rest = rest[i+len(pat):]
			if len(rest) == 0 || !isIdent(rest[0]) {
				return true
			}
		}
	}
	return false
}

func isIdent(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// calledNames are the identifiers text calls: each followed by "(",
// blanks between allowed (keywords too: if, while, sizeof; no function
// has their names).
func calledNames(text []byte) []string {
	var out []string
	for i := 0; i < len(text); {
		if !isIdent(text[i]) {
			i++
			continue
		}
		j := i
		for j < len(text) && isIdent(text[j]) {
			j++
		}
		if text[i] >= '0' && text[i] <= '9' { // a number: 0x1f
			i = j
			continue
		}
		k := j
		for k < len(text) && (text[k] == ' ' || text[k] == '\t') {
			k++
		}
		if k < len(text) && text[k] == '(' {
			out = append(out, string(text[i:j]))
		}
		i = j
	}
	return out
}
