package resolve

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/arch/x86/x86asm"

	"github.com/klasy/klasy/aspect"
	"github.com/klasy/klasy/debugklasy"
	"github.com/klasy/klasy/dwarfmap"
	"github.com/klasy/klasy/internal/golden"
	"github.com/klasy/klasy/internal/testenv"
	"github.com/klasy/klasy/weaver/ctxvalue"
	"github.com/klasy/klasy/weaver/internal/weavertest"
	"github.com/klasy/klasy/weaver/joinpoint"
	"github.com/klasy/klasy/x86code"
)

// The access resolver against C fixtures compiled at test time with the
// plugin (gcc -O2 -g -gdwarf-5 -fplugin=gcc-patches/klasy.so), its
// choices checked against objdump's disassembly of the same object.

// pluginPath returns gcc-patches/klasy.so, or skips (fails under
// KLASY_TEST_REQUIRE) without it.
func pluginPath(t testing.TB) string {
	t.Helper()
	so, err := filepath.Abs("../../gcc-patches/klasy.so")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(so); err != nil {
		testenv.Need(t, "plugin", fmt.Errorf("gcc-patches/klasy.so not built: run make plugin"))
	}
	if src, err := os.Stat("../../gcc-patches/klasy.cc"); err == nil {
		if st, err := os.Stat(so); err == nil && src.ModTime().After(st.ModTime()) {
			testenv.Need(t, "plugin", fmt.Errorf("gcc-patches/klasy.so is older than klasy.cc: run make plugin"))
		}
	}
	testenv.Need(t, "plugin", nil)
	return so
}

// fixture compiles testdata/access/NAME.c with the plugin and indexes it.
func fixture(t *testing.T, name string) (obj string, x *dwarfmap.Index) {
	t.Helper()
	so := pluginPath(t)
	obj = filepath.Join(t.TempDir(), name+".o")
	args := []string{"-O2", "-g", "-gdwarf-5", "-fplugin=" + so, "-c", "-o", obj, filepath.Join("testdata", "access", name+".c")}
	testenv.GCC(t, args...)
	x, _, err := dwarfmap.Load(obj, dwarfmap.Options{NoCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Close() })
	return obj, x
}

// objdumpText maps the .text offsets of obj to objdump -d's instruction.
func objdumpText(t *testing.T, obj string) map[uint64]string {
	t.Helper()
	out, err := exec.Command("objdump", "-d", "-w", "--no-show-raw-insn", "-j", ".text", obj).Output()
	if err != nil {
		testenv.Need(t, "binutils", fmt.Errorf("objdump: %v", err))
	}
	ins := regexp.MustCompile(`^\s*([0-9a-f]+):\s+(.*)$`)
	m := map[uint64]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if g := ins.FindStringSubmatch(sc.Text()); g != nil {
			a, _ := strconv.ParseUint(g[1], 16, 64)
			m[a] = strings.Join(strings.Fields(g[2]), " ")
		}
	}
	return m
}

// marks maps the MARK names of a fixture source to their lines.
func marks(t *testing.T, src string) map[string]int {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for i, l := range strings.Split(string(b), "\n") {
		if _, m, ok := strings.Cut(l, "/* MARK "); ok {
			out[strings.TrimSuffix(strings.TrimSpace(m), "*/")] = i + 1
		}
	}
	for k, v := range out {
		out[strings.TrimSpace(k)] = v
	}
	return out
}

// resolveSrc resolves one advice with pointcut pc and timing when.
func resolveSrc(t *testing.T, x *dwarfmap.Index, pc, when string) ([]*joinpoint.JoinPoint, []joinpoint.Warning, error) {
	t.Helper()
	src := fmt.Sprintf("<aspect>\n<advice>\n<pointcut>%s</pointcut>\n<%s>STORE_DATA(1);</%s>\n</advice>\n</aspect>\n", pc, when, when)
	f, diags := aspect.Load("x.klasy", []byte(src))
	if len(diags) > 0 {
		t.Fatalf("%s: %v", pc, diags)
	}
	var warns []joinpoint.Warning
	jps, err := Resolve(f, x, ResolveOptions{Warn: func(w joinpoint.Warning) { warns = append(warns, w) }})
	joinpoint.SortJoinPoints(jps)
	return jps, warns, err
}

