// Package coverview prints what klasy cover counted: each source
// file's lines as gcov annotates them ("    count:lineno:source"), read
// from the kernel's tree, then each function's control flow arcs with
// their counts; or all of it as one JSON object.
package coverview

import (
	"bufio"
	"bytes"
	"cmp"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/klasy/klasy/internal/cachedir"
	"github.com/klasy/klasy/internal/human"
	"github.com/klasy/klasy/weaver/cover"
)

// Result is what klasy cover prints.
type Result struct {
	Target   string
	Spec     cover.CoverSpec
	Arg      string // what was asked for: FUNC or FILE
	Funcs    []*cover.FuncCoverage
	Hooks    int // the hooks woven
	Skipped  int // the blocks not hooked
	Register time.Duration
	Elapsed  time.Duration
	Argv     []string          // the command that ran while counting
	Exit     int               // its exit status
	Sources  map[string]Source // by file name as the line table has it
}

// Source is a file's text, or where it was looked for.
type Source struct {
	path  string   // "" when not found
	lines []string // its lines, from line 1
	tried []string
}

// fileLine is one line's count over every function that holds it.
type fileLine struct {
	count                        uint64
	known, estimated, unexecuted bool
	hasCode                      bool
	functions                    []string
}

// files merges the line counts of every function by file.
func (cr *Result) files() (names []string, byFile map[string]map[int]*fileLine) {
	byFile = map[string]map[int]*fileLine{}
	for _, fc := range cr.Funcs {
		for _, l := range fc.Lines {
			m := byFile[l.File]
			if m == nil {
				m = map[int]*fileLine{}
				byFile[l.File] = m
				names = append(names, l.File)
			}
			fl := m[l.Line]
			if fl == nil {
				fl = &fileLine{hasCode: true}
				m[l.Line] = fl
			}
			if l.Known {
				fl.count += l.Count
				fl.known = true
			}
			fl.estimated = fl.estimated || l.Estimated
			fl.unexecuted = fl.unexecuted || l.Unexecuted
			if !slices.Contains(fl.functions, fc.Function) {
				fl.functions = append(fl.functions, fc.Function)
			}
		}
	}
	// The file the covered functions are defined in first, then the
	// others (headers whose code is inlined) by name.
	home := map[string]bool{}
	for _, fc := range cr.Funcs {
		home[fc.File] = true
	}
	slices.SortStableFunc(names, func(a, b string) int {
		ha, hb := isHome(home, a), isHome(home, b)
		if ha != hb {
			if ha {
				return -1
			}
			return 1
		}
		return cmp.Compare(a, b)
	})
	return names, byFile
}

// isHome reports whether file is one the covered functions are defined
// in (the names may differ by a directory prefix).
func isHome(home map[string]bool, file string) bool {
	for h := range home {
		if h == file || strings.HasSuffix(file, "/"+strings.TrimPrefix(h, "./")) || strings.HasSuffix(h, "/"+file) {
			return true
		}
	}
	return false
}

// FindSources reads the source of each file the counts name.
func FindSources(cr *Result, dir string) map[string]Source {
	out := map[string]Source{}
	compDirs := map[string]bool{}
	for _, fc := range cr.Funcs {
		if fc.CompDir != "" {
			compDirs[fc.CompDir] = true
		}
	}
	names, _ := cr.files()
	for _, name := range names {
		var cands []string
		if dir != "" {
			cands = append(cands, tails(dir, name)...)
		}
		if filepath.IsAbs(name) {
			cands = append(cands, name)
		} else {
			for cd := range compDirs {
				// A relative name is relative to the compilation
				// directory, or to the source tree above it (a kernel
				// built with O=).
				for d := cd; ; d = filepath.Dir(d) {
					cands = append(cands, filepath.Join(d, name))
					if d == filepath.Dir(d) {
						break
					}
				}
			}
		}
		cands = append(cands, tails(filepath.Join(cachedir.Root(), "linux-source-6.1", "src"), name)...)
		src := Source{}
		for _, c := range cands {
			b, err := os.ReadFile(c)
			if err != nil {
				src.tried = append(src.tried, c)
				continue
			}
			src.path = c
			sc := bufio.NewScanner(bytes.NewReader(b))
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				src.lines = append(src.lines, sc.Text())
			}
			break
		}
		out[name] = src
	}
	return out
}

