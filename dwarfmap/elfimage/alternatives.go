package elfimage

import (
	"debug/elf"
	"encoding/binary"
	"fmt"
	"runtime/debug"

	"github.com/klasy/klasy/internal/mmapfile"
)

// Alternative is one site the kernel rewrites at boot for the CPU it
// runs on (arch/x86/kernel/alternative.c apply_alternatives): the Len
// bytes at Site become the ReplLen bytes at Repl (padded with nops),
// whose relative jumps and calls the kernel fixes up to keep their
// targets.
type Alternative struct {
	Site    uint64
	Len     int
	Repl    uint64
	ReplLen int
}

// altInstrSize is the x86-64 struct alt_instr of 6.1 (asm/alternative.h):
// s32 instr_offset, s32 repl_offset (relative to the field), u16 cpuid,
// u8 instrlen, u8 replacementlen.
const altInstrSize = 12

// Alternatives reads the alternatives table of a linked kernel image
// through __alt_instructions and __alt_instructions_end; nil, nil for an
// image without them (a module, whose table is relocated at load).
func (img *Image) Alternatives() (out []Alternative, err error) {
	defer mmapfile.Catch(&err, debug.SetPanicOnFault(true))
	lo, b, err := img.symbolTable("__alt_instructions", "__alt_instructions_end", altInstrSize)
	if b == nil || err != nil {
		return nil, err
	}
	for off := uint64(0); off < uint64(len(b)); off += altInstrSize {
		site := lo + off + uint64(int64(int32(binary.LittleEndian.Uint32(b[off:]))))
		repl := lo + off + 4 + uint64(int64(int32(binary.LittleEndian.Uint32(b[off+4:]))))
		out = append(out, Alternative{Site: site, Len: int(b[off+10]), Repl: repl, ReplLen: int(b[off+11])})
	}
	return out, nil
}

// symbolTable returns the address and bytes of the table of size-byte
// entries a linked kernel image holds between the symbols start and
// stop; nil, nil for a module (relocated at load) or an image without
// them.
func (img *Image) symbolTable(start, stop string, size uint64) (uint64, []byte, error) {
	if img.ELF.Type == elf.ET_REL {
		return 0, nil, nil
	}
	syms, err := img.ELF.Symbols()
	if err != nil {
		return 0, nil, nil
	}
	var lo, hi uint64
	for _, s := range syms {
		switch s.Name {
		case start:
			lo = s.Value
		case stop:
			hi = s.Value
		}
	}
	if lo == 0 || hi <= lo {
		return 0, nil, nil
	}
	b := img.ReadText(lo, hi-lo)
	if b == nil || (hi-lo)%size != 0 {
		return 0, nil, fmt.Errorf("%s..%s (%#x..%#x) is not readable entries of %d bytes", start, stop, lo, hi, size)
	}
	return lo, b, nil
}