// memOperand parses objdump's AT&T memory operand: disp(%base,%index,s).
var memOperand = regexp.MustCompile(`(-?0x[0-9a-f]+|-?[0-9]+)?\(%([a-z0-9]+)(?:,%([a-z0-9]+),?[0-9]*)?\)`)

func TestResolveAccessFixture(t *testing.T) {
	obj, x := fixture(t, "task")
	text := objdumpText(t, obj)
	mark := marks(t, "testdata/access/task.c")
	img := x.Image()

	// jpWant is one join point: function [in host] at MARK, exact or
	// not; for an exact one the displacement its memory operand has,
	// and for a target the offset from that operand's base register.
	type jpWant struct {
		fn, in, mark string
		exact        bool
		kind         joinpoint.HookKind
		disp         int64
		targetOff    int64 // target = the operand's base register + targetOff
	}
	tests := []struct {
		pc, when string
		want     []jpWant
	}{
		{"access(task.count)", "before", []jpWant{
			{"get_count", "", "get_count", true, joinpoint.Kprobe, 0, 0},
			{"set_count", "", "set_count", true, joinpoint.Kprobe, 0, 0},
			{"inc_count", "", "inc_count", true, joinpoint.Kprobe, 0, 0},
			{"two", "", "two", true, joinpoint.Kprobe, 0, 0},
			{"two", "", "two", true, joinpoint.Kprobe, 0, 0},
			{"peek", "peek_twice", "peek", true, joinpoint.Kprobe, 0, 0},
			{"peek", "peek_twice", "peek", true, joinpoint.Kprobe, 0, 0},
			{"peek", "peek_once", "peek", true, joinpoint.Kprobe, 0, 0},
			{"walk", "", "walk_count", true, joinpoint.Kprobe, 0, 0},
			{"with_local", "", "with_local", true, joinpoint.Kprobe, 0, 0},
		}},
		{"access(task.count) AND within_function(peek_twice)", "before", []jpWant{
			{"peek", "peek_twice", "peek", true, joinpoint.Kprobe, 0, 0},
			{"peek", "peek_twice", "peek", true, joinpoint.Kprobe, 0, 0},
		}},
		{"access(task.count) AND within_function(peek) AND target(t)", "after", []jpWant{
			{"peek", "peek_twice", "peek", true, joinpoint.KprobePost, 0, 0},
			{"peek", "peek_twice", "peek", true, joinpoint.KprobePost, 0, 0},
			{"peek", "peek_once", "peek", true, joinpoint.KprobePost, 0, 0},
		}},
		{"access(inner.z) AND target(e)", "before", []jpWant{{"emb_z", "", "emb_z", true, joinpoint.Kprobe, 0x18, 0x10}}},
		{"access(task.next) AND target(tk)", "before", []jpWant{
			{"from_emb", "", "from_emb", true, joinpoint.Kprobe, 0x10, -0x10},
			{"walk", "", "walk_next", true, joinpoint.Kprobe, 0x20, 0},
		}},
		{"access(task.flag_b) AND target(tk)", "before", []jpWant{{"bits", "", "bits", true, joinpoint.Kprobe, 0x28, 0}}},
		{"access(task.pad) AND target(tk)", "after", []jpWant{{"pad_of", "", "pad_of", true, joinpoint.KprobePost, 0x4, 0}}},
		{"access(task.arr) AND target(tk)", "before", []jpWant{{"sum_arr", "", "sum_arr", true, joinpoint.Kprobe, 0x30, 0}}},
		{"access(inner.fs) AND target(in)", "after", []jpWant{
			{"thread_fs", "", "thread_fs", true, joinpoint.KprobePost, 0, 0},
			{"via_call", "", "via_call", true, joinpoint.KprobePost, 0, 0},
		}},
		{"access(box.tr) AND target(bx) AND within_function(copy_trio)", "after", []jpWant{{"copy_trio", "", "copy_trio", false, joinpoint.Kprobe, 0, 0}}},
		// b's register is overwritten by the line's last instruction: the
		// hook goes on that instruction, the target taken before it (one
		// hook for the line's two records).
		{"access(box.tr) AND target(bx) AND within_function(last_use)", "after", []jpWant{
			{"last_use", "", "last_use", false, joinpoint.KprobePost, 0, 0},
		}},
		{"access(task.count) AND local_var(limit, l)", "before", []jpWant{{"with_local", "", "with_local", true, joinpoint.Kprobe, 0, 0}}},
	}
	for _, tc := range tests {
		t.Run(tc.pc+" "+tc.when, func(t *testing.T) {
			jps, warns, err := resolveSrc(t, x, tc.pc, tc.when)
			if err != nil {
				t.Fatal(err)
			}
			if len(warns) > 0 {
				t.Errorf("warnings: %v", warns)
			}
			if len(jps) != len(tc.want) {
				t.Fatalf("%d join points, want %d:\n%s", len(jps), len(tc.want), weavertest.FormatJoinPoints(jps))
			}
			var unmatched []jpWant
			unmatched = append(unmatched, tc.want...)
			for _, jp := range jps {
				if jp.Skipped != "" {
					t.Errorf("%s skipped: %s", jp.Where(), jp.Skipped)
					continue
				}
				sec, off, ok := img.SectionAt(jp.Addr)
				if !ok || sec != ".text" {
					t.Errorf("%s at %#x: in %q, want .text", jp.Where(), jp.Addr, sec)
					continue
				}
				ins, ok := text[off]
				if !ok {
					t.Errorf("%s at .text+%#x: objdump has no instruction there", jp.Where(), off)
					continue
				}
				i := slices.IndexFunc(unmatched, func(w jpWant) bool {
					if w.fn != jp.Function || w.in != jp.InlinedIn || mark[w.mark] != jp.Line || w.exact != jp.Exact || w.kind != jp.Kind {
						return false
					}
					if !w.exact {
						return true
					}
					m := memOperand.FindStringSubmatch(ins)
					if m == nil {
						return false
					}
					d, _ := strconv.ParseInt(strings.Replace(m[1], "0x", "", 1), 16, 64)
					if strings.HasPrefix(m[1], "-") {
						d, _ = strconv.ParseInt(strings.Replace(m[1], "-0x", "-", 1), 16, 64)
					}
					return d == w.disp
				})
				if i < 0 {
					t.Errorf("unexpected join point %s exact=%v %s at .text+%#x: %s", jp.Where(), jp.Exact, jp.Kind, off, ins)
					continue
				}
				w := unmatched[i]
				unmatched = slices.Delete(unmatched, i, i+1)
				for _, a := range jp.Args {
					if !a.ByValue || !w.exact {
						continue
					}
					// target: the memory operand's base register + offset.
					m := memOperand.FindStringSubmatch(ins)
					want := "r" + strings.TrimPrefix(strings.TrimPrefix(m[2], "r"), "e")
					if a.Value == nil || len(a.Value.Ops) == 0 || "r"+ctxvalue.RegName(a.Value.Ops[0].Reg) != want && ctxvalue.RegName(a.Value.Ops[0].Reg) != m[2] {
						t.Errorf("%s: target %s, want %%%s%+d (%s)", jp.Where(), a.Value, m[2], w.targetOff, ins)
						continue
					}
					var got int64
					if len(a.Value.Ops) > 1 {
						got = a.Value.Ops[1].Arg
					}
					if got != w.targetOff || a.Value.InMemory {
						t.Errorf("%s: target %s, want %%%s%+d", jp.Where(), a.Value, m[2], w.targetOff)
					}
				}
			}
			for _, w := range unmatched {
				t.Errorf("missing join point %+v (line %d)", w, mark[w.mark])
			}
		})
	}
}

