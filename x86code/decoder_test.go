package x86code

import (
	"debug/elf"
	"math/rand"
	"reflect"
	"testing"

	"golang.org/x/arch/x86/x86asm"

	"github.com/klasy/klasy/internal/testenv"
	"github.com/klasy/klasy/lab"
)

// sameDecode fails t unless d decodes b as x86asm does.
func sameDecode(t *testing.T, d *Decoder, b []byte) bool {
	t.Helper()
	want, werr := decode(b)
	got, gerr := d.Decode(b)
	if (werr == nil) != (gerr == nil) || !reflect.DeepEqual(want, got) {
		t.Errorf("% x: Decoder gives %#v (%v), x86asm %#v (%v)", b, got, gerr, want, werr)
		return false
	}
	return true
}

// TestDecoderShapes decodes every ModRM byte (and the SIB bytes without
// a base or an index, and some others) of every opcode a Decoder knows
// the layout of, with and without REX prefixes and legacy prefixes
// (%gs, lock, rep, operand size: a 16-bit immediate), each
// shape twice with other displacements, immediates and offsets (the
// second from the template the first left): the same as x86asm each
// time. On main there is no Decoder: x86asm decodes every instruction.
func TestDecoderShapes(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	d := &Decoder{}
	rexes := []int{-1, 0x41, 0x42, 0x48, 0x4c, 0x4f}
	prefixes := [][]byte{nil, {0x65}, {0x66}, {0xf0}, {0xf3}, {0x66, 0x2e}, {0x66, 0x66, 0x2e, 0x65}, {0x67}}
	if testing.Short() {
		rexes = []int{-1, 0x48}
		prefixes = prefixes[:3]
	}
	// The SIB bytes without a base or an index, and a few others.
	var someSIBs []int
	for s := 0; s < 256; s++ {
		if s&7 == 5 || s>>3&7 == 4 || r.Intn(16) == 0 {
			someSIBs = append(someSIBs, s)
		}
	}
	bad := 0
	for _, two := range []bool{false, true} {
		tab := &oneByte
		if two {
			tab = &twoByte
		}
		for op := 0; op < 256; op++ {
			if tab[op]&opKnown == 0 {
				continue
			}
			for pi, rex := range rexesWith(rexes, len(prefixes)) {
				pfx := prefixes[pi/len(rexes)]
				if len(pfx) > 0 && (rex != -1 && rex != 0x48) {
					continue // each prefix with and without REX.W
				}
				for modrm := 0; modrm < 256; modrm++ {
					if len(pfx) > 0 && modrm%8 != 4 && modrm%8 != 5 && modrm%16 != 0 {
						continue // each mod and reg field, the SIB and RIP forms
					}
					sibs := []int{0}
					if tab[op]&opModRM == 0 {
						if modrm > 0 {
							break
						}
					} else if modrm>>6 != 3 && modrm&7 == 4 {
						sibs = someSIBs
						if len(pfx) > 0 {
							sibs = sibs[:4]
						}
					}
					for _, sib := range sibs {
						for k := 0; k < 3 && bad < 10; k++ {
							b := append([]byte(nil), pfx...)
							if rex >= 0 {
								b = append(b, byte(rex))
							}
							if two {
								b = append(b, 0x0f)
							}
							b = append(b, byte(op))
							if tab[op]&opModRM != 0 {
								b = append(b, byte(modrm))
								if len(sibs) > 1 {
									b = append(b, byte(sib))
								}
							}
							// Displacement, immediate or offset, and what follows.
							for i := 0; i < 12; i++ {
								v := byte(r.Intn(256))
								if k == 2 && i < 4 {
									v = 0xff // negative
								}
								b = append(b, v)
							}
							if !sameDecode(t, d, b) {
								bad++
							}
						}
					}
				}
			}
		}
	}
	// And cut short: x86asm's error, not a template's instruction.
	for _, b := range [][]byte{{0x48, 0x8b, 0x47}, {0xe8, 1, 2}, {0x0f, 0x85, 1}, {0x48}} {
		sameDecode(t, d, b)
	}
}

// rexesWith repeats rexes n times, once for each legacy prefix.
func rexesWith(rexes []int, n int) []int {
	var out []int
	for i := 0; i < n; i++ {
		out = append(out, rexes...)
	}
	return out
}

// TestDecoderAppend decodes a function with a Decoder as Decode does.
func TestDecoderAppend(t *testing.T) {
	want := Decode(small, 0x1000)
	var d Decoder
	for i := 0; i < 2; i++ {
		if got := d.DecodeAppend(nil, small, 0x1000); !reflect.DeepEqual(got, want) {
			t.Fatalf("run %d: %v, want %v", i, got, want)
		}
	}
}

// TestDecoderOnKernels decodes the whole .text of the built and of
// Debian's vmlinux from its first byte with a Decoder and with x86asm:
// the same instructions, every field.
func TestDecoderOnKernels(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: decodes two kernels")
	}
	for _, kind := range []string{lab.Built, lab.Debian} {
		k, err := lab.FindKernel(kind)
		testenv.Need(t, kind+"-kernel", err)
		f, err := elf.Open(k.Vmlinux)
		if err != nil {
			t.Fatal(err)
		}
		code, err := f.Section(".text").Data()
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		var d Decoder
		n, bad := 0, 0
		for off := 0; off < len(code) && bad < 10; {
			want, werr := decode(code[off:])
			var got x86asm.Inst
			acc, gerr := d.decodeInto(&got, code[off:])
			if (werr == nil) != (gerr == nil) || want != got || werr == nil && acc != accessCode(&want) {
				t.Errorf("%s: % x: Decoder gives %#v (%v, access %#x), x86asm %#v (%v, access %#x)", kind, code[off:off+max(want.Len, 1)], got, gerr, acc, want, werr, accessCode(&want))
				bad++
			}
			n++
			if werr != nil || want.Len == 0 {
				off++
				continue
			}
			off += want.Len
		}
		t.Logf("%s: %d instructions the same", kind, n)
	}
}
