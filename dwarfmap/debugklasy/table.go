package debugklasy

import (
	"debug/elf"
	"errors"
	"fmt"
	"hash/maphash"
	"regexp"
	"sort"
	"strings"
)

// Table is every distinct access of a binary: the copies of header inline
// functions that each compilation unit recorded are merged.
type Table struct {
	Units    int      // compilation units in the section
	Records  int      // records before merging copies
	Accesses []Access // distinct, sorted by file, line, column
}

// Open reads the .debug_klasy section of an ELF object (.o, .ko, vmlinux).
func Open(path string) (*Table, error) {
	f, err := elf.Open(path)
	if err != nil {
		var fe *elf.FormatError
		if errors.As(err, &fe) {
			return nil, fmt.Errorf("%s is not an ELF object (want a .o, a .ko or a vmlinux): %w", path, err)
		}
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	defer f.Close()
	sec := f.Section(SectionName)
	if sec == nil {
		return nil, fmt.Errorf("%s: %w: it was not compiled with the klasy plugin; build the plugin with 'make -C gcc-patches' and rebuild with KCFLAGS=-fplugin=$PWD/gcc-patches/klasy.so (see gcc-patches/README.md)", path, ErrNoSection)
	}
	data, err := sec.Data()
	if err != nil {
		return nil, fmt.Errorf("reading %s of %s: %w", SectionName, path, err)
	}
	b := newBuilder()
	if err := parseEach(data, b.add); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return b.finish(), nil
}

// NewTable merges the units' accesses. Two records are copies when
// everything but the unit matches: a static inline function from a header
// is the same code in every unit, while two static functions of the same
// name in different .c files differ in their file.
func NewTable(units []Unit) *Table {
	b := newBuilder()
	for _, u := range units {
		b.add(u)
	}
	return b.finish()
}

// builder merges units. It indexes accesses by a hash of their fields
// rather than by the ~300-byte Access itself: a vmlinux has hundreds of
// thousands of them.
type builder struct {
	t    *Table
	seed maphash.Seed
	seen map[uint64][]int32 // hash -> indexes into t.Accesses
}

func newBuilder() *builder {
	return &builder{t: &Table{}, seed: maphash.MakeSeed(), seen: make(map[uint64][]int32)}
}

func (b *builder) add(u Unit) {
	b.t.Units++
outer:
	for _, a := range u.Accesses {
		b.t.Records++
		h := maphash.Comparable(b.seed, a)
		for _, i := range b.seen[h] {
			if b.t.Accesses[i] == a {
				continue outer
			}
		}
		b.seen[h] = append(b.seen[h], int32(len(b.t.Accesses)))
		b.t.Accesses = append(b.t.Accesses, a)
	}
}

func (b *builder) finish() *Table {
	t := b.t
	b.seen = nil
	sort.SliceStable(t.Accesses, func(i, j int) bool {
		a, b := &t.Accesses[i], &t.Accesses[j]
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		if a.Col != b.Col {
			return a.Col < b.Col
		}
		if a.Struct != b.Struct {
			return a.Struct < b.Struct
		}
		return a.Member < b.Member
	})
	return t
}

// Pattern selects accesses by STRUCT.MEMBER, where % matches any run of
// characters: "sk_buff.len", "sk_buff.%", "%.i_uid", "task_%.pid".
type Pattern struct {
	structRe, memberRe *regexp.Regexp
	text               string
}

// ParsePattern checks and compiles a STRUCT.MEMBER pattern.
func ParsePattern(s string) (*Pattern, error) {
	st, mem, ok := strings.Cut(s, ".")
	if !ok || st == "" || mem == "" {
		return nil, fmt.Errorf("pattern %q is not STRUCT.MEMBER (use %% as a wildcard: sk_buff.%%)", s)
	}
	if strings.Contains(mem, ".") {
		return nil, fmt.Errorf("pattern %q: nested members are not selectable; name the inner struct: inner_struct.member", s)
	}
	for _, part := range []string{st, mem} {
		for _, r := range part {
			if !(r == '%' || r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
				return nil, fmt.Errorf("pattern %q: %q is not allowed (identifiers and %% only)", s, r)
			}
		}
	}
	return &Pattern{structRe: wildcard(st), memberRe: wildcard(mem), text: s}, nil
}

func wildcard(s string) *regexp.Regexp {
	return regexp.MustCompile("^" + strings.ReplaceAll(regexp.QuoteMeta(s), "%", ".*") + "$")
}

func (p *Pattern) String() string { return p.text }

// Match reports whether a is selected. An anonymous type without a typedef
// is only matched by a struct part of "%".
func (p *Pattern) Match(a *Access) bool {
	return p.structRe.MatchString(a.Struct) && p.memberRe.MatchString(a.Member)
}

// Query returns the accesses the pattern selects, in table order.
func (t *Table) Query(p *Pattern) []Access {
	var out []Access
	for i := range t.Accesses {
		if p.Match(&t.Accesses[i]) {
			out = append(out, t.Accesses[i])
		}
	}
	return out
}

// Site is one hook line: where the weaver places advice for the accesses
// of one function on one line.
type Site struct {
	File     string
	Line     int
	StmtLine int // enclosing statement's line when it differs, for lines without a .debug_line row
	Function Function
	Accesses []Access
}

// Sites groups the accesses p selects by (file, line, function), in table
// order: the join points of access(p).
func (t *Table) Sites(p *Pattern) []Site {
	type key struct {
		file string
		line int
		fn   Function
	}
	idx := map[key]int{}
	var out []Site
	for _, a := range t.Query(p) {
		k := key{a.File, a.Line, a.Function}
		i, ok := idx[k]
		if !ok {
			i = len(out)
			idx[k] = i
			out = append(out, Site{File: a.File, Line: a.Line, Function: a.Function})
		}
		if out[i].StmtLine == 0 {
			out[i].StmtLine = a.StmtLine
		}
		out[i].Accesses = append(out[i].Accesses, a)
	}
	return out
}
