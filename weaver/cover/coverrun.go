package cover

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/klasy/klasy/dwarfmap"
	"github.com/klasy/klasy/weaver"
	"github.com/klasy/klasy/weaver/gen"
	"github.com/klasy/klasy/weaver/joinpoint"
	"github.com/klasy/klasy/weaver/records"
)

// CoverSpec is what klasy cover counts: the basic blocks of the
// functions a name (or % pattern) matches, or of every function defined
// in a source file.
type CoverSpec struct {
	Func string
	File string
}

// ParseCoverSpec reads FUNC or FILE: a name with a '/' or a source
// suffix (.c, .h, .S) is a file.
func ParseCoverSpec(s string) (CoverSpec, error) {
	switch {
	case s == "":
		return CoverSpec{}, fmt.Errorf("no function or file to cover")
	case strings.Contains(s, "/") || strings.HasSuffix(s, ".c") || strings.HasSuffix(s, ".h") || strings.HasSuffix(s, ".S"):
		if !coverFile.MatchString(s) {
			return CoverSpec{}, fmt.Errorf("%q is not a file name: letters, digits and . / _ - + ~ with %% as the wildcard", s)
		}
		return CoverSpec{File: s}, nil
	case !coverFunc.MatchString(s):
		return CoverSpec{}, fmt.Errorf("%q is not a function name: a C identifier with %% as the wildcard, or a file (with a / or .c)", s)
	}
	return CoverSpec{Func: s}, nil
}

var (
	coverFunc = regexp.MustCompile(`^[A-Za-z_%][A-Za-z0-9_%.]*$`)
	coverFile = regexp.MustCompile(`^[A-Za-z0-9_%./+~-]+$`)
)

// Aspect returns the aspect klasy cover weaves: a hook that only counts
// on every block, and the name of its file (the aspect's name, distinct
// per spec so that two covers of different code can run at once).
func (c CoverSpec) Aspect() (path string, src []byte) {
	pc := "block(" + c.Func + ")"
	name := c.Func
	if c.File != "" {
		pc = "block(%) AND within_file(" + c.File + ")"
		name = c.File
	}
	name = "cover_" + strings.Trim(gen.CIdent(strings.ReplaceAll(name, "%", "any")), "_")
	src = []byte("<aspect>\n  <advice>\n    <pointcut>" + pc + "</pointcut>\n    <before></before>\n  </advice>\n</aspect>\n")
	return name + ".klasy", src
}

// FuncCoverage is the coverage of one out-of-line function.
type FuncCoverage struct {
	Function string
	File     string // where it is defined
	Line     int
	Entry    uint64
	Module   string // "" for the kernel
	// CompDir is the compilation directory of its unit, where relative
	// file names of its lines are found.
	CompDir string
	*FuncCover
}

// Functions computes the coverage of the functions whose basic blocks
// jps hooked (block(...) join points), from the counts of the aspect's
// hooks as status read them (asp): a block's count is its hook's hits
// and misses (a miss is a hit while another kprobe's handler ran: the
// block ran, its advice did not).
func Functions(s *weaver.Session, jps []*joinpoint.JoinPoint, asp *records.Aspect) ([]*FuncCoverage, error) {
	type key struct {
		module string
		addr   uint64
	}
	hits := map[key]uint64{}
	for _, h := range asp.Hooks {
		hits[key{h.Module, h.Image}] += h.Hits + h.Missed
	}
	type fnKey struct {
		module string
		entry  uint64
	}
	counts := map[fnKey]map[uint64]uint64{}
	skipped := map[fnKey]map[uint64]string{}
	var fns []fnKey
	idx := map[string]*dwarfmap.Index{"": s.X}
	for _, m := range s.Modules {
		idx[m.Name] = m.X
	}
	batches := map[string]*dwarfmap.Batch{}
	batch := func(module string) (*dwarfmap.Batch, error) {
		if b := batches[module]; b != nil {
			return b, nil
		}
		x := idx[module]
		if x == nil {
			return nil, fmt.Errorf("no index of module %s", module)
		}
		b, err := x.NewBatch()
		if err != nil {
			return nil, err
		}
		batches[module] = b
		return b, nil
	}
	for _, jp := range jps {
		if jp.Block == 0 {
			continue
		}
		b, err := batch(jp.Module)
		if err != nil {
			return nil, err
		}
		fi, ok := b.FuncAt(jp.Block)
		if !ok {
			continue
		}
		k := fnKey{jp.Module, fi.Entry}
		if counts[k] == nil {
			counts[k], skipped[k] = map[uint64]uint64{}, map[uint64]string{}
			fns = append(fns, k)
		}
		if jp.Skipped != "" {
			skipped[k][jp.Block] = jp.Skipped
			continue
		}
		c, ok := hits[key{jp.Module, jp.Addr}]
		if !ok {
			skipped[k][jp.Block] = "its hook is not in the kernel's status"
			continue
		}
		counts[k][jp.Block] = c
	}
	var out []*FuncCoverage
	for _, k := range fns {
		b, _ := batch(k.module)
		fi, _ := b.FuncAt(k.entry)
		g, err := b.Graph(fi)
		if err != nil {
			return nil, err
		}
		lines := func(lo, hi uint64) []SourceLine {
			var ls []SourceLine
			for _, r := range b.CodeRows(lo, hi) {
				l := SourceLine{b.FileName(r), int(r.Line)}
				if !slices.Contains(ls, l) {
					ls = append(ls, l)
				}
			}
			return ls
		}
		out = append(out, &FuncCoverage{Function: fi.Name, File: fi.File, Line: fi.Line, Entry: fi.Entry, Module: k.module,
			CompDir: b.CompDir(fi), FuncCover: Cover(g, counts[k], skipped[k], lines)})
	}
	slices.SortStableFunc(out, func(a, b *FuncCoverage) int {
		if c := cmp.Compare(a.Module, b.Module); c != 0 {
			return c
		}
		if c := cmp.Compare(a.File, b.File); c != 0 {
			return c
		}
		return cmp.Compare(a.Line, b.Line)
	})
	return out, nil
}
