package coverview

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/klasy/klasy/internal/golden"
	"github.com/klasy/klasy/weaver/cover"
	"github.com/klasy/klasy/x86code"
)

// walkCover is walk() of testdata/cover/walk.c as klasy cover would see
// it after three calls (one of them returning early): its blocks, their
// lines and counts, one block without a hook (its count derived).
func walkCover() *cover.FuncCoverage {
	type blk struct {
		start uint64
		succs []uint64
		exit  bool
		lines []int
		count uint64
	}
	blocks := []blk{
		{0x10, []uint64{0x20}, false, []int{5, 6}, 3},
		{0x20, []uint64{0x30, 0x40}, false, []int{8}, 7},
		{0x30, []uint64{0x20}, false, []int{9}, 4},
		{0x40, []uint64{0x50, 0x80}, false, []int{10}, 12},
		{0x50, []uint64{0x60, 0x70}, false, []int{11}, 10},
		{0x60, nil, true, []int{12}, 1},
		{0x70, []uint64{0x40}, false, []int{13, 10}, 9},
		{0x80, nil, true, []int{15, 16}, 2},
	}
	const base = 0xffffffff81000000
	g := &x86code.Graph{Entry: base + 0x10}
	counts := map[uint64]uint64{}
	lines := map[uint64][]cover.SourceLine{}
	for _, b := range blocks {
		gb := x86code.GraphBlock{Start: base + b.start, End: base + b.start + 0x10, Exit: b.exit}
		for _, s := range b.succs {
			gb.Succs = append(gb.Succs, base+s)
		}
		g.Blocks = append(g.Blocks, gb)
		if b.start != 0x60 {
			counts[gb.Start] = b.count
		}
		for _, l := range b.lines {
			lines[gb.Start] = append(lines[gb.Start], cover.SourceLine{File: "walk.c", Line: l})
		}
	}
	skipped := map[uint64]string{base + 0x60: "refused: 0xffffffff81000060 is a ud2 trap (a BUG() or WARN() site): the kernel refuses kprobes there"}
	fc := cover.Cover(g, counts, skipped, func(lo, hi uint64) []cover.SourceLine { return lines[lo] })
	return &cover.FuncCoverage{Function: "walk", File: "walk.c", Line: 4, Entry: base + 0x10, FuncCover: fc}
}

// TestCoverPrintGolden keeps what klasy cover prints from its counts:
// gcov's layout with the source found or not, the arcs, the JSON.
func TestCoverPrintGolden(t *testing.T) {
	t.Setenv("KLASY_CACHE", "/nonexistent/klasy-cache") // where it looks is in the output
	for _, tt := range []struct {
		name, source string
		file, json   bool
	}{
		{"func", "testdata/cover", false, false},
		{"file", "testdata/cover", true, false},
		{"no-source", "testdata/nowhere", false, false},
		{"func.json", "testdata/cover", false, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			arg := "walk"
			if tt.file {
				arg = "walk.c"
			}
			spec, err := cover.ParseCoverSpec(arg)
			if err != nil {
				t.Fatal(err)
			}
			cr := &Result{Target: "lab fake", Spec: spec, Arg: arg, Funcs: []*cover.FuncCoverage{walkCover()},
				Hooks: 7, Skipped: 1, Register: 3500 * time.Microsecond, Elapsed: 2 * time.Second, Argv: []string{"walk", "/a//b"}}
			cr.Sources = FindSources(cr, tt.source)
			var out bytes.Buffer
			if tt.json {
				if err := json.NewEncoder(&out).Encode(cr.JSON()); err != nil {
					t.Fatal(err)
				}
			} else if err := cr.Print(&out); err != nil {
				t.Fatal(err)
			}
			golden.Check(t, "testdata/cover/"+tt.name+".golden", out.String())
		})
	}
}
