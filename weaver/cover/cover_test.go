package cover

import (
	"fmt"
	"strings"
	"testing"

	"github.com/klasy/klasy/x86code"
)

// graph builds a graph from "start:succ,succ[:exit|:indirect]" blocks,
// each 0x10 bytes long; the entry is the first.
func graph(spec ...string) *x86code.Graph {
	g := &x86code.Graph{}
	for _, s := range spec {
		f := strings.Split(s, ":")
		var b x86code.GraphBlock
		fmt.Sscanf(f[0], "%x", &b.Start)
		b.End = b.Start + 0x10
		if len(f) > 1 && f[1] != "" {
			for _, t := range strings.Split(f[1], ",") {
				var a uint64
				fmt.Sscanf(t, "%x", &a)
				b.Succs = append(b.Succs, a)
			}
		}
		for _, flag := range f[min(2, len(f)):] {
			switch flag {
			case "exit":
				b.Exit = true
			case "indirect":
				b.Indirect = true
				g.Indirect = append(g.Indirect, x86code.Insn{PC: b.End - 2})
			}
		}
		g.Blocks = append(g.Blocks, b)
	}
	g.Entry = g.Blocks[0].Start
	return g
}

// arcString prints the arcs as from>to=count, ? for not determined
// (with <=bound), entry and exit for the virtual ends.
func arcString(fc *FuncCover) string {
	var parts []string
	name := func(a uint64, end string) string {
		if a == 0 {
			return end
		}
		return fmt.Sprintf("%x", a)
	}
	for _, a := range fc.Arcs {
		c := fmt.Sprint(a.Count)
		if !a.Determined {
			c = "?"
			if a.HasBound {
				c += fmt.Sprintf("<=%d", a.Bound)
			}
		}
		parts = append(parts, name(a.From, "entry")+">"+name(a.To, "exit")+"="+c)
	}
	return strings.Join(parts, " ")
}

func TestCoverArcs(t *testing.T) {
	tests := []struct {
		name    string
		g       *x86code.Graph
		counts  map[uint64]uint64
		want    string
		derived string // blocks derived: start=count
		bad     int
	}{
		// KernInst's Figure 7.2 (Pettis and Hansen's graph): A calls
		// into B or C, C loops on itself, both go to D.
		{"KernInst's example",
			graph("a:b,c", "b:d", "c:c,d", "d::exit"),
			map[uint64]uint64{0xa: 1001, 0xb: 1000, 0xc: 2001, 0xd: 1001},
			"entry>a=1001 a>b=1000 a>c=1 b>d=1000 c>c=2000 c>d=1 d>exit=1001", "", 0},
		// A loop whose body has two paths: block counts alone leave the
		// two paths' arcs into the latch undetermined... but the
		// paths' blocks have one arc in and one out each.
		{"diamond in a loop",
			graph("10:20", "20:30,40", "30:50", "40:50", "50:20,60", "60::exit"),
			map[uint64]uint64{0x10: 3, 0x20: 30, 0x30: 10, 0x40: 20, 0x50: 30, 0x60: 3},
			"entry>10=3 10>20=3 20>30=10 20>40=20 30>50=10 40>50=20 50>20=27 50>60=3 60>exit=3", "", 0},
		// Two blocks each with two ways out into two blocks with two
		// ways in: the arcs of the square are not determined by block
		// counts (Probert's case); KernInst bounds them.
		{"undetermined square",
			graph("10:20,30", "20:40,50", "30:40,50", "40::exit", "50::exit"),
			map[uint64]uint64{0x10: 10, 0x20: 6, 0x30: 4, 0x40: 5, 0x50: 5},
			"entry>10=10 10>20=6 10>30=4 20>40=?<=5 20>50=?<=5 30>40=?<=4 30>50=?<=4 40>exit=5 50>exit=5", "", 0},
		// The same square with one side never run: its arcs are 0 (a
		// sum that leaves nothing), and that determines the others.
		{"square with a side never run",
			graph("10:20,30", "20:40,50", "30:40,50", "40::exit", "50::exit"),
			map[uint64]uint64{0x10: 10, 0x20: 10, 0x30: 0, 0x40: 4, 0x50: 6},
			"entry>10=10 10>20=10 10>30=0 20>40=4 20>50=6 30>40=0 30>50=0 40>exit=4 50>exit=6", "", 0},
		// A block without a hook (refused) is derived.
		{"unhooked block derived",
			graph("10:20,30", "20:40", "30:40", "40::exit"),
			map[uint64]uint64{0x10: 7, 0x30: 2, 0x40: 7},
			"entry>10=7 10>20=5 10>30=2 20>40=5 30>40=2 40>exit=7", "20=5", 0},
		// Counts that do not add up (a function running while hooks went
		// live): reported, not forced.
		{"inconsistent",
			graph("10:20", "20::exit"),
			map[uint64]uint64{0x10: 5, 0x20: 4},
			"entry>10=5 10>20=5 20>exit=4", "", 1},
		// An indirect jump: the sums of the arcs into blocks are not
		// trusted (it may go to any block), those out of the jump's
		// block not made.
		{"indirect jump",
			graph("10:20,30", "20::indirect", "30::exit", "40:30"),
			map[uint64]uint64{0x10: 9, 0x20: 4, 0x30: 5, 0x40: 3},
			"entry>10=? 10>20=?<=9 10>30=?<=9 30>exit=5 40>30=3", "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fc := Cover(tt.g, tt.counts, nil, nil)
			if got := arcString(fc); got != tt.want {
				t.Errorf("arcs\n got %s\nwant %s", got, tt.want)
			}
			var derived []string
			for _, b := range fc.Blocks {
				if b.Derived {
					derived = append(derived, fmt.Sprintf("%x=%d", b.Start, b.Count))
				}
			}
			if got := strings.Join(derived, " "); got != tt.derived {
				t.Errorf("derived blocks %q, want %q", got, tt.derived)
			}
			if fc.Inconsistent != tt.bad {
				t.Errorf("%d inconsistent sums, want %d", fc.Inconsistent, tt.bad)
			}
		})
	}
}

