package elfimage

import (
	"debug/elf"
	"fmt"
	"runtime/debug"

	"github.com/klasy/klasy/internal/mmapfile"
)

// ModuleSymbolAt names addr of a module's .ko, as laid out here, as the
// kernel's kallsyms will name it once the module is loaded: the nearest
// named symbol at or before it in its section (the first of the table
// among several at one address, as the kernel's find_kallsyms_symbol
// takes them) and addr's offset from it.
func (img *Image) ModuleSymbolAt(addr uint64) (name string, off uint64, err error) {
	defer mmapfile.Catch(&err, debug.SetPanicOnFault(true))
	if !img.Rel {
		return "", 0, fmt.Errorf("%#x: not a module", addr)
	}
	sec, secOff, ok := img.SectionAt(addr)
	if !ok {
		return "", 0, fmt.Errorf("%#x is in no allocated section of the module", addr)
	}
	syms, err := img.ELF.Symbols()
	if err != nil {
		return "", 0, img.Explain(fmt.Errorf("reading the symbol table: %w", err))
	}
	found := false
	var best elf.Symbol
	for _, s := range syms {
		if s.Name == "" || s.Section == elf.SHN_UNDEF || int(s.Section) >= len(img.ELF.Sections) ||
			img.ELF.Sections[s.Section].Name != sec || s.Value > secOff {
			continue
		}
		if !found || s.Value > best.Value {
			best, found = s, true
		}
	}
	if !found {
		return "", 0, fmt.Errorf("%#x (%s+%#x) has no symbol at or before it in %s", addr, sec, secOff, sec)
	}
	return best.Name, secOff - best.Value, nil
}
