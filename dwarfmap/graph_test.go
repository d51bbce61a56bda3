package dwarfmap

import (
	"slices"
	"strings"
	"testing"
)

// The batch queries the line and block join points use, on the fixture
// (a function with a .cold part, an inline function with copies).
func TestBatchGraphAndCopies(t *testing.T) {
	for _, f := range []fixture{{"-O2", true}, {"-O2", false}} {
		t.Run(f.String(), func(t *testing.T) {
			x := index(t, f)
			b, err := x.NewBatch()
			if err != nil {
				t.Fatal(err)
			}
			fis := x.Funcs("process")
			if len(fis) != 1 || len(fis[0].Ranges) != 2 {
				t.Fatalf("process: %+v, want one body in two ranges (hot and .cold)", fis)
			}
			fi := fis[0]
			g, err := b.Graph(fi)
			if err != nil {
				t.Fatal(err)
			}
			reach := g.Reachable()
			for _, r := range fi.Ranges {
				i, ok := g.Block(r[0])
				if !ok {
					t.Fatalf("range %#x..%#x starts no block", r[0], r[1])
				}
				// (In an object file the jump to the .cold part is not
				// relocated: only a linked image has the arc.)
				if !reach[g.Blocks[i].Start] && f.link {
					t.Errorf("block at %#x (range %#x..%#x) is not reached from the entry %#x through the arcs", g.Blocks[i].Start, r[0], r[1], fi.Entry)
				}
				code, err := b.Code(r[0])
				if err != nil {
					t.Fatal(err)
				}
				// Each leader of the range as Code finds it starts a
				// block of the graph too.
				for a := r[0]; a < r[1]; a++ {
					if lo, _ := code.Block(a); lo == a {
						if _, ok := g.Block(a); !ok {
							t.Errorf("%#x leads a block of the range but starts none of the graph", a)
						}
					}
				}
			}
			if len(g.Indirect) != 0 {
				t.Errorf("indirect jumps %v in process", g.Indirect)
			}

			// CopiesAt finds each inlined copy of scale at its entry,
			// in helper.
			n := 0
			for _, inst := range b.Instances("scale", "") {
				if !inst.Inlined || len(inst.Ranges) == 0 || inst.Ranges[0][0] == inst.Ranges[0][1] {
					continue
				}
				n++
				at := b.CopiesAt(inst.Ranges[0][0])
				if !slices.ContainsFunc(at, func(c Instance) bool { return c.DIE == inst.DIE && c.Host == "helper" && c.Name == "scale" }) {
					t.Errorf("CopiesAt(%#x) = %+v, want scale's copy %#x in helper", inst.Ranges[0][0], at, inst.DIE)
				}
			}
			if n == 0 {
				t.Fatal("no inlined copy of scale with code")
			}
			if at := b.CopiesAt(fi.Entry); len(at) != 0 {
				t.Errorf("CopiesAt(process's entry) = %+v, want none", at)
			}

			names := b.FileNames(func(n string) bool { return strings.HasSuffix(n, "/fixture.c") })
			if len(names) != 1 {
				t.Fatalf("FileNames(*/fixture.c) = %v", names)
			}
			lines := b.LinesWithCode(names[0])
			for _, m := range []string{"scale_body", "loop_body", "return"} {
				if !slices.Contains(lines, marker(t, m)) {
					t.Errorf("line %d (MARK:%s) is not among the lines with code %v", marker(t, m), m, lines)
				}
			}
			if slices.Contains(lines, 1) || slices.Contains(lines, 39) {
				t.Errorf("lines with code %v hold the file's first line or line 39, an extern declaration", lines)
			}
		})
	}
}
