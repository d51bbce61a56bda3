package x86code

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/klasy/klasy/internal/testenv"
)

// blockString prints a graph's blocks as the table below writes them:
// start-end -> succs, then exit, indirect, padding.
func blockString(g *Graph, base uint64) string {
	var parts []string
	for _, b := range g.Blocks {
		s := fmt.Sprintf("%x-%x", b.Start-base, b.End-base)
		var succ []string
		for _, t := range b.Succs {
			succ = append(succ, fmt.Sprintf("%x", t-base))
		}
		if len(succ) > 0 {
			s += ">" + strings.Join(succ, ",")
		}
		if b.Exit {
			s += " exit"
		}
		if b.Indirect {
			s += " indirect"
		}
		if b.Padding {
			s += " pad"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

func TestFuncGraph(t *testing.T) {
	const base = 0xffffffff81000000
	tests := []struct {
		name    string
		ranges  [][]byte // laid out one after the other from base
		entry   uint64
		patched PatchedBranches
		want    string
	}{
		// small: a conditional branch, a call that does not end its
		// block, a return, and a ud2 that nothing reaches.
		{"branches", [][]byte{small}, 0, nil, "0-6>6,b; 6-b>b; b-11 exit; 11-13"},
		{"int3 after a return is padding", [][]byte{{0x31, 0xc0, 0xc3, 0xcc, 0xcc}}, 0, nil, "0-3 exit; 3-5 pad"},
		{"a jump out of the code is a tail call",
			[][]byte{{0x85, 0xff, 0x74, 0x05, 0xe9, 0x00, 0x10, 0x00, 0x00, 0xc3}}, 0, nil, "0-4>4,9; 4-9 exit; 9-a exit"},
		{"jmp *%rax: successors unknown", [][]byte{{0x31, 0xc0, 0xff, 0xe0, 0xc3}}, 0, nil, "0-4 indirect; 4-5 exit"},
		// A static branch: nopl at 0 the kernel may make a jmp to 8.
		{"patched branch",
			[][]byte{{0x0f, 0x1f, 0x44, 0x00, 0x00, 0x31, 0xc0, 0xc3, 0xb8, 0x01, 0x00, 0x00, 0x00, 0xc3}}, 0,
			PatchedBranches{base: base + 8}, "0-5>5,8; 5-8 exit; 8-e exit"},
		// Two ranges: the hot part jumps into its cold part, laid out
		// below it, and the cold part jumps back.
		{"cold part below the entry",
			[][]byte{{0x31, 0xc0, 0xe9, 0x08, 0x00, 0x00, 0x00}, {0x85, 0xff, 0x0f, 0x85, 0xf1, 0xff, 0xff, 0xff, 0xc3}}, 7, nil,
			"0-7>f; 7-f>0,f; f-10 exit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var rs []Range
			addr := uint64(base)
			for _, c := range tt.ranges {
				rs = append(rs, Range{Addr: addr, Code: c})
				addr += uint64(len(c))
			}
			g := FuncGraph(base+tt.entry, rs, tt.patched)
			if got := blockString(g, base); got != tt.want {
				t.Errorf("blocks\n got %s\nwant %s", got, tt.want)
			}
		})
	}
}

// TestFuncGraphCompiled builds the graphs of code gcc compiled and
// checks them against objdump: the blocks cover every instruction once,
// each block's successors are block starts, every jump target inside a
// function starts a block, every block but padding is reached from the
// entry, and a jump table is an indirect jump only when gcc made one,
// whose targets are then blocks reached from nowhere.
func TestFuncGraphCompiled(t *testing.T) {
	for _, tool := range []string{"gcc", "objdump"} {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.Need(t, "binutils", fmt.Errorf("%s not found: apt install gcc binutils", tool))
		}
	}
	for _, tc := range []struct {
		opt      string
		indirect bool // classify's switch compiles to a jump table
	}{
		{"-O2", true},
		{"-Os", true},
		{"-O2 -fno-jump-tables", false}, // as the kernel is built under retpolines
	} {
		t.Run(tc.opt, func(t *testing.T) {
			code, funcs, obj := textFuncs(t, strings.Fields(tc.opt)...)
			starts, targets := objdumpInsts(t, obj)
			indirect := false
			for _, s := range funcs {
				g := FuncGraph(s.Value, []Range{{s.Value, code[s.Value : s.Value+s.Size]}}, nil)
				indirect = indirect || len(g.Indirect) > 0
				var covered []uint64
				for i, b := range g.Blocks {
					if i > 0 && b.Start != g.Blocks[i-1].End {
						t.Errorf("%s: block %#x does not start where %#x ends (%#x)", s.Name, b.Start, g.Blocks[i-1].Start, g.Blocks[i-1].End)
					}
					for _, in := range Decode(code[b.Start:b.End], b.Start) {
						covered = append(covered, in.PC)
					}
					for _, succ := range b.Succs {
						if _, ok := g.Block(succ); !ok {
							t.Errorf("%s: successor %#x of %#x starts no block", s.Name, succ, b.Start)
						}
					}
					if len(b.Succs) == 0 && !b.Exit && !b.Indirect && !b.Padding && b.Last.Inst.Op.String() != "UD2" {
						t.Errorf("%s: block %#x..%#x (%v) goes nowhere", s.Name, b.Start, b.End, b.Last.Inst)
					}
				}
				own := slices.DeleteFunc(slices.Clone(starts[s.Name]), func(a uint64) bool { return a >= s.Value+s.Size })
				if !slices.Equal(covered, own) {
					t.Errorf("%s: the blocks hold the instructions %x, objdump lists %x", s.Name, covered, own)
				}
				for _, tgt := range targets[s.Name] {
					if _, ok := g.Block(tgt); tgt >= s.Value && tgt < s.Value+s.Size && !ok {
						t.Errorf("%s: jump target %#x starts no block", s.Name, tgt)
					}
				}
				reach := g.Reachable()
				unreached := 0
				for _, b := range g.Blocks {
					if !reach[b.Start] && !b.Padding {
						unreached++
						if len(g.Indirect) == 0 {
							t.Errorf("%s: block %#x is not reached from the entry, and is no padding", s.Name, b.Start)
						}
					}
				}
				if len(g.Indirect) > 0 && unreached == 0 {
					t.Errorf("%s: a jump table, and every block reached without it", s.Name)
				}
			}
			if indirect != tc.indirect {
				t.Errorf("indirect jumps found: %v, want %v (gcc %s)", indirect, tc.indirect, tc.opt)
			}
		})
	}
}
