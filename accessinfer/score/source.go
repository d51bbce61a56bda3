package score

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// sourceLines reads the kernel's source files, for the accesses the
// plugin cannot record (bitfield tests): whether the source names the
// member at the instruction's lines is then the evidence.
type sourceLines struct {
	dir   string
	files map[string][][]byte
	// alias: the object-like macros the headers define as a member
	// path ending in a member (#define sk_reuseport
	// __sk_common.skc_reuseport), by that member; read once.
	alias map[string][]string
	// getter: the function-like macros the headers define as their
	// one parameter's member (skb_vlan_tag_present(__skb) is
	// ((__skb)->vlan_present)), by member.
	getter map[string][]string
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

// memberMacro is a macro whose body is a member path: "name a.b" or
// "name a->b".
var memberMacro = regexp.MustCompile(`^#\s*define\s+([A-Za-z_]\w*)\s+[A-Za-z_][\w.>-]*(?:\.|->)([A-Za-z_]\w*)\s*(?:/\*.*)?$`)

// aliases are the macros the source tree's headers (include/, arch/x86/
// include/) define as a member path ending in member m.
func (s *sourceLines) aliases(m string) []string {
	if s == nil || s.dir == "" {
		return nil
	}
	if s.alias == nil {
		s.alias, s.getter = map[string][]string{}, map[string][]string{}
		for _, root := range []string{"include", "arch/x86/include"} {
			filepath.WalkDir(filepath.Join(s.dir, root), func(p string, d fs.DirEntry, err error) error {
				if err != nil || d.IsDir() || !strings.HasSuffix(p, ".h") {
					return nil
				}
				b, err := os.ReadFile(p)
				if err != nil || !bytes.Contains(b, []byte("define")) {
					return nil
				}
				for _, l := range bytes.Split(b, []byte("\n")) {
					l = bytes.TrimSpace(l)
					if macro, member, ok := aliasOf(l); ok {
						s.alias[member] = append(s.alias[member], macro)
					}
					if macro, member, ok := getterOf(l); ok {
						s.getter[member] = append(s.getter[member], macro)
					}
				}
				return nil
			})
		}
	}
	return s.alias[m]
}

// getterMacro matches a function-like macro of one parameter whose body
// is that parameter's member: #define f(p) ((p)->m).
var getterMacro = regexp.MustCompile(`^#\s*define\s+([A-Za-z_]\w*)\(\s*([A-Za-z_]\w*)\s*\)\s+\(*\s*([A-Za-z_]\w*)\s*\)?\s*->\s*([A-Za-z_]\w*)\s*\)*\s*(?:/\*.*)?$`)

// aliasOf reads a header line defining a macro as a member path
// (memberMacro): the macro and the path's last member.
func aliasOf(line []byte) (macro, member string, ok bool) {
	g := memberMacro.FindSubmatch(line)
	if g == nil {
		return "", "", false
	}
	return string(g[1]), string(g[2]), true
}

// getterOf reads a header line defining a macro as its parameter's
// member (getterMacro): the macro and the member.
func getterOf(line []byte) (macro, member string, ok bool) {
	g := getterMacro.FindSubmatch(line)
	if g == nil || !bytes.Equal(g[2], g[3]) {
		return "", "", false
	}
	return string(g[1]), string(g[4]), true
}

// getters are the function-like macros the headers define as their
// parameter's member m (aliases reads them).
func (s *sourceLines) getters(m string) []string {
	s.aliases(m)
	if s == nil {
		return nil
	}
	return s.getter[m]
}
