package inlexit

import (
	"debug/dwarf"
	"debug/elf"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/klasy/klasy/x86code"
)

// copyInfo is one inlined copy in the test program, from its DWARF.
type copyInfo struct {
	name, host string
	ranges     [][2]uint64
	entry      uint64
}

// build compiles testdata/copies.c at test time, as the kernel's code
// is compiled: -O2, no PIE, no CET.
func build(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("no gcc")
	}
	out := filepath.Join(t.TempDir(), "copies")
	cmd := exec.Command("gcc", "-O2", "-g", "-fno-pie", "-no-pie", "-fcf-protection=none", "-fno-stack-protector", "-o", out, "testdata/copies.c")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, b)
	}
	return out
}

// copies reads the inlined copies of the program's DWARF.
func copies(t *testing.T, f *elf.File) []copyInfo {
	d, err := f.DWARF()
	if err != nil {
		t.Fatal(err)
	}
	names := map[dwarf.Offset]string{}
	var out []copyInfo
	var inls []*dwarf.Entry
	hostOf := map[*dwarf.Entry]string{}
	r := d.Reader()
	host := ""
	for {
		e, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		if e == nil {
			break
		}
		switch e.Tag {
		case dwarf.TagSubprogram:
			if n, ok := e.Val(dwarf.AttrName).(string); ok {
				names[e.Offset] = n
				if e.Val(dwarf.AttrLowpc) != nil {
					host = n
				}
			}
		case dwarf.TagInlinedSubroutine:
			inls = append(inls, e)
			hostOf[e] = host
		}
	}
	for _, e := range inls {
		origin, _ := e.Val(dwarf.AttrAbstractOrigin).(dwarf.Offset)
		rs, err := d.Ranges(e)
		if err != nil || len(rs) == 0 {
			continue
		}
		c := copyInfo{name: names[origin], host: hostOf[e], entry: rs[0][0]}
		for _, r := range rs {
			c.ranges = append(c.ranges, [2]uint64{r[0], r[1]})
		}
		switch pc := e.Val(dwarf.AttrEntrypc).(type) {
		case uint64:
			c.entry = pc
		case int64:
			if low, ok := e.Val(dwarf.AttrLowpc).(uint64); ok {
				c.entry = low + uint64(pc)
			} else {
				c.entry = rs[0][0] + uint64(pc)
			}
		}
		out = append(out, c)
	}
	return out
}

// objdumpInsn is one instruction as objdump prints it.
type objdumpInsn struct {
	addr, next uint64
	op         string
	target     uint64 // a direct jump's, 0 otherwise
}

var objdumpLine = regexp.MustCompile(`^\s*([0-9a-f]+):\s+(\S+)\s*([0-9a-f]+)?`)

// objdump disassembles the function sym with objdump.
func objdump(t *testing.T, prog string, sym elf.Symbol) []objdumpInsn {
	out, err := exec.Command("objdump", "-d", "--no-show-raw-insn", "--start-address=0x"+strconv.FormatUint(sym.Value, 16),
		"--stop-address=0x"+strconv.FormatUint(sym.Value+sym.Size, 16), prog).Output()
	if err != nil {
		t.Skipf("objdump: %v", err)
	}
	var ins []objdumpInsn
	for _, l := range strings.Split(string(out), "\n") {
		m := objdumpLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		a, _ := strconv.ParseUint(m[1], 16, 64)
		in := objdumpInsn{addr: a, op: m[2]}
		if strings.HasPrefix(in.op, "j") && m[3] != "" {
			in.target, _ = strconv.ParseUint(m[3], 16, 64)
		}
		if n := len(ins); n > 0 {
			ins[n-1].next = a
		}
		ins = append(ins, in)
	}
	if n := len(ins); n > 0 {
		ins[n-1].next = sym.Value + sym.Size
	}
	return ins
}

