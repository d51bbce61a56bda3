package pattern

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestMatch(t *testing.T) {
	for _, c := range []struct {
		syntax    Syntax
		pat, name string
		want      bool
	}{
		{CommandLine, "tcp_%", "tcp_sendmsg", true},
		{CommandLine, "tcp_%", "udp_sendmsg", false},
		{CommandLine, "tcp_*", "tcp_sendmsg", true},
		{CommandLine, "tcp_*", "tcp_", true},
		{CommandLine, "tcp_*", "tcp", false},
		{CommandLine, "%_sendmsg", "tcp_sendmsg", true},
		{CommandLine, "*_sendmsg", "tcp_sendmsg", true},
		{CommandLine, "tcp*msg", "tcp_sendmsg", true},
		{CommandLine, "tcp", "tcp", true},
		{CommandLine, "tcp", "tcp_x", false},
		{CommandLine, "tcp", "xtcp", false},
		{CommandLine, "%", "", true},
		{CommandLine, "*", "anything", true},
		{CommandLine, "%*%", "", true},
		{CommandLine, "a%b%c", "axxbyyc", true},
		{CommandLine, "a%b%c", "axxbyy", false},
		{CommandLine, "a%b%c", "abc", true},
		{CommandLine, "a%a", "a", false}, // prefix and suffix must not overlap
		{CommandLine, "a%a", "aa", true},
		{CommandLine, "ab%ba", "aba", false},
		{CommandLine, "%ab%ab%", "xabyab", true},
		{CommandLine, "%ab%ab%", "xaby", false},
		{CommandLine, "%aab", "aaab", true}, // the suffix is anchored, not found greedily
		{CommandLine, "a%ab%b", "aabab", true},
		{Pointcut, "skb_%", "skb_clone", true},
		{Pointcut, "%", "", true},
		{Pointcut, "vfs_read", "vfs_read", true},
		{Pointcut, "vfs_read", "vfs_readv", false},
	} {
		p, err := Compile(c.pat, c.syntax)
		if err != nil {
			t.Errorf("Compile(%q): %v", c.pat, err)
			continue
		}
		if got := p.Match(c.name); got != c.want {
			t.Errorf("%q matches %q = %v, want %v", c.pat, c.name, got, c.want)
		}
		if got := matchDP(c.pat, c.name, c.syntax); got != c.want {
			t.Errorf("the reference matcher says %q matches %q = %v, want %v", c.pat, c.name, got, c.want)
		}
	}
}

func TestLiteralPrefix(t *testing.T) {
	for _, c := range []struct {
		pat     string
		literal bool
		prefix  string
	}{
		{"tcp_sendmsg", true, "tcp_sendmsg"},
		{"tcp_%", false, "tcp_"},
		{"tcp_*", false, "tcp_"},
		{"tcp_%msg", false, "tcp_"},
		{"%", false, ""},
		{"*_sendmsg", false, ""},
	} {
		p := MustCompile(c.pat, CommandLine)
		lit, ok := p.Literal()
		if ok != c.literal || ok && lit != c.pat {
			t.Errorf("%q: Literal() = %q, %v; want %v", c.pat, lit, ok, c.literal)
		}
		if got := p.Prefix(); got != c.prefix {
			t.Errorf("%q: Prefix() = %q, want %q", c.pat, got, c.prefix)
		}
		if p.String() != c.pat {
			t.Errorf("String() = %q, want %q", p.String(), c.pat)
		}
	}
}

