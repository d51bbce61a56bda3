package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/klasy/klasy/internal/cachedir"
	"github.com/klasy/klasy/weaver"
	"github.com/klasy/klasy/weaver/cover"
	"github.com/klasy/klasy/weaver/joinpoint"
	"github.com/klasy/klasy/weaver/records"
	"github.com/klasy/klasy/weaver/resolve"
	"github.com/klasy/klasy/weaver/target"
)

func init() {
	register(&command{
		Name:    "cover",
		Summary: "live coverage of kernel functions: block counts, gcov-style lines, edge counts",
		Help: `usage: klasy cover [--lab NAME] [--json] [--source DIR] [--for DURATION] FUNC|FILE [-- CMD [ARG...]]

Counts how often each basic block of FUNC runs in the running kernel
(or of every function defined in FILE: a name with a / or .c), without
rebuilding it, as KernInst counted blocks: it weaves a hook that only
counts on the entry of every block (the aspect block(FUNC) with empty
advice: one kprobe per block, no record per hit, the hit counter
'klasy status' shows), lets the kernel run for DURATION or while CMD
runs on the target (in a lab through its agent, as 'klasy lab exec'
does; its output goes to standard error), or until Ctrl-C, reads the
counts, and unweaves. No hook stays: Ctrl-C while it counts ends the
count there, and the counts so far are shown after the unweave. FUNC may
be a % pattern.

It prints, for each source file, its lines as gcov does
("    count:lineno:source"): the times the line was entered (gcov's rule:
the counts of the arcs into the blocks holding its code from outside
them, plus the cycles within), ##### for a line whose code never ran,
"-" for a line without code, "?" for a line whose blocks could not be
counted, and "N*" for a line that ran while a block holding it did not.
With FUNC, the spans of lines its code holds, its inlined helpers' too;
with FILE, the whole file. The source is read from the kernel's tree:
--source DIR, the file's absolute path, the unit's DW_AT_comp_dir and
the linux-source-6.1 tree under the klasy cache; when it is not found,
the counts are printed without text, and it says so.

Then, for each function, the arcs of its control flow graph with their
counts, derived from the block counts as KernInst did: the counts of the
arcs into (and out of) a block sum to its count, so an arc that is the
only unknown of such a sum is determined; repeated until nothing
changes, this gives most arcs. The others are marked not determined,
with the most they can be. "entry" is the function being called (its
count the calls), "exit" leaving it (ret, a tail call).

What the counts cannot tell: a block the kernel refuses a hook on (a
BUG() trap) is derived from the others when the sums allow, else "?";
blocks only an indirect jump reaches (a jump table: the kernel is
built without them under retpolines) are not counted, and the jump is
named. Hooks go live one by one while the kernel runs, so a function
running at that moment can leave a count off by a few: sums that do
not add up are reported, not forced. A cover of a large file registers
hundreds of kprobes, one at a time (the kernel has no batch for them):
the time it took is printed.

--json prints one object: target, spec, hooks, skipped, register_us,
duration_ns, command, exit_status, and
  functions: each {function file line pc module calls calls_determined
    inconsistent blocks arcs}, a block {pc end count known derived
    skipped lines}, an arc {from to count determined bound} (from
    "entry", to "exit", pc otherwise; count and bound null when unknown)
  files: each {file source lines}, source the path read (absent if not
    found), a line {line count known estimated unexecuted}

Examples:
  klasy cover --lab demo do_mkdirat -- mkdir /tmp/a /tmp/b
  klasy cover --lab demo fs/namei.c -- ls -lR /
  klasy cover --lab demo --for 10s path_openat
  klasy cover --lab demo --json link_path_walk -- ls / | jq '.functions[0].calls'

` + targetHelp,
		Run: runCover,
	})
}

// coverFlags are klasy cover's options.
type coverFlags struct {
	target.TargetOptions
	json   bool
	dur    time.Duration
	source string
}

