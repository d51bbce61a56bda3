package dwarfmap

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/klasy/klasy/internal/testenv"
	"github.com/klasy/klasy/pattern"
)

// compileWeak links testdata/weak.c with strong.c, whose arch_idle
// overrides weak.c's __weak one: as is (the weak copy stays in .text
// without a symbol) or with gc set, with -ffunction-sections and
// --gc-sections (its section is discarded, and unused_fn's).
func compileWeak(t *testing.T, gc bool) string {
	t.Helper()
	needTools(t)
	out := filepath.Join(t.TempDir(), "weak")
	args := []string{"-O2", "-g", "-gdwarf-5", "-fno-asynchronous-unwind-tables", "-nostdlib",
		"-Wl,--build-id", "-Wl,-e,main", "-o", out, "testdata/weak.c", "testdata/strong.c"}
	if gc {
		args = append(args, "-ffunction-sections", "-Wl,--gc-sections")
	}
	testenv.GCC(t, args...)
	return out
}

// Code that never runs (a __weak definition overridden by a strong one,
// code of a discarded section) is offered by no query: not as a
// function, nor at its addresses, nor as lines, nor as inlined copies.
// Discarded lists it. What is dead is checked against the symbol table:
// a function is dead when no symbol starts at its entry.
func TestDiscardedCode(t *testing.T) {
	for _, gc := range []bool{false, true} {
		t.Run(fmt.Sprintf("gc=%v", gc), func(t *testing.T) {
			img := compileWeak(t, gc)
			syms := readelfFuncs(t, img)
			starts := map[uint64]bool{}
			for _, r := range syms {
				starts[r[0]] = true
			}
			dir := t.TempDir()
			built, _, _ := loadInto(t, img, dir)
			defer built.Close()
			cached, info, _ := loadInto(t, img, dir)
			defer cached.Close()
			if !info.FromCache {
				t.Fatal("second load did not use the cache")
			}
			for name, x := range map[string]*Index{"built": built, "cached": cached} {
				checkDiscarded(t, name, x, syms, starts, gc)
			}
		})
	}
}

func checkDiscarded(t *testing.T, name string, x *Index, syms map[string][2]uint64, starts map[uint64]bool, gc bool) {
	t.Helper()
	dead := x.Discarded()
	var deadNames []string
	for _, f := range dead {
		deadNames = append(deadNames, f.Name)
		if !f.Discarded || starts[f.Entry] {
			t.Errorf("%s: discarded %s at %#x: Discarded=%v, a symbol starts there: %v", name, f.Name, f.Entry, f.Discarded, starts[f.Entry])
		}
	}
	wantDead := []string{"arch_idle"}
	if gc {
		wantDead = append(wantDead, "unused_fn")
	}
	slices.Sort(deadNames)
	if !slices.Equal(deadNames, wantDead) {
		t.Fatalf("%s: Discarded() = %q, want %q", name, deadNames, wantDead)
	}
	for _, f := range x.AllFuncs() {
		if f.Discarded || !starts[f.Entry] {
			t.Errorf("%s: AllFuncs offers %s at %#x, where no symbol starts", name, f.Name, f.Entry)
		}
	}
	strong := syms["arch_idle"]
	if fs := x.Funcs("arch_idle"); len(fs) != 1 || fs[0].Entry != strong[0] || filepath.Base(fs[0].File) != "strong.c" {
		t.Errorf("%s: Funcs(arch_idle) = %+v, want strong.c's alone at %#x", name, fs, strong[0])
	}
	if fs := x.MatchFuncs(pattern.MustCompile("%_%", pattern.CommandLine)); len(fs) != 1+btoi(!gc) || fs[0].Entry != strong[0] {
		t.Errorf("%s: MatchFuncs(%%_%%) = %+v, want strong.c's arch_idle (and unused_fn unless gc)", name, fs)
	}
	if a, err := x.ParseAddr("arch_idle+1"); err != nil || a != strong[0]+1 {
		t.Errorf("%s: ParseAddr(arch_idle+1) = %#x, %v; want %#x", name, a, err, strong[0]+1)
	}
	for _, f := range dead {
		for _, r := range f.Ranges {
			for a := r[0]; a < r[1]; a++ {
				if g, ok := x.FuncAt(a); ok {
					t.Fatalf("%s: FuncAt(%#x), in discarded %s, = %s", name, a, f.Name, g.Name)
				}
			}
		}
		if _, err := x.VarsAt(f.Entry); err == nil {
			t.Errorf("%s: VarsAt(%#x), the entry of discarded %s: no error", name, f.Entry, f.Name)
		}
	}
	inDead := func(a uint64) bool {
		return slices.ContainsFunc(dead, func(f FuncInfo) bool {
			return slices.ContainsFunc(f.Ranges, func(r [2]uint64) bool { return a >= r[0] && a < r[1] })
		})
	}
	for _, sp := range []LineSpec{{File: "weak.c"}, {Func: "arch_idle", Inlined: true}, {Func: "main", Inlined: true}} {
		ls, err := x.Lines(sp)
		if err != nil {
			t.Errorf("%s: Lines(%+v): %v", name, sp, err)
		}
		for _, l := range ls {
			if slices.ContainsFunc(l.Addrs, inDead) || l.Function == "arch_idle" && filepath.Base(l.File) == "weak.c" {
				t.Errorf("%s: Lines(%+v) offers discarded code: %+v", name, sp, l)
			}
		}
	}
	if ls, err := x.Lines(LineSpec{File: "weak.c", Line: markerIn(t, "weak.c", "weak_body")}); err == nil {
		t.Errorf("%s: the weak body's line, whose only code is discarded, has lines %+v", name, ls)
	}
	for _, in := range x.Inlines("twice") {
		if in.Caller == "arch_idle" || slices.ContainsFunc(in.Ranges, func(r [2]uint64) bool { return inDead(r[0]) }) {
			t.Errorf("%s: Inlines(twice) offers a copy in discarded code: %+v", name, in)
		}
	}
	if gc && len(x.Inlines("twice")) != 0 {
		t.Errorf("%s: twice is inlined in discarded code only, yet Inlines lists %+v", name, x.Inlines("twice"))
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
