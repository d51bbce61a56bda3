// Package weavertest holds what the weaver's packages test with: the
// kernel images they resolve against, the aspects whose join points and
// modules are kept as golden files, and the golden format of join points.
package weavertest

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/klasy/klasy/aspect"
	"github.com/klasy/klasy/dwarfmap"
	"github.com/klasy/klasy/internal/testenv"
	"github.com/klasy/klasy/lab"
	"github.com/klasy/klasy/weaver/joinpoint"
)

// GoldenAspects are resolved against Debian's vmlinux and generated, by
// the tests of weaver/resolve and weaver/gen (paths from those folders).
var GoldenAspects = []string{"../testdata/pread.klasy", "../testdata/mshow.klasy", "../testdata/openat.klasy", "../../examples/setattr_exec.klasy", "../testdata/agg.klasy", "../../examples/read_latency.klasy",
	"../testdata/lseek.klasy", "../testdata/nullify.klasy", "../../examples/delayed_ack.klasy", "../testdata/line.klasy", "../testdata/block.klasy"}

// DebianIndex indexes Debian's debug vmlinux, or skips (fails under
// KLASY_TEST_REQUIRE) without it.
func DebianIndex(t testing.TB) *dwarfmap.Index {
	t.Helper()
	p := testenv.DebianVmlinux(t)
	testenv.Need(t, "debian-kernel", nil)
	return load(t, p)
}

// BuiltIndex indexes the built lab kernel (with .debug_klasy), or skips
// (fails under KLASY_TEST_REQUIRE) without it.
func BuiltIndex(t testing.TB) *dwarfmap.Index {
	t.Helper()
	k, err := lab.FindKernel(lab.Built)
	testenv.Need(t, "lab-kernel", err)
	return load(t, k.Vmlinux)
}

func load(t testing.TB, path string) *dwarfmap.Index {
	t.Helper()
	x, _, err := dwarfmap.Load(path, dwarfmap.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Close() })
	return x
}

// LoadAspect loads and checks the aspect at path.
func LoadAspect(t testing.TB, path string) *aspect.File {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, diags := aspect.Load(path, src)
	if len(diags) > 0 {
		t.Fatal(diags)
	}
	return f
}

// FormatJoinPoints prints join points one per line, as the golden tables
// keep them: advice timing kind address function [in caller] file:line,
// the basic block a block(...) hook counts when it is not at its start,
// then each argument's program, or why the join point is skipped.
func FormatJoinPoints(jps []*joinpoint.JoinPoint) string {
	var b strings.Builder
	for _, jp := range jps {
		fmt.Fprintf(&b, "%d %s %s %#x %s", jp.Advice, jp.Timing, jp.Kind, jp.Addr, jp.Function)
		if jp.InlinedIn != "" {
			fmt.Fprintf(&b, " in %s", jp.InlinedIn)
		}
		fmt.Fprintf(&b, " %s:%d", jp.File, jp.Line)
		if jp.Block != 0 && jp.Block != jp.Addr {
			fmt.Fprintf(&b, " block=%#x", jp.Block)
		}
		for _, a := range jp.Args {
			fmt.Fprintf(&b, " %s=%s", a.Param, a.Value)
			if a.AtEntry {
				b.WriteString("@entry")
			}
		}
		if jp.Skipped != "" {
			fmt.Fprintf(&b, " SKIPPED: %s", jp.Skipped)
		}
		b.WriteByte('\n')
	}
	return b.String()
}
