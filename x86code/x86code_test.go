package x86code

import (
	"bufio"
	"bytes"
	"debug/elf"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"testing"

	"github.com/klasy/klasy/internal/testenv"
)

// A hand-assembled function, as objdump -d prints it:
//
//	0:  31 c0        xor  eax,eax
//	2:  85 ff        test edi,edi
//	4:  7e 05        jle  0xb
//	6:  89 f8        mov  eax,edi
//	8:  83 c0 01     add  eax,0x1
//	b:  e8 00 00 00 00  call 0x10  (calls do not end a block)
//	10: c3           ret
//	11: 0f 0b        ud2
var small = []byte{0x31, 0xc0, 0x85, 0xff, 0x7e, 0x05, 0x89, 0xf8, 0x83, 0xc0, 0x01, 0xe8, 0, 0, 0, 0, 0xc3, 0x0f, 0x0b}

func TestLeadersAndBoundaries(t *testing.T) {
	const base = 0xffffffff81000000
	if got, want := Leaders(small, base), []uint64{base, base + 6, base + 0xb, base + 0x11}; !slices.Equal(got, want) {
		t.Errorf("Leaders = %x, want %x", got, want)
	}
	starts := map[uint64]bool{0: true, 2: true, 4: true, 6: true, 8: true, 0xb: true, 0x10: true, 0x11: true}
	for off := uint64(0); off < uint64(len(small)); off++ {
		got, err := IsBoundary(small, base, base+off)
		if err != nil || got != starts[off] {
			t.Errorf("IsBoundary(+%#x) = %v, %v; want %v", off, got, err, starts[off])
		}
	}
	for _, addr := range []uint64{base - 1, base + uint64(len(small)), 0} {
		if _, err := IsBoundary(small, base, addr); err == nil {
			t.Errorf("IsBoundary(%#x) outside the code did not fail", addr)
		}
	}
	// A byte that does not decode is a gap between blocks: 0x06 (push
	// es) is invalid in 64-bit mode.
	bad := []byte{0x90, 0x06, 0x90, 0xc3}
	if got, want := Leaders(bad, 0), []uint64{0, 2}; !slices.Equal(got, want) {
		t.Errorf("Leaders around an invalid byte = %x, want %x", got, want)
	}
	if ok, _ := IsBoundary(bad, 0, 1); ok {
		t.Error("an invalid byte is an instruction boundary")
	}
	// A jump into the middle of an instruction makes no leader there.
	mid := []byte{0xeb, 0x01, 0xb8, 0x01, 0x00, 0x00, 0x00, 0xc3} // jmp +1 (into the mov); mov eax,1; ret
	if got, want := Leaders(mid, 0), []uint64{0, 2}; !slices.Equal(got, want) {
		t.Errorf("Leaders with a jump into an instruction = %x, want %x", got, want)
	}
}

// objdumpInsts runs objdump -d on the .text of obj and returns the
// instruction starts and the branch targets of each function.
func objdumpInsts(t *testing.T, obj string) (starts map[string][]uint64, targets map[string][]uint64) {
	out, err := exec.Command("objdump", "-d", "-w", "--no-show-raw-insn", "-j", ".text", obj).Output()
	if err != nil {
		t.Fatalf("objdump: %v", err)
	}
	fn := regexp.MustCompile(`^[0-9a-f]+ <([^>]+)>:$`)
	ins := regexp.MustCompile(`^\s*([0-9a-f]+):\s+(\S+)\s*([0-9a-f]+)? ?(<[^>]*>)?`)
	starts, targets = map[string][]uint64{}, map[string][]uint64{}
	var cur string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if m := fn.FindStringSubmatch(sc.Text()); m != nil {
			cur = m[1]
			continue
		}
		m := ins.FindStringSubmatch(sc.Text())
		if m == nil || cur == "" {
			continue
		}
		a, _ := strconv.ParseUint(m[1], 16, 64)
		starts[cur] = append(starts[cur], a)
		if m[2][0] == 'j' && m[3] != "" {
			tgt, _ := strconv.ParseUint(m[3], 16, 64)
			targets[cur] = append(targets[cur], tgt)
		}
	}
	return starts, targets
}

// textFuncs compiles testdata/code.c with gcc's args and returns its
// .text (addresses from 0) and the functions in it, with the object's
// path for objdump.
func textFuncs(t *testing.T, args ...string) (code []byte, funcs []elf.Symbol, obj string) {
	t.Helper()
	obj = filepath.Join(t.TempDir(), "code.o")
	args = append(args, "-c", "-o", obj, filepath.Join("testdata", "code.c"))
	testenv.GCC(t, args...)
	f, err := elf.Open(obj)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	text := f.Section(".text")
	code, err = text.Data()
	if err != nil {
		t.Fatal(err)
	}
	syms, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC && int(s.Section) < len(f.Sections) && f.Sections[s.Section] == text {
			funcs = append(funcs, s)
		}
	}
	return code, funcs, obj
}

// TestAgainstObjdump decodes gcc's code for testdata/code.c: the
// instruction boundaries are objdump's, and every jump target inside a
// function starts a block.
func TestAgainstObjdump(t *testing.T) {
	for _, tool := range []string{"gcc", "objdump"} {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.Need(t, "binutils", fmt.Errorf("%s not found: apt install gcc binutils", tool))
		}
	}
	for _, opt := range []string{"-O2", "-O0", "-Os"} {
		t.Run(opt, func(t *testing.T) {
			code, funcs, obj := textFuncs(t, opt)
			starts, targets := objdumpInsts(t, obj)
			n := 0
			for _, s := range funcs {
				n++
				fcode := code[s.Value : s.Value+s.Size]
				want := map[uint64]bool{}
				for _, a := range starts[s.Name] {
					want[a] = true
				}
				if len(want) == 0 {
					t.Fatalf("objdump lists no instructions of %s", s.Name)
				}
				for a := s.Value; a < s.Value+s.Size; a++ {
					if got, err := IsBoundary(fcode, s.Value, a); err != nil || got != want[a] {
						t.Errorf("%s: IsBoundary(%#x) = %v, %v; objdump says %v", s.Name, a, got, err, want[a])
					}
				}
				leaders := Leaders(fcode, s.Value)
				if of := LeadersOf(Decode(fcode, s.Value), s.Value, s.Value+s.Size); !slices.Equal(of, leaders) {
					t.Errorf("%s: LeadersOf(Decode) = %x, Leaders = %x", s.Name, of, leaders)
				}
				if _, sl := Scan(fcode, s.Value); !slices.Equal(sl, leaders) {
					t.Errorf("%s: Scan's leaders = %x, Leaders = %x", s.Name, sl, leaders)
				}
				for _, l := range leaders {
					if !want[l] {
						t.Errorf("%s: leader %#x is not an instruction start", s.Name, l)
					}
				}
				for _, tgt := range targets[s.Name] {
					if tgt >= s.Value && tgt < s.Value+s.Size && !slices.Contains(leaders, tgt) {
						t.Errorf("%s: jump target %#x is not a leader: %x", s.Name, tgt, leaders)
					}
				}
			}
			if n < 4 || len(targets) == 0 {
				t.Fatalf("%d functions in .text, want the 4 of code.c; jumps in %d of them", n, len(targets))
			}
		})
	}
}
