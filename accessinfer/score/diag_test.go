package score

import (
	"bufio"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"

	"golang.org/x/arch/x86/x86asm"

	"github.com/klasy/klasy/accessinfer"
	"github.com/klasy/klasy/debugklasy"
	"github.com/klasy/klasy/dwarfmap"
	"github.com/klasy/klasy/dwarfmap/elfimage"
	"github.com/klasy/klasy/x86code"
)

// TestDiagnose writes every inferred access of the built kernel that the
// plugin does not confirm, with what is around it, to the file
// ACCESSINFER_DIAG names: the instruction's lines (its rows, its
// block's, its call sites), the plugin's records of the same member in
// the functions holding it, and the plugin's records at its lines. It
// is a tool for sorting disagreements into classes, not a check.
func TestDiagnose(t *testing.T) {
	out := os.Getenv("ACCESSINFER_DIAG")
	if out == "" {
		t.Skip("ACCESSINFER_DIAG=FILE not set")
	}
	vmlinux := builtVmlinux(t)
	x, _, err := dwarfmap.Load(vmlinux, dwarfmap.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	img, err := elfimage.Open(vmlinux)
	if err != nil {
		t.Fatal(err)
	}
	defer img.Close()
	opt := accessinfer.Options{}
	if p := os.Getenv("ACCESSINFER_FUNCS"); p != "" {
		want := map[string]bool{}
		for _, f := range strings.Split(p, ",") {
			want[f] = true
		}
		opt.Func = func(n string) bool { return want[n] }
	}
	res, err := accessinfer.Infer(img, opt)
	if err != nil {
		t.Fatal(err)
	}
	tab, err := debugklasy.Open(vmlinux)
	if err != nil {
		t.Fatal(err)
	}
	b, err := x.NewBatch()
	if err != nil {
		t.Fatal(err)
	}
	writeDiag(t, b, res, tab, out)
}

func writeDiag(t testing.TB, b *dwarfmap.Batch, res *accessinfer.Result, tab *debugklasy.Table, out string) {
	c := newComparer(b, tab)
	// The bitfield tests the source confirms count as confirmed, as
	// Compare counts them.
	c.src = &sourceLines{dir: builtSource(), files: map[string][][]byte{}}
	confirmAll := func(accs []accessinfer.Access) ([]bool, []bool) {
		ok, strict, _ := c.confirmAll(accs)
		for i := range accs {
			ok[i] = ok[i] || c.sourceConfirmed(&accs[i])
		}
		return ok, strict
	}
	type sm struct{ st, mb string }
	byMember := map[sm][]*debugklasy.Access{}
	byLine := map[[2]int][]*debugklasy.Access{}
	for i := range tab.Accesses {
		r := &tab.Accesses[i]
		byMember[sm{r.Struct, r.Member}] = append(byMember[sm{r.Struct, r.Member}], r)
		for _, id := range b.Files(r.File) {
			byLine[[2]int{int(id), r.Line}] = append(byLine[[2]int{int(id), r.Line}], r)
		}
	}
	// The members each out-of-line function's code accesses, by the
	// plugin: its records whose lines have code in the function.
	type hm struct {
		host   uint64
		st, mb string
	}
	inHost := map[hm][]*debugklasy.Access{}
	for i := range tab.Accesses {
		r := &tab.Accesses[i]
		seen := map[uint64]bool{}
		for _, row := range b.LineRows(r.File, r.Line) {
			if fi, ok := b.FuncAt(row.Addr); ok && !seen[fi.Entry] {
				seen[fi.Entry] = true
				inHost[hm{fi.Entry, r.Struct, r.Member}] = append(inHost[hm{fi.Entry, r.Struct, r.Member}], r)
			}
		}
	}
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := bufio.NewWriter(f)
	defer w.Flush()
	fl := func(ls [][2]int) string {
		var s []string
		seen := map[[2]int]bool{}
		for _, l := range ls {
			if seen[l] {
				continue
			}
			seen[l] = true
			s = append(s, fmt.Sprintf("%s:%d", shortPath(b.Index().File(uint32(l[0]))), l[1]))
		}
		return strings.Join(s, " ")
	}
	// ACCESSINFER_TSV=FILE: every access, one a line, with whether the
	// plugin confirms it and what the other levels at its PC do.
	if tsv := os.Getenv("ACCESSINFER_TSV"); tsv != "" {
		tf, err := os.Create(tsv)
		if err != nil {
			t.Fatal(err)
		}
		tw := bufio.NewWriter(tf)
		conf, strictAll := confirmAll(res.Accesses)
		for i := range res.Accesses {
			a := &res.Accesses[i]
			j, k := i, i
			for j > 0 && res.Accesses[j-1].PC == a.PC {
				j--
			}
			for k+1 < len(res.Accesses) && res.Accesses[k+1].PC == a.PC {
				k++
			}
			maxd, innerOK := 0, false
			for x := j; x <= k; x++ {
				maxd = max(maxd, res.Accesses[x].Depth)
				if res.Accesses[x].Depth > a.Depth && conf[x] {
					innerOK = true
				}
			}
			hostAddr, hostAny := false, false
			if fi, ok := b.FuncAt(a.PC); ok {
				for _, r := range inHost[hm{fi.Entry, a.Struct, a.Member}] {
					hostAny = hostAny || fits(r.Mode, a.Kind)
					hostAddr = hostAddr || r.Mode == debugklasy.Addr
				}
			}
			strict := strictAll[i]
			ins := ""
			if is := b.Insns(a.PC, a.PC+15); len(is) > 0 {
				ins = x86asm.GNUSyntax(is[0].Inst, is[0].PC, nil)
			}
			fmt.Fprintf(tw, "%#x\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%v\t%v\t%v\t%v\t%v\t%d\t%v\t%s\t%v\t%d\t%d\n", a.PC, a.Func, a.Struct, a.Member, a.Kind, a.Depth, maxd, a.Why, conf[i], strict, innerOK, hostAddr, hostAny, len(a.Calls), a.Bitfield, ins, a.BitTest, a.BitOffset, a.ContainerOff)
		}
		tw.Flush()
		tf.Close()
	}
	n := 0
	okAll, _ := confirmAll(res.Accesses)
	for i := range res.Accesses {
		a := &res.Accesses[i]
		mark := "=="
		if okAll[i] {
			// ACCESSINFER_DIAG_CONF=S.M: the confirmed accesses of that
			// member too, marked ++, to compare with the others.
			if os.Getenv("ACCESSINFER_DIAG_CONF") != a.Struct+"."+a.Member {
				continue
			}
			mark = "++"
		} else {
			n++
		}
		fmt.Fprintf(w, "%s %#x %s.%s %s depth %d (%s) in %s\n", mark, a.PC, a.Struct, a.Member, a.Kind, a.Depth, a.Why, a.Func)
		fmt.Fprintf(w, "   rows: %s\n", fl(c.linesOf(a, true)))
		fmt.Fprintf(w, "   block: %s\n", fl(c.linesOf(a, false)))
		var calls []string
		for _, cs := range a.Calls {
			calls = append(calls, fmt.Sprintf("%s@%s:%d", cs.Func, shortPath(cs.File), cs.Line))
		}
		fmt.Fprintf(w, "   calls: %s\n", strings.Join(calls, " "))
		fns := map[string]bool{a.Func: true}
		for _, cs := range a.Calls {
			fns[cs.Func] = true
		}
		var same []string
		for _, r := range byMember[sm{a.Struct, a.Member}] {
			if fns[r.Function.Name] {
				same = append(same, fmt.Sprintf("%s:%d(%s,%s %q)", shortPath(r.File), r.Line, r.Mode, r.Function.Name, r.Base.Expr))
			}
		}
		sort.Strings(same)
		if len(same) > 12 {
			same = append(same[:12], "...")
		}
		fmt.Fprintf(w, "   same member in these functions: %s\n", strings.Join(same, " "))
		same = same[:0]
		if fi, ok := b.FuncAt(a.PC); ok {
			for _, r := range inHost[hm{fi.Entry, a.Struct, a.Member}] {
				if fits(r.Mode, a.Kind) {
					same = append(same, fmt.Sprintf("%s:%d(%s,%s %q)", shortPath(r.File), r.Line, r.Mode, r.Function.Name, r.Base.Expr))
				}
			}
		}
		sort.Strings(same)
		if len(same) > 12 {
			same = append(same[:12], "...")
		}
		fmt.Fprintf(w, "   same member fitting in host: %s\n", strings.Join(same, " "))
		var at []string
		seen := map[string]bool{}
		for _, l := range c.linesOf(a, false) {
			for _, r := range byLine[l] {
				s := fmt.Sprintf("%s.%s(%s %q)@%d", r.Struct, r.Member, r.Mode, r.Base.Expr, r.Line)
				if !seen[s] {
					seen[s] = true
					at = append(at, s)
				}
			}
		}
		if len(at) > 16 {
			at = append(at[:16], "...")
		}
		fmt.Fprintf(w, "   plugin at its lines: %s\n", strings.Join(at, " "))
	}
	t.Logf("%d unconfirmed of %d", n, len(res.Accesses))
	// ACCESSINFER_MISSED=FILE: the plugin's records that have an
	// instruction but no inferred access, with what inference says of
	// that instruction.
	if mf := os.Getenv("ACCESSINFER_MISSED"); mf != "" {
		byPC := map[uint64][]*accessinfer.Access{}
		found := map[recKey]uint8{}
		for i := range res.Accesses {
			a := &res.Accesses[i]
			byPC[a.PC] = append(byPC[a.PC], a)
			for _, l := range c.linesOf(a, false) {
				found[recKey{uint32(l[0]), l[1], a.Struct, a.Member}] |= 1 << a.Kind
			}
		}
		f, err := os.Create(mf)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		w := bufio.NewWriter(f)
		defer w.Flush()
		for i := range tab.Accesses {
			r := &tab.Accesses[i]
			if r.NoOffset {
				continue
			}
			pc, ok := c.reachableAt(r)
			if !ok {
				continue
			}
			hit := false
			for _, id := range b.Files(r.File) {
				for _, l := range []int{r.Line, r.StmtLine} {
					kinds := found[recKey{id, l, r.Struct, r.Member}]
					for k := x86code.Load; k <= x86code.Addr; k++ {
						if l != 0 && kinds&(1<<k) != 0 && fits(r.Mode, k) {
							hit = true
						}
					}
				}
			}
			if hit {
				continue
			}
			ins := ""
			if is := b.Insns(pc, pc+15); len(is) > 0 {
				ins = x86asm.GNUSyntax(is[0].Inst, is[0].PC, nil)
			}
			var there []string
			for _, a := range byPC[pc] {
				there = append(there, fmt.Sprintf("%s.%s/%s(%s)", a.Struct, a.Member, a.Kind, a.Why))
			}
			fmt.Fprintf(w, "%s\t%s\t%v\t%s\t%s\t%s:%d\t%#x\t%s\t%s\t%s\n", r.Struct, r.Member, r.Bitfield, r.Mode, r.Base.Kind, shortPath(r.File), r.Line, pc, ins, strings.Join(there, " "), r.Base.Expr)
		}
	}
}

func shortPath(p string) string {
	if i := strings.LastIndex(p, "/linux-"); i >= 0 {
		if j := strings.Index(p[i+1:], "/"); j >= 0 {
			return p[i+1+j+1:]
		}
	}
	return p
}