func runCover(s *stdio, args []string) error {
	var f coverFlags
	fs := newFlagSet("cover")
	fs.StringVar(&f.Lab, "lab", "", "")
	fs.StringVar(&f.Vmlinux, "vmlinux", "", "")
	fs.StringVar(&f.Headers, "headers", "", "")
	fs.Var((*stringList)(&f.Modules), "module", "")
	fs.BoolVar(&f.json, "json", false, "")
	fs.DurationVar(&f.dur, "for", 0, "")
	fs.StringVar(&f.source, "source", "", "")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return usageError{Msg: "want a FUNC or FILE to cover"}
	}
	// What follows FUNC|FILE is the command (after --, so that its own
	// flags are its, as for klasy lab exec).
	argv := fs.Args()[1:]
	if len(argv) == 0 {
		argv = nil
	}
	if f.dur < 0 {
		return usageError{Msg: "--for takes a positive duration, e.g. 10s"}
	}
	if f.dur > 0 && argv != nil {
		return usageError{Msg: "give either --for DURATION or -- CMD, not both"}
	}
	spec, err := cover.ParseCoverSpec(fs.Arg(0))
	if err != nil {
		return usageError{Msg: err.Error()}
	}
	path, src := spec.Aspect()

	ctx, cancel := signalContext()
	defer cancel()
	sess, err := weaver.OpenSession(ctx, weaver.SessionOptions{TargetOptions: f.TargetOptions, Log: s.Err})
	if err != nil {
		return err
	}
	defer sess.Close()
	parsed, err := weaver.LoadAspect(path, src)
	if err != nil {
		return coverError(fs.Arg(0), err)
	}
	af, rep, err := weaver.Plan(sess, parsed)
	if err != nil {
		return coverError(fs.Arg(0), err)
	}
	woven, nfuncs, reasons := coverPlan(rep)
	if woven == 0 {
		return fmt.Errorf("covering %s: none of its %d blocks can be hooked (%s)", fs.Arg(0), len(rep.JoinPoints), strings.Join(reasons, "; "))
	}
	fmt.Fprintf(s.Err, "klasy: cover: weaving %s on the basic blocks of %s into %s\n", plural(woven, "hook"), plural(nfuncs, "function"), sess.T.Name())
	if err := weaver.WeaveResolved(ctx, sess, af, rep); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("covering %s: interrupted while weaving; nothing stays woven", fs.Arg(0))
		}
		return weaveError(s, err)
	}
	// From here on the hooks are in: whatever happens, they go.
	unwoven := false
	unweave := func() error {
		if unwoven {
			return nil
		}
		unwoven = true
		uctx, ucancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer ucancel()
		_, err := weaver.Unweave(uctx, sess, []string{rep.Aspect}, false)
		return err
	}
	defer unweave()
	mech := map[string]int{}
	for _, jp := range rep.JoinPoints {
		if jp.Skipped == "" {
			mech[jp.Mechanism]++
		}
	}
	t := rep.Times
	fmt.Fprintf(s.Err, "klasy: cover: woven: resolve %s, generate %s, build %s, load %s; %s (ftrace %d, jump %d, int3 %d) registered in %s (%s per hook)",
		dur(t.Resolve), dur(t.Generate), dur(t.Build), dur(t.Load), plural(woven, "hook"), mech["ftrace"], mech["jump"], mech["int3"],
		durPrecise(t.Register), durPrecise(t.Register/time.Duration(woven)))
	if n := len(rep.JoinPoints) - woven; n > 0 {
		fmt.Fprintf(s.Err, "; %d blocks not hooked (%s)", n, strings.Join(reasons, "; "))
	}
	fmt.Fprintln(s.Err)

	start := time.Now()
	exit := 0
	var runErr error
	switch {
	case argv != nil:
		fmt.Fprintf(s.Err, "klasy: cover: running %s in %s\n", strings.Join(argv, " "), sess.T.Name())
		exit, runErr = sess.Exec(ctx, argv, s.Err, s.Err)
	case f.dur > 0:
		select {
		case <-ctx.Done():
		case <-time.After(f.dur):
		}
	default:
		fmt.Fprintf(s.Err, "klasy: cover: counting until Ctrl-C\n")
		<-ctx.Done()
	}
	elapsed := time.Since(start)
	interrupted := ctx.Err() != nil

	rctx, rcancel := context.WithTimeout(context.Background(), time.Minute)
	defer rcancel()
	st, err := sess.Status(rctx)
	if err == nil && st == nil {
		err = fmt.Errorf("the klasy runtime left %s while counting", sess.T.Name())
	}
	var asp *records.Aspect
	if err == nil {
		for i := range st.Aspects {
			if st.Aspects[i].Module == rep.Module {
				asp = &st.Aspects[i]
			}
		}
		if asp == nil {
			err = fmt.Errorf("aspect %s left %s while counting (unwoven by someone else?)", rep.Aspect, sess.T.Name())
		}
	}
	ustart := time.Now()
	if uerr := unweave(); uerr != nil {
		return fmt.Errorf("unweaving %s: %w", rep.Aspect, uerr)
	}
	if err != nil {
		return fmt.Errorf("reading the counts: %w", err)
	}
	fmt.Fprintf(s.Err, "klasy: cover: counted for %s; unwoven from %s in %s\n", durPrecise(elapsed), sess.T.Name(), durPrecise(time.Since(ustart)))
	if runErr != nil && !interrupted {
		return runErr
	}
	covs, err := cover.Functions(sess, rep.JoinPoints, asp)
	if err != nil {
		return err
	}
	cr := &coverResult{target: sess.T.Name(), spec: spec, arg: fs.Arg(0), funcs: covs, hooks: woven,
		skipped: len(rep.JoinPoints) - woven, register: rep.Times.Register, elapsed: elapsed, argv: argv, exit: exit}
	cr.sources = findSources(cr, f.source)
	if f.json {
		err = json.NewEncoder(s.Out).Encode(cr.toJSON())
	} else {
		err = cr.print(s.Out)
	}
	if err != nil {
		return err
	}
	switch {
	case interrupted:
		fmt.Fprintf(s.Err, "klasy: cover: interrupted: the counts are those until then\n")
		return exitError{Code: 130}
	case exit != 0:
		fmt.Fprintf(s.Err, "klasy: cover: %s exited with status %d\n", argv[0], exit)
		return exitError{Code: exit}
	}
	return nil
}