// TestCoverLines: gcov's line counts from blocks and arcs.
func TestCoverLines(t *testing.T) {
	// for (i = 0; i < n; i++) body;  on line 5, the body on line 6, run
	// with n = 4: init (10), condition (20), increment (40) on line 5.
	g := graph("10:20", "20:30,50", "30:40", "40:20", "50::exit")
	counts := map[uint64]uint64{0x10: 1, 0x20: 5, 0x30: 4, 0x40: 4, 0x50: 1}
	lines := map[uint64][]SourceLine{
		0x10: {{"f.c", 4}, {"f.c", 5}}, 0x20: {{"f.c", 5}}, 0x30: {{"f.c", 6}}, 0x40: {{"f.c", 5}}, 0x50: {{"f.c", 7}, {"f.c", 8}},
	}
	fc := Cover(g, counts, nil, func(lo, hi uint64) []SourceLine { return lines[lo] })
	var got []string
	for _, l := range fc.Lines {
		got = append(got, fmt.Sprintf("%d=%d", l.Line, l.Count))
	}
	// Line 5 is entered once from line 4 and 4 times from the body.
	if want := "4=1 5=5 6=4 7=1 8=1"; strings.Join(got, " ") != want {
		t.Errorf("lines %s, want %s", strings.Join(got, " "), want)
	}
	if fc.Calls().Count != 1 || !fc.Calls().Determined {
		t.Errorf("calls %+v, want 1", fc.Calls())
	}

	// while (*p) p++; on one line (a block looping on itself): the line
	// runs as often as its block, by gcov's cycle rule.
	g = graph("10:20", "20:20,30", "30::exit")
	counts = map[uint64]uint64{0x10: 2, 0x20: 12, 0x30: 2}
	lines = map[uint64][]SourceLine{0x10: {{"f.c", 1}}, 0x20: {{"f.c", 2}}, 0x30: {{"f.c", 3}}}
	fc = Cover(g, counts, nil, func(lo, hi uint64) []SourceLine { return lines[lo] })
	if l := fc.Lines[1]; l.Line != 2 || l.Count != 12 || l.Estimated {
		t.Errorf("self loop line %+v, want 12", l)
	}

	// if (a && b) x; on line 1: its second test runs only when the
	// first passes, the line 3 times; line 2 never runs (gcov's #####);
	// line 3's code is in the never-run block too (gcov's "3*").
	g = graph("10:20,40", "20:30,40", "30:40", "40::exit")
	counts = map[uint64]uint64{0x10: 3, 0x20: 1, 0x30: 0, 0x40: 3}
	lines = map[uint64][]SourceLine{0x10: {{"f.c", 1}}, 0x20: {{"f.c", 1}}, 0x30: {{"f.c", 2}, {"f.c", 3}}, 0x40: {{"f.c", 3}}}
	fc = Cover(g, counts, nil, func(lo, hi uint64) []SourceLine { return lines[lo] })
	want := []CoverLine{{SourceLine{"f.c", 1}, 3, true, false, false}, {SourceLine{"f.c", 2}, 0, true, false, false}, {SourceLine{"f.c", 3}, 3, true, false, true}}
	for i, w := range want {
		if fc.Lines[i] != w {
			t.Errorf("line %d: %+v, want %+v", w.Line, fc.Lines[i], w)
		}
	}
}