// TestCompileErrors: what each syntax rejects, and where in the pattern.
func TestCompileErrors(t *testing.T) {
	name := func(s string, syntax Syntax) error { _, err := Compile(s, syntax); return err }
	member := func(s string, syntax Syntax) error { _, err := CompileMember(s, syntax); return err }
	for _, c := range []struct {
		compile func(string, Syntax) error
		pat     string
		syntax  Syntax
		off     int
		want    string
	}{
		{name, "", CommandLine, 0, "empty pattern"},
		{name, "", Pointcut, 0, "empty pattern"},
		{name, "tcp_*", Pointcut, 4, "`*` is not a wildcard in a pointcut; use `%`"},
		{name, "%*", Pointcut, 1, "`*` is not a wildcard"},
		{member, "", CommandLine, 0, "not STRUCT.MEMBER (use % or * as a wildcard"},
		{member, "sk_buff", CommandLine, 0, "not STRUCT.MEMBER"},
		{member, ".len", CommandLine, 0, "not STRUCT.MEMBER"},
		{member, "sk_buff.", Pointcut, 0, "not STRUCT.MEMBER (use % as the wildcard"},
		{member, "a.b.c", CommandLine, 3, "nested members are not selectable"},
		{member, "sk buff.len", CommandLine, 2, `" " is not allowed`},
		{member, "sk_buff.l-n", CommandLine, 9, `"-" is not allowed`},
		{member, "sk_buff.*", Pointcut, 8, "`*` is not a wildcard in a pointcut"},
	} {
		err := c.compile(c.pat, c.syntax)
		var pe *Error
		if !errors.As(err, &pe) {
			t.Errorf("%q: %v, want an *Error", c.pat, err)
			continue
		}
		if pe.Offset != c.off || !strings.Contains(pe.Msg, c.want) {
			t.Errorf("%q: offset %d %q, want offset %d and %q", c.pat, pe.Offset, pe.Msg, c.off, c.want)
		}
	}
}

func TestMember(t *testing.T) {
	for _, c := range []struct {
		syntax      Syntax
		pat, st, mb string
		want        bool
	}{
		{CommandLine, "sk_buff.len", "sk_buff", "len", true},
		{CommandLine, "sk_buff.len", "sk_buff", "len2", false},
		{CommandLine, "sk_buff.%", "sk_buff", "data", true},
		{CommandLine, "sk_buff.*", "sk_buff", "data", true},
		{CommandLine, "sk_buff.*", "sk_buff_head", "qlen", false},
		{CommandLine, "%.i_uid", "inode", "i_uid", true},
		{CommandLine, "*.i_uid", "inode", "i_uid", true},
		{CommandLine, "task_%.pid", "task_struct", "pid", true},
		{CommandLine, "%.k", "", "k", true}, // an anonymous struct: only a struct part of wildcards
		{CommandLine, "a.k", "", "k", false},
		{CommandLine, "sk_%.d%a", "sk_buff", "data", true},
		{Pointcut, "sk_buff.%", "sk_buff", "data", true},
	} {
		m, err := CompileMember(c.pat, c.syntax)
		if err != nil {
			t.Errorf("CompileMember(%q): %v", c.pat, err)
			continue
		}
		if got := m.Match(c.st, c.mb); got != c.want {
			t.Errorf("%s matches %s.%s = %v, want %v", c.pat, c.st, c.mb, got, c.want)
		}
		if m.String() != c.pat {
			t.Errorf("String() = %q, want %q", m.String(), c.pat)
		}
	}
}

// matchDP is the reference matcher: the textbook dynamic programme over
// pattern and name, obviously right and O(len(pat)*len(name)).
func matchDP(pat, name string, syntax Syntax) bool {
	wild := func(c byte) bool { return c == '%' || c == '*' && syntax == CommandLine }
	// ok[j]: pat[:i] matches name[:j].
	ok := make([]bool, len(name)+1)
	ok[0] = true
	for i := 0; i < len(pat); i++ {
		next := make([]bool, len(name)+1)
		if wild(pat[i]) {
			any := false
			for j := range ok {
				any = any || ok[j]
				next[j] = any
			}
		} else {
			for j := 1; j <= len(name); j++ {
				next[j] = ok[j-1] && name[j-1] == pat[i]
			}
		}
		ok = next
	}
	return ok[len(name)]
}