// TestResolveAccessLineTier: a member copied by two instructions gets a
// line-level join point; before advice at the line's is_stmt address,
// after advice at the end of the line's code, and the target from the
// base variable's DWARF location there.
func TestResolveAccessLineTier(t *testing.T) {
	obj, x := fixture(t, "task")
	text := objdumpText(t, obj)
	mark := marks(t, "testdata/access/task.c")
	for _, when := range []string{"before", "after"} {
		jps, _, err := resolveSrc(t, x, "access(box.tr) AND target(bx) AND within_function(copy_trio)", when)
		if err != nil {
			t.Fatal(err)
		}
		if len(jps) != 1 || jps[0].Exact || jps[0].Skipped != "" {
			t.Fatalf("%s: %s", when, weavertest.FormatJoinPoints(jps))
		}
		jp := jps[0]
		_, off, _ := x.Image().SectionAt(jp.Addr)
		rows := x.Rows()
		var lineAddrs []uint64
		for _, r := range rows {
			if int(r.Line) == mark["copy_trio"] && r.Flags&dwarfmap.RowEndSequence == 0 {
				lineAddrs = append(lineAddrs, r.Addr)
			}
		}
		slices.Sort(lineAddrs)
		switch when {
		case "before":
			if jp.Addr != lineAddrs[0] {
				t.Errorf("before at %#x (%s), want the line's first row %#x", jp.Addr, text[off], lineAddrs[0])
			}
		case "after":
			// The instruction before the hook is the line's last (a store
			// of the copy); the hook's is the next line's.
			if jp.Addr <= lineAddrs[len(lineAddrs)-1] {
				t.Errorf("after at %#x, not past the line's rows %x", jp.Addr, lineAddrs)
			}
			if f, l, _ := x.LineAt(jp.Addr); l == mark["copy_trio"] {
				t.Errorf("after at %#x is still line %s:%d", jp.Addr, f, l)
			}
		}
		if len(jp.Args) != 1 || jp.Args[0].Value == nil || jp.Args[0].Value.String() != "di:8" {
			t.Errorf("%s: target %+v, want rdi (b, the parameter, untouched by the line)", when, jp.Args)
		}
	}
}