// objdumpExits are the exits of a copy as objdump's listing shows them:
// the targets of its jumps outside its ranges, and the instruction
// after one of its instructions that goes on to the next, outside them;
// but not the caller's instructions that run straight back into the
// copy and that nothing else jumps or falls to.
func objdumpExits(ins []objdumpInsn, ranges [][2]uint64) []uint64 {
	in := func(a uint64) bool {
		return slices.ContainsFunc(ranges, func(r [2]uint64) bool { return a >= r[0] && a < r[1] })
	}
	falls := func(i objdumpInsn) bool { return i.op != "jmp" && i.op != "ret" }
	preds := map[uint64][]uint64{}
	for _, i := range ins {
		if i.target != 0 {
			preds[i.target] = append(preds[i.target], i.addr)
		}
		if falls(i) {
			preds[i.next] = append(preds[i.next], i.addr)
		}
	}
	at := map[uint64]objdumpInsn{}
	for _, i := range ins {
		at[i.addr] = i
	}
	back := func(t, from uint64) bool {
		for prev := from; !in(t); {
			i, ok := at[t]
			if !ok || strings.HasPrefix(i.op, "j") || i.op == "ret" || !slices.Equal(preds[t], []uint64{prev}) {
				return false
			}
			t, prev = i.next, t
		}
		return true
	}
	var out []uint64
	for _, i := range ins {
		if !in(i.addr) {
			continue
		}
		if i.target != 0 && !in(i.target) && !back(i.target, i.addr) {
			out = append(out, i.target)
		}
		if falls(i) && !in(i.next) && !back(i.next, i.addr) {
			out = append(out, i.next)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// TestFindAgainstObjdump finds the exits of the test program's inlined
// copies (early returns from a loop, goto with the caller's code
// scheduled inside the copy's, a copy ending in a call, two ways out)
// and checks them against objdump's listing; the copies left by a tail call
// or a return are refused with that reason.
func TestFindAgainstObjdump(t *testing.T) {
	prog := build(t)
	f, err := elf.Open(prog)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	text := f.Section(".text")
	code, err := text.Data()
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]string{} // host → "ok" or the refusal
	for _, c := range copies(t, f) {
		i := slices.IndexFunc(syms, func(s elf.Symbol) bool { return s.Name == c.host && elf.ST_TYPE(s.Info) == elf.STT_FUNC })
		if i < 0 || !strings.HasPrefix(c.host, "host_") {
			continue
		}
		sym := syms[i]
		body := code[sym.Value-text.Addr : sym.Value-text.Addr+sym.Size]
		g := x86code.FuncGraph(sym.Value, []x86code.Range{{Addr: sym.Value, Code: body}}, nil)
		insns := func(lo, hi uint64) []x86code.Insn {
			return x86code.Decode(body[lo-sym.Value:hi-sym.Value], lo)
		}
		exits, err := Find(g, insns, c.ranges, c.entry)
		if err != nil {
			found[c.host] = err.Error()
			t.Logf("%s in %s %x entry %#x: refused: %v", c.name, c.host, c.ranges, c.entry, err)
			continue
		}
		found[c.host] = "ok"
		var got []uint64
		for _, e := range exits {
			got = append(got, e.Addr)
		}
		ins := objdump(t, prog, sym)
		want := objdumpExits(ins, c.ranges)
		t.Logf("%s in %s %x entry %#x: exits %x, objdump %x", c.name, c.host, c.ranges, c.entry, got, want)
		if !slices.Equal(got, want) {
			t.Errorf("%s in %s: exits %x; objdump shows %x", c.name, c.host, got, want)
		}
		for _, a := range got {
			if !slices.ContainsFunc(ins, func(i objdumpInsn) bool { return i.addr == a }) {
				t.Errorf("%s in %s: exit %#x is no instruction objdump shows", c.name, c.host, a)
			}
		}
	}
	for host, want := range map[string]string{
		"host_early": "ok", "host_call": "ok", "host_loop": "ok", "host_two": "ok", "host_goto": "ok",
		"host_tail": "a jump out of its function", "host_ret": "a return",
	} {
		if got := found[host]; !strings.Contains(got, want) {
			t.Errorf("the copy in %s: %q; want %q", host, got, want)
		}
	}
}
