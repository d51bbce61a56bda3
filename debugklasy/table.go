package debugklasy

import (
	"cmp"
	"debug/elf"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"slices"
	"strings"

	"github.com/klasy/klasy/dwarfmap/elfimage"
	"github.com/klasy/klasy/internal/boundedread"
	"github.com/klasy/klasy/pattern"
)

// Table is every distinct access of a binary: the copies of header inline
// functions that each compilation unit recorded are merged.
type Table struct {
	Units    int      // compilation units in the section
	Records  int      // records before merging copies
	Accesses []Access // distinct, sorted by file, line, column
}

// Open reads the .debug_klasy section of an ELF object (.o, .ko, vmlinux),
// which must be a regular file. Its errors name path.
func Open(path string) (*Table, error) {
	data, err := readSection(path)
	if err != nil {
		return nil, err
	}
	b := newBuilder(countRecords(data))
	if err := parseEach(data, true, nil, b.add); err != nil { // add copies each access
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return b.finish(), nil
}

// OpenSelect is Open keeping only the accesses p selects (Query's), and
// decoding only those: a vmlinux has about a million records, and a
// pointcut wants a few thousand.
func OpenSelect(path string, p *pattern.Member) (*Table, error) {
	data, err := readSection(path)
	if err != nil {
		return nil, err
	}
	type pair struct{ st, mem string }
	memo := map[pair]bool{}
	keep := func(st, mem string) bool {
		k := pair{st, mem}
		v, ok := memo[k]
		if !ok {
			v = p.Match(st, mem)
			memo[k] = v
		}
		return v
	}
	b := newBuilder(0)
	if err := parseEach(data, true, keep, b.add); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return b.finish(), nil // Records counts the selected ones
}

// readSection returns the contents of path's .debug_klasy section.
func readSection(path string) ([]byte, error) {
	file, _, err := boundedread.OpenRegular(path)
	if err != nil {
		return nil, err // names the file already
	}
	defer file.Close()
	notELF := fmt.Errorf("%s is not an ELF object (want a .o, a .ko or a vmlinux)", path)
	var magic [4]byte
	if _, err := file.ReadAt(magic[:], 0); err != nil || string(magic[:]) != elf.ELFMAG {
		return nil, notELF
	}
	f, err := elf.NewFile(file)
	if err != nil {
		var fe *elf.FormatError
		switch {
		case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
			return nil, fmt.Errorf("%s: reading ELF headers: %w", path, elfimage.ErrTruncated)
		case errors.As(err, &fe):
			return nil, fmt.Errorf("%w: %w", notELF, err)
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	sec := f.Section(SectionName)
	if sec == nil {
		return nil, fmt.Errorf("%s: %w: it was not compiled with the klasy plugin; build the plugin with 'make -C gcc-patches' and rebuild with KCFLAGS=-fplugin=$PWD/gcc-patches/klasy.so (see gcc-patches/README.md)", path, ErrNoSection)
	}
	data, err := sec.Data()
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		err = elfimage.ErrTruncated
	}
	if err != nil {
		return nil, fmt.Errorf("%s: reading %s: %w", path, SectionName, err)
	}
	return data, nil
}

// NewTable merges the units' accesses. Two records are copies when
// everything but the unit matches: a static inline function from a header
// is the same code in every unit, while two static functions of the same
// name in different .c files differ in their file.
func NewTable(units []Unit) *Table {
	n := 0
	for _, u := range units {
		n += len(u.Accesses)
	}
	b := newBuilder(n)
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
	seen map[uint64]int32   // hash -> index into t.Accesses of the first access with it
	more map[uint64][]int32 // further distinct accesses with the same hash (rare)
}

// newBuilder makes a builder for about n records.
func newBuilder(n int) *builder {
	return &builder{t: &Table{Accesses: make([]Access, 0, n)}, seed: maphash.MakeSeed(),
		seen: make(map[uint64]int32, n), more: make(map[uint64][]int32)}
}

func (b *builder) add(u Unit) {
	b.t.Units++
	for _, a := range u.Accesses {
		b.t.Records++
		if !b.known(&a) {
			b.t.Accesses = append(b.t.Accesses, a)
		}
	}
}

// known reports whether a is already in the table, and otherwise notes
// that it is about to be appended.
func (b *builder) known(a *Access) bool {
	h := maphash.Comparable(b.seed, *a)
	next := int32(len(b.t.Accesses))
	i, ok := b.seen[h]
	if !ok {
		b.seen[h] = next
		return false
	}
	if b.t.Accesses[i] == *a {
		return true
	}
	for _, i := range b.more[h] {
		if b.t.Accesses[i] == *a {
			return true
		}
	}
	b.more[h] = append(b.more[h], next)
	return false
}

// finish sorts the table. It sorts indexes and then moves each access
// once: swapping the large Access values while sorting cost more than
// parsing the section.
func (b *builder) finish() *Table {
	t := b.t
	b.seen, b.more = nil, nil
	acc := t.Accesses
	order := make([]int32, len(acc))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortStableFunc(order, func(i, j int32) int {
		a, b := &acc[i], &acc[j]
		if c := strings.Compare(a.File, b.File); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Line, b.Line); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Col, b.Col); c != 0 {
			return c
		}
		if c := strings.Compare(a.Struct, b.Struct); c != 0 {
			return c
		}
		return strings.Compare(a.Member, b.Member)
	})
	// Apply the permutation in place, one cycle at a time: position i
	// takes the access at order[i].
	for i := range order {
		if order[i] < 0 {
			continue
		}
		tmp := acc[i]
		j := int32(i)
		for {
			k := order[j]
			order[j] = -1
			if int(k) == i {
				acc[j] = tmp
				break
			}
			acc[j] = acc[k]
			j = k
		}
	}
	return t
}

// Query returns the accesses the STRUCT.MEMBER pattern p selects, in
// table order. An anonymous type without a typedef has the struct name
// "", so only a struct part of wildcards selects it.
func (t *Table) Query(p *pattern.Member) []Access {
	var out []Access
	for i := range t.Accesses {
		if a := &t.Accesses[i]; p.Match(a.Struct, a.Member) {
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
func (t *Table) Sites(p *pattern.Member) []Site {
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