func TestResolveAccessErrors(t *testing.T) {
	_, x := fixture(t, "task")
	for _, tc := range []struct{ pc, err, warn string }{
		{"access(task.cont)", "x.klasy:3:23: access(task.cont): struct task has no member cont; did you mean count?", ""},
		{"access(tsk.count)", "x.klasy:3:18: access(tsk.count): no struct or union tsk in", "did you mean task?"},
		{"access(task.count) AND within_file(nosuch.c)", "", "x.klasy:3:11: access(task.count) AND within_file(nosuch.c) selects no join point: none of the 8 accesses recorded is in the functions and files the pointcut names"},
		{"access(task.count) AND local_var(nosuch, n)", "", "selects no join point: of the 9 copies of the code that hold the accesses, none has the local_var(...) variables in scope"},
		{"access(task.%) AND within_function(nosuch)", "", "selects no join point"},
	} {
		jps, warns, err := resolveSrc(t, x, tc.pc, "before")
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), tc.warn)):
			t.Errorf("%s: error %v, want %q ... %q", tc.pc, err, tc.err, tc.warn)
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.pc, err)
		case tc.err == "" && (len(jps) != 0 || len(warns) != 1 || !strings.Contains(warns[0].String(), tc.warn)):
			t.Errorf("%s: %d join points, warnings %v; want none and %q", tc.pc, len(jps), warns, tc.warn)
		}
	}
}