// tails are the paths of name under dir: name itself if relative, and
// each tail of it after a '/' (an absolute name from another machine's
// tree).
func tails(dir, name string) []string {
	if !filepath.IsAbs(name) {
		return []string{filepath.Join(dir, name)}
	}
	var out []string
	for i := 1; i < len(name); i++ {
		if name[i] == '/' {
			out = append(out, filepath.Join(dir, name[i+1:]))
		}
	}
	return out
}

// gcovCount is gcov's count column: the count, ##### for code never run,
// - for no code, with * when a block of the line never ran.
func (fl *fileLine) gcovCount() string {
	switch {
	case fl == nil || !fl.hasCode:
		return "-"
	case !fl.known:
		return "?"
	case fl.count == 0:
		return "#####"
	case fl.unexecuted:
		return fmt.Sprintf("%d*", fl.count)
	}
	return fmt.Sprint(fl.count)
}

// Print writes the annotated sources and the arcs.
func (cr *Result) Print(w io.Writer) error {
	names, byFile := cr.files()
	for i, name := range names {
		if cr.Spec.File != "" && i > 0 && !isHome(map[string]bool{cr.Spec.File: true}, name) {
			// A file's cover shows that file whole; the lines of other
			// files its functions inline are in --json.
			fmt.Fprintf(w, "\n%d other files hold code of the functions of %s (inlined): --json has their lines: %s\n", len(names)-i, cr.Arg, strings.Join(names[i:min(len(names), i+5)], ", ")+ellipsis(len(names)-i > 5))
			break
		}
		lines := byFile[name]
		src := cr.Sources[name]
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "%9s:%5d:Source:%s\n", "-", 0, name)
		if src.path == "" {
			fmt.Fprintf(w, "%9s:%5d:Text:not found (looked in %s); counts without it\n", "-", 0, strings.Join(limit(src.tried, 3), ", "))
		} else if src.path != name {
			fmt.Fprintf(w, "%9s:%5d:Text:%s\n", "-", 0, src.path)
		}
		var nums []int
		for n := range lines {
			nums = append(nums, n)
		}
		slices.Sort(nums)
		if len(src.lines) > 0 && nums[len(nums)-1] > len(src.lines) {
			fmt.Fprintf(w, "%9s:%5d:Text:%s has %d lines, but code is on line %d: it is not the source this kernel was built from\n", "-", 0, src.path, len(src.lines), nums[len(nums)-1])
		}
		for _, span := range cr.spans(name, nums, len(src.lines)) {
			if span[0] > 1 && (span != [2]int{1, len(src.lines)}) {
				fmt.Fprintf(w, "%9s:%5d:%s\n", "-", span[0]-1, textOf(src.lines, span[0]-1))
			}
			for n := span[0]; n <= span[1]; n++ {
				fmt.Fprintf(w, "%9s:%5d:%s\n", lines[n].gcovCount(), n, textOf(src.lines, n))
			}
		}
	}
	for _, fc := range cr.Funcs {
		fmt.Fprintln(w)
		cr.printArcs(w, fc)
	}
	return nil
}

func ellipsis(more bool) string {
	if more {
		return ", ..."
	}
	return ""
}

func limit(s []string, n int) []string {
	if len(s) > n {
		return append(s[:n:n], "...")
	}
	return s
}

func textOf(lines []string, n int) string {
	if n >= 1 && n <= len(lines) {
		return lines[n-1]
	}
	return ""
}

