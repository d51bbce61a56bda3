package loc

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/go-delve/delve/pkg/dwarf/frame"
	"github.com/go-delve/delve/pkg/dwarf/op"

	"github.com/klasy/klasy/dwarfmap/elfimage"
	"github.com/klasy/klasy/internal/testenv"
)

// frames keeps values live across calls, so that gcc saves registers and
// moves the CFA: at -O2 it stays rsp-based, at -O0 it moves to rbp.
const frames = `extern long g(long, long);
long f(long a, long b, long c) { long x = g(a, b); long y = g(x, c); return g(x + a, y + b) + c; }
int main(void) { return f(1, 2, 3); }
`

// TestCFAMatchesReadelf checks the CFA at every row of every FDE against
// readelf --debug-dump=frames-interp, for the kernel's
// -fno-asynchronous-unwind-tables (.debug_frame) and the user-space
// default (.eh_frame).
func TestCFAMatchesReadelf(t *testing.T) {
	for _, tool := range []string{"gcc", "readelf"} {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.Need(t, "binutils", fmt.Errorf("%s not found: apt install gcc binutils", tool))
		}
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "frames.c")
	if err := os.WriteFile(src, []byte(frames), 0o644); err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile(`^([0-9a-f]{16}) (r[a-z0-9]+)([+-][0-9]+) `)
	for _, flags := range [][]string{{"-O2", "-fno-asynchronous-unwind-tables"}, {"-O0", "-fno-asynchronous-unwind-tables"}, {"-O2"}} {
		t.Run(strings.Join(flags, " "), func(t *testing.T) {
			exe := filepath.Join(dir, "frames")
			args := append(flags, "-g", "-nostdlib", "-Wl,-e,main", "-Wl,--unresolved-symbols=ignore-all", "-o", exe, src)
			testenv.GCC(t, args...)
			out, err := exec.Command("readelf", "--debug-dump=frames-interp", exe).Output()
			if err != nil {
				t.Fatal(err)
			}
			img, err := elfimage.Open(exe)
			if err != nil {
				t.Fatal(err)
			}
			defer img.Close()
			ix := NewFDEIndex(img)
			n := 0
			sc := bufio.NewScanner(bytes.NewReader(out))
			for sc.Scan() {
				m := row.FindStringSubmatch(sc.Text())
				if m == nil || m[1] == "0000000000000000" { // the CIE's row
					continue
				}
				pc, _ := strconv.ParseUint(m[1], 16, 64)
				off, _ := strconv.ParseInt(m[3], 10, 64)
				r, err := NewFrame(img, pc, nil).CFA()
				if err != nil {
					t.Errorf("CFA at %#x: %v", pc, err)
					continue
				}
				if r.Rule != frame.RuleCFA || RegName(r.Reg) != m[2] || r.Offset != off {
					t.Errorf("CFA at %#x: %s%+d, readelf says %s%s", pc, RegName(r.Reg), r.Offset, m[2], m[3])
				}
				if ri, err := NewFrameIn(ix, pc, nil).CFA(); err != nil || ri.Rule != r.Rule || ri.Reg != r.Reg || ri.Offset != r.Offset {
					t.Errorf("CFA at %#x through the FDE index: %+v, %v; without: %+v", pc, ri, err, r)
				}
				// A stack slot there is found from that CFA.
				l := Describe(expr(op.DW_OP_fbreg, sleb(-24)), NewFrame(img, pc, []byte{byte(op.DW_OP_call_frame_cfa)}))
				if want := fmt.Sprintf("stack CFA-24 ([%s%+d] here)", m[2], off-24); l.String() != want {
					t.Errorf("stack slot at %#x: %q, want %q", pc, l, want)
				}
				n++
			}
			if n < 3 {
				t.Fatalf("%d CFA rows checked:\n%s", n, out)
			}
			l := Describe(expr(op.DW_OP_fbreg, sleb(-24)), NewFrame(img, 0, []byte{byte(op.DW_OP_call_frame_cfa)}))
			if _, err := NewFrameIn(ix, 0, nil).CFA(); err == nil {
				t.Errorf("at 0, outside any FDE, the FDE index found one")
			}
			if _, err := NewFrame(img, 0, nil).CFA(); err == nil || l.CFA != nil || l.String() != "stack CFA-24" {
				t.Errorf("at 0, outside any FDE: %v, %q", err, l)
			}
		})
	}
}
