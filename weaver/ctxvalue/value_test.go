package ctxvalue

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/go-delve/delve/pkg/dwarf/op"

	"github.com/klasy/klasy/dwarfmap"
	"github.com/klasy/klasy/dwarfmap/loc"
)

// reg, breg, fbreg... build DWARF expressions for the table below.
func uleb(v uint64) []byte {
	var b []byte
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v != 0 {
			b = append(b, c|0x80)
			continue
		}
		return append(b, c)
	}
}

func sleb(v int64) []byte {
	var b []byte
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v == 0 && c&0x40 == 0 || v == -1 && c&0x40 != 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

func cat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

func opb(o op.Opcode) []byte { return []byte{byte(o)} }

// TestCompileLocation compiles the locations gcc gives variables in an
// optimized kernel into Values, and refuses the ones that cannot be read.
func TestCompileLocation(t *testing.T) {
	cfa := dwarfmap.VarLoc{HasCFA: true, CFAReg: 7, CFAOffset: 8, FrameBase: opb(op.DW_OP_call_frame_cfa), Size: 8}
	with := func(expr []byte, size int64) dwarfmap.VarLoc {
		v := cfa
		v.Expr, v.Size = expr, size
		return v
	}
	tests := []struct {
		name    string
		vl      dwarfmap.VarLoc
		atEntry bool
		want    string // Value.String(), or the error's text
		wantErr bool
	}{
		{"register", with(opb(op.DW_OP_reg5), 8), false, "di:8", false},
		{"register, 4 bytes", with(opb(op.DW_OP_reg0), 4), false, "ax:4", false},
		{"regx", with(cat(opb(op.DW_OP_regx), uleb(14)), 8), false, "r14:8", false},
		{"stack slot by frame base", with(cat(opb(op.DW_OP_fbreg), sleb(-40)), 8), false, "[sp +8 -40]8", false},
		{"memory off a register", with(cat(opb(op.DW_OP_breg3), sleb(16)), 4), false, "[bx +16]4", false},
		{"computed value", with(cat(opb(op.DW_OP_breg5), sleb(104), opb(op.DW_OP_deref), opb(op.DW_OP_const4u), []byte{0xff, 0xff, 0xff, 0xff}, opb(op.DW_OP_and), opb(op.DW_OP_stack_value)), 8), false, "di +104 deref8 4294967295 &:8", false},
		{"constant", dwarfmap.VarLoc{HasConst: true, Const: -9, Size: 8}, false, "-9:8", false},
		{"literal value", with(cat(opb(op.DW_OP_lit3), opb(op.DW_OP_stack_value)), 4), false, "3:4", false},
		{"entry value at the entry", with(cat(opb(loc.DW_OP_entry_value), uleb(1), opb(op.DW_OP_reg4), opb(op.DW_OP_stack_value)), 8), true, "si:8", false},
		{"entry value later", with(cat(opb(loc.DW_OP_entry_value), uleb(1), opb(op.DW_OP_reg4), opb(op.DW_OP_stack_value)), 8), false, "DW_OP_entry_value", true},
		{"one whole piece", with(cat(opb(op.DW_OP_breg7), sleb(8), opb(op.DW_OP_piece), uleb(8)), 8), false, "[sp +8]8", false},
		{"pieces", with(cat(opb(op.DW_OP_reg0), opb(op.DW_OP_piece), uleb(4), opb(op.DW_OP_reg1), opb(op.DW_OP_piece), uleb(4)), 8), false, "split", true},
		{"optimized out", with(nil, 8), false, "optimized out", true},
		{"too large", with(opb(op.DW_OP_reg0), 16), false, "more than a register", true},
		{"no CFA rule", dwarfmap.VarLoc{Expr: cat(opb(op.DW_OP_fbreg), sleb(-8)), FrameBase: opb(op.DW_OP_call_frame_cfa), Size: 8}, false, "no CFA rule", true},
		{"unsaved register", with(opb(op.DW_OP_reg17), 8), false, "does not save", true},
		{"implicit pointer", with(cat(opb(loc.DW_OP_implicit_pointer), []byte{1, 2, 3, 4}, sleb(0)), 8), false, "optimized away", true},
		{"unbalanced", with(opb(op.DW_OP_plus), 8), false, "malformed", true},
		{"truncated operand", with(opb(op.DW_OP_breg3), 8), false, "malformed", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := CompileLocation(LocContext{VL: tt.vl, AtEntry: tt.atEntry})
			if tt.wantErr {
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("got %v, %v; want an error containing %q", v, err, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := v.String(); got != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
}

// TestValueC compiles the C that Values become against a pt_regs
// stand-in and runs it: each Value must read what its program says,
// and a faulting read must take the failure path.
func TestValueC(t *testing.T) {
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("no gcc")
	}
	values := []struct {
		name string
		v    Value
		want string
	}{
		{"reg", Value{Ops: []ValueOp{{Kind: PushReg, Reg: 5}}, Size: 8}, "4096"},
		{"stack", Value{Ops: []ValueOp{{Kind: PushReg, Reg: 7}, {Kind: AddConst, Arg: 8}}, Size: 8, InMemory: true}, "77"},
		{"narrow", Value{Ops: []ValueOp{{Kind: PushReg, Reg: 7}, {Kind: AddConst, Arg: 16}}, Size: 2, InMemory: true}, "65535"},
		{"deref and mask", Value{Ops: []ValueOp{{Kind: PushReg, Reg: 7}, {Kind: Deref, Size: 8}, {Kind: PushConst, Arg: 0xff}, {Kind: And}}, Size: 8}, "17"},
		{"arith", Value{Ops: []ValueOp{{Kind: PushConst, Arg: 7}, {Kind: PushConst, Arg: 3}, {Kind: Sub}, {Kind: PushConst, Arg: -8}, {Kind: PushConst, Arg: 1}, {Kind: Shra}, {Kind: Mul}}, Size: 8}, "-16"},
		{"fault", Value{Ops: []ValueOp{{Kind: PushConst, Arg: 0}}, Size: 8, InMemory: true}, "fail"},
	}
	var b strings.Builder
	b.WriteString(`#include <stdio.h>
#include <stdint.h>
#include <string.h>
typedef uint64_t u64;
typedef int64_t s64;
struct pt_regs { u64 ax, dx, cx, bx, si, di, bp, sp, r8, r9, r10, r11, r12, r13, r14, r15, ip; };
/* Stands in for the kernel's: a read of address 0 faults. */
static int copy_from_kernel_nofault(void *dst, const void *src, size_t n)
{
	if (!src)
		return -14;
	memcpy(dst, src, n);
	return 0;
}
`)
	for i, tt := range values {
		b.WriteString("static void v" + strconv.Itoa(i) + "(struct pt_regs *regs)\n{\n\tu64 out;\n")
		if err := tt.v.C(&b, "\t", "out", "regs", "s", "fail"); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		b.WriteString("\tprintf(\"%lld\\n\", (long long)out);\n\treturn;\nfail:\n\tprintf(\"fail\\n\");\n}\n")
	}
	b.WriteString("int main(void)\n{\n\tu64 stack[4] = { 0x1234567811, 77, 0xffffffffffffffffULL, 0 };\n\tstruct pt_regs r = { .di = 4096, .sp = (u64)(uintptr_t)stack };\n")
	for i := range values {
		b.WriteString("\tv" + strconv.Itoa(i) + "(&r);\n")
	}
	b.WriteString("\treturn 0;\n}\n")
	dir := t.TempDir()
	src := filepath.Join(dir, "v.c")
	os.WriteFile(src, []byte(b.String()), 0o644)
	if out, err := exec.Command("gcc", "-Wall", "-Werror", "-Wno-unused-label", "-o", filepath.Join(dir, "v"), src).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s\n%s", err, out, b.String())
	}
	out, err := exec.Command(filepath.Join(dir, "v")).Output()
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSpace(string(out)), "\n")
	for i, tt := range values {
		if i >= len(got) || got[i] != tt.want {
			t.Errorf("%s (%s): got %q, want %s", tt.name, tt.v.String(), got, tt.want)
		}
	}
}

// TestModuleStatic: a module's static (DW_OP_addr of its .ko) is where
// the module was loaded, so it has no C until relocated; relocated, it
// is the running address, and the value it came from is unchanged.
func TestModuleStatic(t *testing.T) {
	addr := cat(opb(op.DW_OP_addr), []byte{0, 0x20, 1, 0, 0, 0, 0, 0}) // 0x12000
	v, err := CompileLocation(LocContext{VL: dwarfmap.VarLoc{Expr: cat(addr, opb(op.DW_OP_stack_value)), Size: 8}, Module: "klasy_stat"})
	if err != nil {
		t.Fatal(err)
	}
	if got := v.String(); got != "klasy_stat:0x12000:8" {
		t.Errorf("the static's value: %s", got)
	}
	var b strings.Builder
	if err := v.C(&b, "\t", "out", "regs", "s", "fail"); err == nil || !strings.Contains(err.Error(), "not relocated") {
		t.Errorf("C before relocation: %v", err)
	}
	r, err := v.Relocate(func(module string, a uint64) (uint64, error) {
		if module != "klasy_stat" || a != 0x12000 {
			t.Errorf("relocating %s:%#x", module, a)
		}
		return 0xffffffffc0204010, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	b.Reset()
	if err := r.C(&b, "\t", "out", "regs", "s", "fail"); err != nil || !strings.Contains(b.String(), "s0 = (u64)0xffffffffc0204010ULL;") {
		t.Errorf("C after relocation: %v\n%s", err, b.String())
	}
	if v.String() != "klasy_stat:0x12000:8" || len(v.ModuleAddrs()) != 1 || len(r.ModuleAddrs()) != 0 {
		t.Errorf("relocating changed the value: %s, relocated %s", v, r)
	}
	// The kernel's own static is its image address plus the slide.
	k, err := CompileLocation(LocContext{VL: dwarfmap.VarLoc{Expr: cat(addr, opb(op.DW_OP_stack_value)), Size: 8}})
	if err != nil || k.String() != "0x12000+slide:8" {
		t.Errorf("a kernel static: %v, %v", k, err)
	}
}