// coverError turns the diagnostics of the generated aspect into the
// message about what was asked for.
func coverError(what string, err error) error {
	var de *resolve.DiagnosticsError
	if errors.As(err, &de) && len(de.Diags) > 0 {
		var msgs []string
		for _, d := range de.Diags {
			msgs = append(msgs, d.Msg)
		}
		return fmt.Errorf("covering %s: %s", what, strings.Join(msgs, "; "))
	}
	return err
}

// coverPlan counts the hooks and functions of a cover and the reasons
// blocks are skipped for.
func coverPlan(rep *weaver.Report) (woven, funcs int, reasons []string) {
	fns := map[string]bool{}
	why := map[string]int{}
	for _, jp := range rep.JoinPoints {
		fns[jp.Module+" "+jp.Function] = true
		if jp.Skipped == "" {
			woven++
			continue
		}
		why[joinpoint.SkipClass(jp.Skipped)]++
	}
	for k, n := range why {
		reasons = append(reasons, fmt.Sprintf("%s %d", k, n))
	}
	slices.Sort(reasons)
	return woven, len(fns), reasons
}

// durPrecise prints short durations to the microsecond.
func durPrecise(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%d µs", d.Microseconds())
	case d < time.Second:
		return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1e3)
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}

// coverResult is what klasy cover prints.
type coverResult struct {
	target   string
	spec     cover.CoverSpec
	arg      string
	funcs    []*cover.FuncCoverage
	hooks    int
	skipped  int
	register time.Duration
	elapsed  time.Duration
	argv     []string
	exit     int
	sources  map[string]source // by file name as the line table has it
}

// source is a file's text, or where it was looked for.
type source struct {
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
func (cr *coverResult) files() (names []string, byFile map[string]map[int]*fileLine) {
	byFile = map[string]map[int]*fileLine{}
	for _, fc := range cr.funcs {
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
	for _, fc := range cr.funcs {
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

// findSources reads the source of each file the counts name.
func findSources(cr *coverResult, dir string) map[string]source {
	out := map[string]source{}
	compDirs := map[string]bool{}
	for _, fc := range cr.funcs {
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
		src := source{}
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

// print writes the annotated sources and the arcs.
func (cr *coverResult) print(w io.Writer) error {
	names, byFile := cr.files()
	for i, name := range names {
		if cr.spec.File != "" && i > 0 && !isHome(map[string]bool{cr.spec.File: true}, name) {
			// A file's cover shows that file whole; the lines of other
			// files its functions inline are in --json.
			fmt.Fprintf(w, "\n%d other files hold code of the functions of %s (inlined): --json has their lines: %s\n", len(names)-i, cr.arg, strings.Join(names[i:min(len(names), i+5)], ", ")+ellipsis(len(names)-i > 5))
			break
		}
		lines := byFile[name]
		src := cr.sources[name]
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
	for _, fc := range cr.funcs {
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
func (cr *coverResult) spans(name string, nums []int, nsrc int) [][2]int {
	if cr.spec.File != "" && isHome(map[string]bool{cr.spec.File: true}, name) {
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
	for _, fc := range cr.funcs {
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
func (cr *coverResult) printArcs(w io.Writer, fc *cover.FuncCoverage) {
	calls := fc.Calls()
	called := "calls not determined"
	if calls.Determined {
		called = "called " + plural(int(calls.Count), "time")
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
		fc.Function, mod, fc.File, fc.Line, called, plural(len(fc.Blocks), "block"), counted, plural(len(fc.Arcs), "arc"), fc.Determined())
	if fc.Inconsistent > 0 {
		fmt.Fprintf(w, "  %s of the flow did not add up (hooks going live or read while the function ran): arcs through them are left undetermined\n", plural(fc.Inconsistent, "sum"))
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

func (cr *coverResult) toJSON() coverJSON {
	j := coverJSON{Target: cr.target, Spec: cr.arg, Hooks: cr.hooks, Skipped: cr.skipped, RegisterUS: cr.register.Microseconds(),
		DurationNS: cr.elapsed.Nanoseconds(), Command: cr.argv, ExitStatus: cr.exit, Functions: []coverFuncJSON{}, Files: []coverFileJSON{}}
	hex := func(a uint64, end string) string {
		if a == 0 {
			return end
		}
		return fmt.Sprintf("%#x", a)
	}
	for _, fc := range cr.funcs {
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
		fj := coverFileJSON{File: name, Source: cr.sources[name].path, Lines: []coverLineJSON{}}
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