// spans are the runs of lines to print of a file: the whole file for a
// file's cover, else each run of lines with code, joined across gaps of
// up to 8 lines, from the covered function's first line.
func (cr *Result) spans(name string, nums []int, nsrc int) [][2]int {
	if cr.Spec.File != "" && isHome(map[string]bool{cr.Spec.File: true}, name) {
		return [][2]int{{1, max(nsrc, nums[len(nums)-1])}}
	}
	var out [][2]int
	for _, n := range nums {
		if k := len(out); k > 0 && n-out[k-1][1] <= 9 {
			out[k-1][1] = n
			continue
		}
		out = append(out, [2]int{n, n})
	}
	for _, fc := range cr.Funcs {
		if fc.File != name && !strings.HasSuffix(name, "/"+fc.File) && !strings.HasSuffix(fc.File, "/"+name) {
			continue
		}
		for i := range out {
			if fc.Line < out[i][0] && out[i][0]-fc.Line <= 9 {
				out[i][0] = fc.Line
			}
		}
	}
	return out
}

// blockAt names a block for the arcs' table: function+offset and the
// line its first instruction is on.
func blockAt(fc *cover.FuncCoverage, addr uint64, end string) (string, string) {
	if addr == 0 {
		return end, ""
	}
	line := ""
	for _, b := range fc.Blocks {
		if b.Start == addr && len(b.Lines) > 0 {
			line = fmt.Sprint(b.Lines[0].Line)
		}
	}
	return fmt.Sprintf("%s+%#x", fc.Function, addr-fc.Entry), line
}

