package gen

import (
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	"github.com/go-delve/delve/pkg/dwarf/op"

	"github.com/klasy/klasy/aspect"
	"github.com/klasy/klasy/dwarfmap"
	"github.com/klasy/klasy/weaver/ctxvalue"
	"github.com/klasy/klasy/weaver/joinpoint"
)

// TestModuleAddressesChecked: a hook in a module and a static of it that
// target() reads (GCC made &static a constant) are written at their
// running addresses, and each is listed with the symbol+offset kallsyms
// must show there, which the runtime compares before registering; a
// static that cannot be relocated is an error, not a guess.
func TestModuleAddressesChecked(t *testing.T) {
	f, diags := aspect.Load("stat.klasy", []byte(`<aspect>
  <advice>
    <pointcut>access(klasy_stat.value) AND target(s)</pointcut>
    <before>STORE_DATA(((long *)s)[1]);</before>
  </advice>
</aspect>
`))
	if len(diags) > 0 {
		t.Fatal(diags)
	}
	// The static at 0x12000 of the .ko, as the resolver compiles its
	// location DW_OP_addr 0x12000, DW_OP_stack_value.
	vl, err := ctxvalue.CompileLocation(ctxvalue.LocContext{VL: dwarfVarAddr(0x12000), Module: "klasy_stat"})
	if err != nil {
		t.Fatal(err)
	}
	jp := &joinpoint.JoinPoint{Advice: 1, Kind: joinpoint.Kprobe, Addr: 0x10027, Module: "klasy_stat", Function: "stat_bump", File: "klasy_stat.c", Line: 25,
		Args: []joinpoint.Arg{{Param: "s", Var: "target", ByValue: true, Value: vl}}}
	loaded := map[uint64]ModuleLoc{
		0x10027: {Addr: 0xffffffffc0200027, Symbol: "stat_bump.constprop.0", Offset: 7},
		0x12000: {Addr: 0xffffffffc0204000, Symbol: "stat_counter", Offset: 0},
	}
	m, err := Generate(f, []*joinpoint.JoinPoint{jp}, GenOptions{Path: "stat.klasy", ModuleAddr: func(mod string, a uint64) (ModuleLoc, error) {
		if l, ok := loaded[a]; ok && mod == "klasy_stat" {
			return l, nil
		}
		return ModuleLoc{}, fmt.Errorf("%s:%#x not loaded", mod, a)
	}})
	if err != nil {
		t.Fatal(err)
	}
	c := string(m.Files[m.Name+".c"])
	for _, want := range []string{
		"s0 = (u64)0xffffffffc0204000ULL;",
		`{ .addr = 0xffffffffc0200027UL, .module = "klasy_stat", .symbol = "stat_bump.constprop.0", .offset = 0x7UL, .hook = 0, },`,
		`{ .addr = 0xffffffffc0204000UL, .module = "klasy_stat", .symbol = "stat_counter", .offset = 0x0UL, .hook = 0, .is_static = true, },`,
		".checks = klasy_checks,",
	} {
		if !strings.Contains(c, want) {
			t.Errorf("the advice module lacks %q:\n%s", want, c)
		}
	}
	delete(loaded, 0x12000)
	_, err = Generate(f, []*joinpoint.JoinPoint{jp}, GenOptions{Path: "stat.klasy", ModuleAddr: func(mod string, a uint64) (ModuleLoc, error) {
		if l, ok := loaded[a]; ok {
			return l, nil
		}
		return ModuleLoc{}, fmt.Errorf("%s:%#x not loaded", mod, a)
	}})
	if err == nil || !strings.Contains(err.Error(), "klasy_stat:0x12000 not loaded") {
		t.Errorf("a static not relocated: %v", err)
	}
}

// dwarfVarAddr is a pointer variable whose value is the constant addr:
// DW_OP_addr addr, DW_OP_stack_value.
func dwarfVarAddr(addr uint64) dwarfmap.VarLoc {
	e := []byte{byte(op.DW_OP_addr)}
	e = binary.LittleEndian.AppendUint64(e, addr)
	return dwarfmap.VarLoc{Expr: append(e, byte(op.DW_OP_stack_value)), Size: 8}
}
