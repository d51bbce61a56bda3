package elfimage

import (
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"

	"github.com/klasy/klasy/internal/mmapfile"
)

// FtraceSites are the kernel's ftrace call sites: the address of every
// function's `call __fentry__` (at its first byte on x86-64 without
// IBT), which dynamic ftrace turns into a nop at boot and back into a
// call for its users: the function tracer, livepatch, ftrace-based
// kprobes. A function without one (notrace, or in a file built without
// -pg) can be hooked only by a breakpoint kprobe.
type FtraceSites struct {
	addrs []uint64 // sorted
}

// FtraceSites reads the table of ftrace call sites of a linked kernel
// image, __start_mcount_loc..__stop_mcount_loc (8-byte link-time
// addresses); nil, nil for a module, whose table is relocated at load,
// or an image without the table (a kernel without dynamic ftrace).
func (img *Image) FtraceSites() (s *FtraceSites, err error) {
	defer mmapfile.Catch(&err, debug.SetPanicOnFault(true))
	_, b, err := img.symbolTable("__start_mcount_loc", "__stop_mcount_loc", 8)
	if b == nil || err != nil {
		return nil, err
	}
	s = &FtraceSites{addrs: make([]uint64, 0, len(b)/8)}
	for off := 0; off < len(b); off += 8 {
		s.addrs = append(s.addrs, binary.LittleEndian.Uint64(b[off:]))
	}
	slices.Sort(s.addrs)
	return s, nil
}

// Has reports whether addr is an ftrace call site.
func (s *FtraceSites) Has(addr uint64) bool {
	_, ok := slices.BinarySearch(s.addrs, addr)
	return ok
}

// Len is the number of sites.
func (s *FtraceSites) Len() int { return len(s.addrs) }

// SymbolsAt returns the names of the function symbols of a linked image
// whose value is addr, as kallsyms shows them (a GCC clone as f.isra.0,
// aliases side by side); nil for a module.
func (img *Image) SymbolsAt(addr uint64) (names []string, err error) {
	defer mmapfile.Catch(&err, debug.SetPanicOnFault(true))
	syms, err := img.linkedSymbols()
	if err != nil {
		return nil, err
	}
	for _, s := range syms {
		typ := elf.ST_TYPE(s.Info)
		if s.Value == addr && (typ == elf.STT_FUNC || typ == elf.STT_NOTYPE) && s.Section != elf.SHN_UNDEF && s.Name != "" {
			names = append(names, s.Name)
		}
	}
	return names, nil
}

// FuncSymbols returns the function symbols of a linked image by name,
// with their addresses (the first of a name the table repeats, as a
// static function's): aliases such as __x64_sys_getppid, which the
// DWARF knows only as the function at that address (__do_sys_getppid).
// Nil for a module or an image without a symbol table.
func (img *Image) FuncSymbols() (addrs map[string]uint64, err error) {
	defer mmapfile.Catch(&err, debug.SetPanicOnFault(true))
	syms, err := img.linkedSymbols()
	if err != nil || syms == nil {
		return nil, err
	}
	addrs = map[string]uint64{}
	for _, s := range syms {
		if _, dup := addrs[s.Name]; elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Section != elf.SHN_UNDEF && s.Name != "" && !dup {
			addrs[s.Name] = s.Value
		}
	}
	return addrs, nil
}

// linkedSymbols reads the symbol table of a linked image; nil, nil for
// a module (its values are section offsets) or an image without one.
func (img *Image) linkedSymbols() ([]elf.Symbol, error) {
	if img.ELF.Type == elf.ET_REL {
		return nil, nil
	}
	syms, err := img.ELF.Symbols()
	if errors.Is(err, elf.ErrNoSymbols) {
		return nil, nil
	}
	if err != nil {
		return nil, img.Explain(fmt.Errorf("reading the symbol table: %w", err))
	}
	return syms, nil
}