// printArcs writes a function's arcs with their counts.
func (cr *Result) printArcs(w io.Writer, fc *cover.FuncCoverage) {
	calls := fc.Calls()
	called := "calls not determined"
	if calls.Determined {
		called = "called " + human.Plural(int(calls.Count), "time")
	}
	counted := 0
	for _, b := range fc.Blocks {
		if b.Known && !b.Derived {
			counted++
		}
	}
	mod := ""
	if fc.Module != "" {
		mod = " [" + fc.Module + "]"
	}
	fmt.Fprintf(w, "%s%s (%s:%d): %s; %s, %d counted; %s, %d determined from the block counts\n",
		fc.Function, mod, fc.File, fc.Line, called, human.Plural(len(fc.Blocks), "block"), counted, human.Plural(len(fc.Arcs), "arc"), fc.Determined())
	if fc.Inconsistent > 0 {
		fmt.Fprintf(w, "  %s of the flow did not add up (hooks going live or read while the function ran): arcs through them are left undetermined\n", human.Plural(fc.Inconsistent, "sum"))
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "  FROM\tLINE\tTO\tLINE\tCOUNT")
	for _, a := range fc.Arcs {
		from, fl := blockAt(fc, a.From, "entry")
		to, tl := blockAt(fc, a.To, "exit")
		count := fmt.Sprint(a.Count)
		if !a.Determined {
			count = "?"
			if a.HasBound {
				count = fmt.Sprintf("? (at most %d)", a.Bound)
			}
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", from, fl, to, tl, count)
	}
	tw.Flush()
	for _, b := range fc.Blocks {
		if b.Skipped == "" {
			continue
		}
		at, _ := blockAt(fc, b.Start, "")
		got := "not derived"
		if b.Derived {
			got = fmt.Sprintf("derived: %d", b.Count)
		}
		fmt.Fprintf(w, "  block %s not counted (%s): %s\n", at, got, b.Skipped)
	}
}

// The JSON form.

type coverJSON struct {
	Target     string          `json:"target"`
	Spec       string          `json:"spec"`
	Hooks      int             `json:"hooks"`
	Skipped    int             `json:"skipped"`
	RegisterUS int64           `json:"register_us"`
	DurationNS int64           `json:"duration_ns"`
	Command    []string        `json:"command,omitempty"`
	ExitStatus int             `json:"exit_status"`
	Functions  []coverFuncJSON `json:"functions"`
	Files      []coverFileJSON `json:"files"`
}

type coverFuncJSON struct {
	Function        string           `json:"function"`
	File            string           `json:"file"`
	Line            int              `json:"line"`
	PC              string           `json:"pc"`
	Module          string           `json:"module,omitempty"`
	Calls           *uint64          `json:"calls"`
	CallsDetermined bool             `json:"calls_determined"`
	Inconsistent    int              `json:"inconsistent"`
	Blocks          []coverBlockJSON `json:"blocks"`
	Arcs            []coverArcJSON   `json:"arcs"`
}

type coverBlockJSON struct {
	PC      string   `json:"pc"`
	End     string   `json:"end"`
	Count   *uint64  `json:"count"`
	Known   bool     `json:"known"`
	Derived bool     `json:"derived"`
	Skipped string   `json:"skipped,omitempty"`
	Lines   []string `json:"lines"`
}

type coverArcJSON struct {
	From       string  `json:"from"`
	To         string  `json:"to"`
	Count      *uint64 `json:"count"`
	Determined bool    `json:"determined"`
	Bound      *uint64 `json:"bound"`
}

type coverFileJSON struct {
	File   string          `json:"file"`
	Source string          `json:"source,omitempty"`
	Lines  []coverLineJSON `json:"lines"`
}

type coverLineJSON struct {
	Line       int     `json:"line"`
	Count      *uint64 `json:"count"`
	Known      bool    `json:"known"`
	Estimated  bool    `json:"estimated"`
	Unexecuted bool    `json:"unexecuted"`
}

func u64(v uint64, ok bool) *uint64 {
	if !ok {
		return nil
	}
	return &v
}

// JSON is klasy cover --json.
func (cr *Result) JSON() coverJSON {
	j := coverJSON{Target: cr.Target, Spec: cr.Arg, Hooks: cr.Hooks, Skipped: cr.Skipped, RegisterUS: cr.Register.Microseconds(),
		DurationNS: cr.Elapsed.Nanoseconds(), Command: cr.Argv, ExitStatus: cr.Exit, Functions: []coverFuncJSON{}, Files: []coverFileJSON{}}
	hex := func(a uint64, end string) string {
		if a == 0 {
			return end
		}
		return fmt.Sprintf("%#x", a)
	}
	for _, fc := range cr.Funcs {
		calls := fc.Calls()
		fj := coverFuncJSON{Function: fc.Function, File: fc.File, Line: fc.Line, PC: hex(fc.Entry, ""), Module: fc.Module,
			Calls: u64(calls.Count, calls.Determined), CallsDetermined: calls.Determined, Inconsistent: fc.Inconsistent,
			Blocks: []coverBlockJSON{}, Arcs: []coverArcJSON{}}
		for _, b := range fc.Blocks {
			bj := coverBlockJSON{PC: hex(b.Start, ""), End: hex(b.End, ""), Count: u64(b.Count, b.Known), Known: b.Known, Derived: b.Derived,
				Skipped: b.Skipped, Lines: []string{}}
			for _, l := range b.Lines {
				bj.Lines = append(bj.Lines, fmt.Sprintf("%s:%d", l.File, l.Line))
			}
			fj.Blocks = append(fj.Blocks, bj)
		}
		for _, a := range fc.Arcs {
			fj.Arcs = append(fj.Arcs, coverArcJSON{From: hex(a.From, "entry"), To: hex(a.To, "exit"), Count: u64(a.Count, a.Determined),
				Determined: a.Determined, Bound: u64(a.Bound, a.HasBound && !a.Determined)})
		}
		j.Functions = append(j.Functions, fj)
	}
	names, byFile := cr.files()
	for _, name := range names {
		fj := coverFileJSON{File: name, Source: cr.Sources[name].path, Lines: []coverLineJSON{}}
		var nums []int
		for n := range byFile[name] {
			nums = append(nums, n)
		}
		slices.Sort(nums)
		for _, n := range nums {
			l := byFile[name][n]
			fj.Lines = append(fj.Lines, coverLineJSON{Line: n, Count: u64(l.count, l.known), Known: l.known, Estimated: l.estimated, Unexecuted: l.unexecuted})
		}
		j.Files = append(j.Files, fj)
	}
	return j
}