// slowInputs are the shapes that make a backtracking matcher take time
// exponential (or polynomial of high degree) in the name: many wildcards
// whose runs all match almost everywhere, and a run that fails, so that
// none of them matches.
var slowInputs = []struct{ pat, unit string }{
	{"%a%a%a%a%a%a%a%a%a%a%b", "a"},
	{"*a*a*a*a*a*a*a*a*a*a*b", "a"},
	{"%aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab%", "a"},
	{"%ab%ab%ab%ab%ab%ab%abc", "ab"},
	{"a%" + strings.Repeat("a", 100) + "b", "a"},
}

// maxMatchTime bounds one Match of a name of about 1 MiB. A linear
// matcher takes a few milliseconds; a quadratic one takes minutes.
const maxMatchTime = time.Second

// matchTime times p.Match(name): the fastest of up to three runs, so
// that a machine busy with other work does not fail a fast matcher,
// while a slow one is slow every time.
func matchTime(p *Pattern, name string, bound time.Duration) (time.Duration, bool) {
	best := time.Duration(1<<63 - 1)
	for range 3 {
		start := time.Now()
		p.Match(name)
		best = min(best, time.Since(start))
		if best <= bound {
			return best, true
		}
	}
	return best, false
}

// TestMatchLinear matches the slow inputs against names of 1 MiB.
func TestMatchLinear(t *testing.T) {
	for _, in := range slowInputs {
		p := MustCompile(in.pat, CommandLine)
		name := strings.Repeat(in.unit, (1<<20)/len(in.unit))
		if d, ok := matchTime(p, name, maxMatchTime); !ok {
			t.Errorf("%q against %d bytes of %q took %v, want under %v", in.pat, len(name), in.unit, d, maxMatchTime)
		}
		if p.Match(name) {
			t.Errorf("%q matches %d bytes of %q", in.pat, len(name), in.unit)
		}
	}
}

// maxFuzzMatchTime bounds one Match of a name of 64 KiB in FuzzMatch: a
// linear matcher takes well under a millisecond; a quadratic one seconds.
const maxFuzzMatchTime = 250 * time.Millisecond

// FuzzMatch: Match agrees with the reference matcher in both syntaxes,
// Compile errors point inside the pattern, and no pattern takes long on
// the name repeated to 64 KiB.
func FuzzMatch(f *testing.F) {
	f.Add("tcp_%", "tcp_sendmsg")
	f.Add("tcp_*", "tcp_sendmsg")
	f.Add("a%b*c", "axbyc")
	f.Add("%", "")
	for _, in := range slowInputs {
		f.Add(in.pat, strings.Repeat(in.unit, 64))
	}
	f.Fuzz(func(t *testing.T, pat, name string) {
		if len(pat) > 512 || len(name) > 512 {
			return // the reference is quadratic
		}
		var long string // name repeated to 64 KiB
		for _, syntax := range []Syntax{CommandLine, Pointcut} {
			p, err := Compile(pat, syntax)
			if err != nil {
				var pe *Error
				if !errors.As(err, &pe) || pe.Offset < 0 || pe.Offset > len(pat) {
					t.Fatalf("Compile(%q): %v: not an *Error inside the pattern", pat, err)
				}
				continue
			}
			got, want := p.Match(name), matchDP(pat, name, syntax)
			if got != want {
				t.Fatalf("syntax %d: %q matches %q = %v, the reference says %v", syntax, pat, name, got, want)
			}
			if lit, ok := p.Literal(); ok && (lit != pat || got != (name == pat)) {
				t.Fatalf("%q: Literal() = %q, %v", pat, lit, ok)
			}
			if got && !strings.HasPrefix(name, p.Prefix()) {
				t.Fatalf("%q matches %q, which lacks its prefix %q", pat, name, p.Prefix())
			}
			if long == "" && name != "" {
				long = strings.Repeat(name, (64<<10)/len(name)+1)
			}
			if d, ok := matchTime(p, long, maxFuzzMatchTime); !ok {
				t.Fatalf("%q against %q repeated to %d bytes took %v, want under %v", pat, name, len(long), d, maxFuzzMatchTime)
			}
		}
	})
}
