package x86code

import (
	"debug/elf"
	"sort"
	"testing"

	"github.com/klasy/klasy/internal/testenv"
	"github.com/klasy/klasy/lab"
)

// kernelFuncs returns the code of the built vmlinux's functions (its
// FUNC symbols in .text), as accessinfer reads them one at a time.
func kernelFuncs(b *testing.B) []Range {
	k, err := lab.FindKernel(lab.Built)
	testenv.Need(b, lab.Built+"-kernel", err)
	f, err := elf.Open(k.Vmlinux)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	text := f.Section(".text")
	code, err := text.Data()
	if err != nil {
		b.Fatal(err)
	}
	syms, err := f.Symbols()
	if err != nil {
		b.Fatal(err)
	}
	var out []Range
	seen := map[uint64]bool{}
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) != elf.STT_FUNC || s.Size == 0 || s.Value < text.Addr || s.Value+s.Size > text.Addr+text.Size || seen[s.Value] {
			continue
		}
		seen[s.Value] = true
		off := s.Value - text.Addr
		out = append(out, Range{Addr: s.Value, Code: code[off : off+s.Size]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Addr < out[j].Addr })
	return out
}

// BenchmarkKernelFuncs decodes each function of the built kernel with
// one Decoder, asks Access of each instruction and builds its graph, as
// accessinfer's worker does, in one goroutine.
func BenchmarkKernelFuncs(b *testing.B) {
	funcs := kernelFuncs(b)
	var d Decoder
	var g Graph
	var buf []Insn
	decoded := make([][]Insn, 1)
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		mems := 0
		for _, r := range funcs {
			buf = d.DecodeAppend(buf[:0], r.Code, r.Addr)
			for i := range buf {
				if _, ok := buf[i].Access(); ok {
					mems++
				}
			}
			decoded[0] = buf
			FuncGraphInto(&g, r.Addr, []Range{r}, decoded, nil)
		}
		b.ReportMetric(float64(mems), "mems")
	}
}