// TestResolveAccessGolden keeps every join point of the fixture's
// accesses, with the instruction objdump shows at each, in
// testdata/access.golden.
func TestResolveAccessGolden(t *testing.T) {
	obj, x := fixture(t, "task")
	text := objdumpText(t, obj)
	var b strings.Builder
	for _, c := range []struct{ pc, when string }{
		{"access(%.%) AND target(x)", "before"},
		{"access(%.%) AND target(x)", "after"},
	} {
		jps, _, err := resolveSrc(t, x, c.pc, c.when)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "# %s <%s>\n", c.pc, c.when)
		for _, jp := range jps {
			_, off, _ := x.Image().SectionAt(jp.Addr)
			tier := "line"
			if jp.Exact {
				tier = "exact"
			}
			line := strings.TrimSuffix(weavertest.FormatJoinPoints([]*joinpoint.JoinPoint{jp}), "\n")
			line = strings.Replace(line, fmt.Sprintf("%#x", jp.Addr), fmt.Sprintf(".text+%#x", off), 1)
			fmt.Fprintf(&b, "%s %s.%s %s %s | %s\n", line, jp.Access.Struct, jp.Access.Member, jp.Access.Mode, tier, text[off])
		}
	}
	golden.Check(t, "testdata/access.golden", b.String())
}

// TestResolveAccessBuiltKernel resolves access(sk_buff.%), with and
// without target(skb), over the whole built kernel: the coverage KLASY's
// evaluation counted, and every hook checked on its own: an instruction
// boundary of its function (dwarfmap's CheckInstruction, which decodes
// the function from its start), and for an exact one an instruction
// whose memory operand is used as the access is.
func TestResolveAccessBuiltKernel(t *testing.T) {
	x := weavertest.BuiltIndex(t)
	for _, c := range []struct {
		pc                             string
		minHooked, minExact, minTarget float64 // fractions of the lines
	}{
		{"access(sk_buff.%)", 0.97, 0.70, 0},
		{"access(sk_buff.%) AND target(skb)", 0.94, 0.70, 0.94},
	} {
		for _, when := range []string{"before", "after"} {
			start := time.Now()
			jps, _, err := resolveSrc(t, x, c.pc, when)
			took := time.Since(start)
			if err != nil {
				t.Fatal(err)
			}
			cov := joinpoint.Coverage(jps)
			t.Logf("%s <%s>: %d join points in %v: %s", c.pc, when, len(jps), took.Round(time.Millisecond), cov)
			frac := func(n int) float64 { return float64(n) / float64(cov.Lines) }
			if cov.Lines < 3000 || frac(cov.LinesHooked) < c.minHooked || frac(cov.LinesExact) < c.minExact || frac(cov.LinesTarget) < c.minTarget {
				t.Errorf("%s <%s>: coverage below what this kernel gave: %s", c.pc, when, cov)
			}
			// Issue 19's bar, of the lines with code in the image: ≥ 99%
			// joined, ≥ 98% with the target bound where it is asked.
			withCode := float64(cov.Lines - cov.LinesNoCode)
			if c.minTarget == 0 && float64(cov.LinesHooked) < 0.99*withCode {
				t.Errorf("%s <%s>: %d of %v lines with code joined, want ≥ 99%%", c.pc, when, cov.LinesHooked, withCode)
			}
			if c.minTarget > 0 && float64(cov.LinesTarget) < 0.98*withCode {
				t.Errorf("%s <%s>: %d of %v lines with code with the target bound, want ≥ 98%%", c.pc, when, cov.LinesTarget, withCode)
			}
			if took > 10*time.Second {
				t.Errorf("%s: resolving took %v", c.pc, took)
			}
			for _, jp := range jps {
				if jp.Skipped != "" {
					continue
				}
				if err := x.CheckInstruction(jp.Addr); err != nil {
					t.Errorf("%s: %v", jp.Where(), err)
					continue
				}
				if !jp.Exact {
					continue
				}
				code := x.Image().ReadText(jp.Addr, 16)
				inst, err := x86asm.Decode(code, 64)
				if err != nil {
					t.Errorf("%s at %#x: %v", jp.Where(), jp.Addr, err)
					continue
				}
				acc, ok := x86code.Access(&inst)
				mode := map[string]debugklasy.Mode{"read": debugklasy.Read, "write": debugklasy.Write, "rw": debugklasy.ReadWrite, "addr": debugklasy.Addr}[jp.Access.Mode]
				if !ok || !mode.Fits(acc.Kind) {
					t.Errorf("%s at %#x: exact hook on %v, which does not %s memory", jp.Where(), jp.Addr, inst, jp.Access.Mode)
				}
			}
		}
	}
}
