// Package elfimage opens a kernel image (a vmlinux or a .ko) for the
// DWARF readers: it maps the file, checks that it is a whole ELF file
// with debug info (saying where to get one when it is not), reads its
// build-id and kernel release, inflates compressed debug sections and
// applies a module's relocations to them.
//
// The file is mapped (internal/mmapfile): should it be truncated while
// klasy reads it, as when a vmlinux is rebuilt or copied over during a
// query, touching the lost pages faults. Open, DWARF, UnitDWARF and
// CheckModuleMatches turn that into a *mmapfile.ChangedError ("IMAGE
// changed while it was read"); code that reads the bytes Section and
// ReadText return arms its own goroutine (see mmapfile).
package elfimage

import (
	"bytes"
	"debug/dwarf"
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/klasy/klasy/internal/mmapfile"
)

// ErrNoDebugInfo is returned (wrapped) when an image has no DWARF.
var ErrNoDebugInfo = errors.New("no DWARF debug info")

// ErrTruncated is returned (wrapped) when a section lies past the end of
// the file, as after an interrupted download or copy.
var ErrTruncated = errors.New("file is truncated")

// Image is an opened ELF kernel image (vmlinux or a .ko) with its debug
// sections. Uncompressed sections of an executable are slices of a
// read-only mapping of the file, so opening a 600 MB vmlinux costs
// nothing until the bytes are touched.
type Image struct {
	Path    string
	ELF     *elf.File
	BuildID string // hex of NT_GNU_BUILD_ID, "" if none
	Size    int64
	Rel     bool // ET_REL: a kernel module, debug sections relocated here

	mapping []byte
	file    *mmapfile.File // nil for OpenBytes
	sec     map[string][]byte
	// text holds a relocatable object's code sections, by section
	// index, with their relocations applied against layOut's addresses
	// (see relocateText); ReadText reads them there.
	text map[int][]byte
}

// debugSections are the sections the DWARF readers use.
var debugSections = []string{
	".debug_info", ".debug_abbrev", ".debug_line", ".debug_str",
	".debug_line_str", ".debug_str_offsets", ".debug_addr",
	".debug_ranges", ".debug_rnglists", ".debug_loc", ".debug_loclists",
	".debug_frame",
}

// Open maps path, which must be a regular file, and checks that it is an
// ELF file with DWARF.
func Open(path string) (*Image, error) {
	f, err := mmapfile.Open(path)
	if err != nil {
		return nil, err
	}
	img := &Image{Path: path, Size: f.Size(), file: f, mapping: f.Data, sec: map[string][]byte{}}
	if img.Size == 0 {
		img.Close()
		return nil, fmt.Errorf("%s: empty file: %w", path, ErrTruncated)
	}
	if err := img.init(); err != nil {
		err = img.Explain(err)
		img.Close()
		var ce *mmapfile.ChangedError
		if errors.As(err, &ce) {
			return nil, err // names the file
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return img, nil
}

// Changed returns a *mmapfile.ChangedError if the file changed since
// Open, else nil.
func (img *Image) Changed() error {
	if img.file == nil {
		return nil
	}
	return img.file.Changed()
}

// Explain returns err, unless the image changed while it was read: then
// what went wrong was that (a *mmapfile.ChangedError), whether err is
// the fault that a truncation raised or what the reader made of bytes
// written over those it expected.
func (img *Image) Explain(err error) error {
	if err == nil {
		return nil
	}
	var ce *mmapfile.ChangedError
	if errors.As(err, &ce) {
		return ce
	}
	if cerr := img.Changed(); cerr != nil {
		return cerr
	}
	return err
}

// OpenBytes opens an image held in memory (tests, fuzzing).
func OpenBytes(name string, data []byte) (*Image, error) {
	img := &Image{Path: name, Size: int64(len(data)), mapping: data, sec: map[string][]byte{}}
	if err := img.init(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return img, nil
}

func (img *Image) init() (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		// debug/elf can panic on hostile input; a user gets an error.
		if r := recover(); r != nil {
			if err = mmapfile.FaultError(r); err == nil {
				err = fmt.Errorf("malformed ELF: %v", r)
			}
		}
	}()
	if len(img.mapping) < 4 || string(img.mapping[:4]) != elf.ELFMAG {
		if len(img.mapping) > 0x206 && string(img.mapping[0x202:0x206]) == "HdrS" {
			return errors.New("this is a compressed boot image (bzImage/vmlinuz), not a vmlinux: use the debug vmlinux " +
				"(Debian: /usr/lib/debug/boot/vmlinux-<abi> from linux-image-<abi>-dbg; a built kernel: vmlinux in the build tree)")
		}
		return errors.New("not an ELF file (expected a vmlinux or a .ko)")
	}
	ef, err := elf.NewFile(bytes.NewReader(img.mapping))
	if err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return fmt.Errorf("reading ELF headers: %w", ErrTruncated)
		}
		return fmt.Errorf("reading ELF headers: %w", err)
	}
	img.ELF = ef
	img.Rel = ef.Type == elf.ET_REL
	for _, s := range ef.Sections {
		if s.Type != elf.SHT_NOBITS && s.Offset+s.FileSize > uint64(len(img.mapping)) {
			return fmt.Errorf("section %s ends at byte %d but the file has %d bytes: %w",
				s.Name, s.Offset+s.FileSize, len(img.mapping), ErrTruncated)
		}
	}
	img.BuildID = readBuildID(ef, img.mapping)
	if img.Rel {
		layOut(ef)
		if err := img.relocateText(); err != nil {
			return fmt.Errorf("relocating the code: %w", err)
		}
	}
	for _, name := range debugSections {
		s := ef.Section(name)
		if s == nil {
			continue
		}
		var b []byte
		if s.Flags&elf.SHF_COMPRESSED != 0 || img.Rel {
			// Compressed sections are inflated once; relocatable ones are
			// copied so relocations can be applied.
			b, err = s.Data()
			if err != nil {
				return fmt.Errorf("reading %s: %w", name, err)
			}
		} else {
			b = img.mapping[s.Offset : s.Offset+s.FileSize]
		}
		if img.Rel {
			if err := img.relocate(s, b); err != nil {
				return fmt.Errorf("relocating %s: %w", name, err)
			}
		}
		img.sec[name] = b
	}
	if len(img.sec[".debug_info"]) == 0 || len(img.sec[".debug_line"]) == 0 {
		return noDebugInfoError(ef, img.mapping)
	}
	return nil
}

// noDebugInfoError says where a kernel developer gets the DWARF for this
// image.
func noDebugInfoError(ef *elf.File, data []byte) error {
	release := kernelRelease(ef, data)
	var hint string
	switch {
	case ef.Type == elf.ET_REL:
		hint = "this module was stripped; use the one from the -dbg package " +
			"(Debian: /usr/lib/debug/lib/modules/<abi>/... in linux-image-<abi>-dbg) " +
			"or a module built with CONFIG_DEBUG_INFO_DWARF5=y"
	case release != "":
		hint = fmt.Sprintf("this is a stripped kernel (Linux %s); use its debug vmlinux: "+
			"Debian: apt install linux-image-%s-dbg (/usr/lib/debug/boot/vmlinux-%s); "+
			"a self-built kernel: CONFIG_DEBUG_INFO_DWARF5=y", release, release, release)
	default:
		hint = "Debian: the linux-image-<abi>-dbg package has /usr/lib/debug/boot/vmlinux-<abi>; " +
			"a self-built kernel needs CONFIG_DEBUG_INFO_DWARF5=y"
	}
	return fmt.Errorf("%w (%s)", ErrNoDebugInfo, hint)
}

// Close unmaps the image.
func (img *Image) Close() error {
	img.mapping = nil
	if img.file != nil {
		return img.file.Close()
	}
	return nil
}

// Section returns the bytes of a debug section (nil if absent).
func (img *Image) Section(name string) []byte { return img.sec[name] }

// DWARF returns a debug/dwarf view of the whole image.
func (img *Image) DWARF() (*dwarf.Data, error) {
	return img.dwarfFor(img.sec[".debug_info"])
}

func (img *Image) dwarfFor(info []byte) (d *dwarf.Data, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			if err = mmapfile.FaultError(r); err == nil {
				err = img.Explain(fmt.Errorf("malformed DWARF: %v", r))
			}
		}
	}()
	d, err = dwarf.New(img.sec[".debug_abbrev"], nil, nil, info, img.sec[".debug_line"], nil, img.sec[".debug_ranges"], img.sec[".debug_str"])
	if err != nil {
		return nil, img.Explain(fmt.Errorf("reading DWARF: %w", err))
	}
	for _, n := range []string{".debug_addr", ".debug_line_str", ".debug_str_offsets", ".debug_rnglists"} {
		if b := img.sec[n]; len(b) > 0 {
			if err := d.AddSection(n, b); err != nil {
				return nil, img.Explain(fmt.Errorf("reading %s: %w", n, err))
			}
		}
	}
	return d, nil
}

// UnitDWARF returns a debug/dwarf view of one compilation unit
// [off, end) of .debug_info. Entry offsets in it are relative to off:
// a query touches one unit instead of parsing the headers of all 2,352.
func (img *Image) UnitDWARF(off, end uint64) (*dwarf.Data, error) {
	info := img.sec[".debug_info"]
	if off >= end || end > uint64(len(info)) {
		return nil, fmt.Errorf("unit at %#x..%#x outside .debug_info (%d bytes)", off, end, len(info))
	}
	return img.dwarfFor(info[off:end])
}

func readBuildID(ef *elf.File, data []byte) string {
	for _, p := range ef.Progs {
		if p.Type != elf.PT_NOTE {
			continue
		}
		if id := buildIDFromNotes(ef.ByteOrder, data, p.Off, p.Filesz); id != "" {
			return id
		}
	}
	for _, s := range ef.Sections {
		if s.Type != elf.SHT_NOTE {
			continue
		}
		if id := buildIDFromNotes(ef.ByteOrder, data, s.Offset, s.FileSize); id != "" {
			return id
		}
	}
	return ""
}

func buildIDFromNotes(bo binary.ByteOrder, data []byte, off, size uint64) string {
	if off+size > uint64(len(data)) {
		return ""
	}
	b := data[off : off+size]
	for len(b) >= 12 {
		namesz, descsz, typ := bo.Uint32(b), bo.Uint32(b[4:]), bo.Uint32(b[8:])
		nameEnd := 12 + (uint64(namesz)+3)&^3
		descEnd := nameEnd + (uint64(descsz)+3)&^3
		if descEnd > uint64(len(b)) {
			return ""
		}
		name := b[12 : 12+namesz]
		if typ == 3 && string(bytes.TrimRight(name, "\x00")) == "GNU" { // NT_GNU_BUILD_ID
			return hex.EncodeToString(b[nameEnd : nameEnd+uint64(descsz)])
		}
		b = b[descEnd:]
	}
	return ""
}

// kernelRelease returns the release a vmlinux was built as (from
// linux_banner, "Linux version 6.1.0-56-amd64 ...") or a module was built
// for (vermagic in .modinfo). "" if neither is found.
func kernelRelease(ef *elf.File, data []byte) string {
	if s := ef.Section(".modinfo"); s != nil && s.Type != elf.SHT_NOBITS && s.Offset+s.FileSize <= uint64(len(data)) {
		for _, kv := range bytes.Split(data[s.Offset:s.Offset+s.FileSize], []byte{0}) {
			if v, ok := bytes.CutPrefix(kv, []byte("vermagic=")); ok {
				if f := strings.Fields(string(v)); len(f) > 0 {
					return f[0]
				}
			}
		}
		return ""
	}
	s := ef.Section(".rodata")
	if s == nil || s.Type == elf.SHT_NOBITS || s.Offset+s.FileSize > uint64(len(data)) {
		return ""
	}
	ro := data[s.Offset : s.Offset+s.FileSize]
	const banner = "Linux version "
	for i := 0; ; {
		j := bytes.Index(ro[i:], []byte(banner))
		if j < 0 {
			return ""
		}
		rest := ro[i+j+len(banner):]
		if end := bytes.IndexAny(rest, " \x00"); end > 0 && end < 64 {
			r := string(rest[:end])
			if strings.ContainsAny(r, "0123456789") && !strings.Contains(r, "%") {
				return r
			}
		}
		i += j + len(banner)
	}
}

// Release is the kernel release of a vmlinux or the vermagic release of
// a module ("" if unknown, or if the image changed under klasy).
func (img *Image) Release() string {
	r, _ := img.release()
	return r
}

func (img *Image) release() (r string, err error) {
	defer mmapfile.Catch(&err, debug.SetPanicOnFault(true))
	return kernelRelease(img.ELF, img.mapping), nil
}

// CheckModuleMatches returns an error when the module mod was not built for
// the kernel vmlinux (their releases differ).
func CheckModuleMatches(mod, vmlinux *Image) error {
	// What looks like a mismatch may be a file changed under klasy.
	return vmlinux.Explain(mod.Explain(checkModuleMatches(mod, vmlinux)))
}

func checkModuleMatches(mod, vmlinux *Image) error {
	if !mod.Rel {
		return fmt.Errorf("%s is not a kernel module (.ko)", mod.Path)
	}
	mr, err := mod.release()
	if err != nil {
		return err
	}
	vr, err := vmlinux.release()
	if err != nil {
		return err
	}
	if mr == "" || vr == "" {
		return fmt.Errorf("cannot tell which kernel %s was built for (module release %q, vmlinux release %q)", mod.Path, mr, vr)
	}
	if mr != vr {
		return fmt.Errorf("%s was built for Linux %s but %s is Linux %s: use the vmlinux of the kernel the module belongs to", mod.Path, mr, vmlinux.Path, vr)
	}
	return nil
}

// ModuleBase is where layOut puts a module's first allocated section.
const ModuleBase = 0x10000

// ModuleLayout names the way layOut places a module's sections (and,
// since layout2, relocateText relocates its code), for
// caches of what was read at those addresses.
const ModuleLayout = "layout2"

// layOut gives the allocated sections of a relocatable object addresses
// one after the other from ModuleBase, in section order and aligned, as
// a linker would: in a .ko each section starts at 0, so the code of
// .text, .init.text and .exit.text would share addresses. DWARF
// addresses (relocated against these) are then unique, and a loaded
// module's SECTION+OFFSET is SectionAt's answer.
func layOut(ef *elf.File) {
	next := uint64(ModuleBase)
	for _, s := range ef.Sections {
		if s.Flags&elf.SHF_ALLOC == 0 || s.Size == 0 {
			continue
		}
		if a := s.Addralign; a > 1 && a&(a-1) == 0 {
			next = (next + a - 1) &^ (a - 1)
		}
		s.Addr = next
		next += s.Size
	}
}

// SectionAt returns the allocated section holding addr and addr's
// offset in it (ok false if none): for a module, where addr is once the
// module is loaded (/sys/module/NAME/sections/SECTION + off).
func (img *Image) SectionAt(addr uint64) (name string, off uint64, ok bool) {
	for _, s := range img.ELF.Sections {
		if s.Flags&elf.SHF_ALLOC != 0 && s.Size > 0 && addr >= s.Addr && addr < s.Addr+s.Size {
			return s.Name, addr - s.Addr, true
		}
	}
	return "", 0, false
}

// relocate applies the S+A relocations of a relocatable object (a .ko)
// to a copy of one of its debug sections, as debug/elf does for the
// sections it reads itself.
func (img *Image) relocate(target *elf.Section, b []byte) error {
	ef := img.ELF
	if ef.Machine != elf.EM_X86_64 {
		return nil
	}
	var syms []elf.Symbol
	for _, rs := range ef.Sections {
		if rs.Type != elf.SHT_RELA || int(rs.Info) >= len(ef.Sections) || ef.Sections[rs.Info] != target {
			continue
		}
		if syms == nil {
			var err error
			if syms, err = ef.Symbols(); err != nil {
				return err
			}
		}
		err := forRela(ef, rs, syms, func(off uint64, typ elf.R_X86_64, _ uint64, sym elf.Symbol, add int64) {
			if sym.Section == elf.SHN_UNDEF || sym.Section >= elf.SHN_LORESERVE {
				return
			}
			// A symbol's value is an offset in its section, which
			// layOut has given an address.
			v := uint64(int64(sym.Value) + add)
			if int(sym.Section) < len(ef.Sections) {
				v += ef.Sections[sym.Section].Addr
			}
			switch typ {
			case elf.R_X86_64_64:
				if off+8 <= uint64(len(b)) {
					ef.ByteOrder.PutUint64(b[off:], v)
				}
			case elf.R_X86_64_32:
				if off+4 <= uint64(len(b)) {
					ef.ByteOrder.PutUint32(b[off:], uint32(v))
				}
			}
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// forRela calls fn for each entry of the SHT_RELA section rs whose
// symbol is in syms, with its symbol's number (from 1) and the symbol.
func forRela(ef *elf.File, rs *elf.Section, syms []elf.Symbol, fn func(off uint64, typ elf.R_X86_64, symNo uint64, sym elf.Symbol, add int64)) error {
	rela, err := rs.Data()
	if err != nil {
		return err
	}
	for ; len(rela) >= 24; rela = rela[24:] {
		off := ef.ByteOrder.Uint64(rela)
		info := ef.ByteOrder.Uint64(rela[8:])
		add := int64(ef.ByteOrder.Uint64(rela[16:]))
		symNo, typ := info>>32, elf.R_X86_64(info&0xffffffff)
		if symNo == 0 || symNo > uint64(len(syms)) {
			continue
		}
		fn(off, typ, symNo, syms[symNo-1], add)
	}
	return nil
}

// relocateText copies the code sections of a relocatable object and
// applies their relocations, as the module loader would at layOut's
// addresses: a call or jump to a function of the module then goes
// there, an access to its data names the address its DWARF gives, and
// a call or jump out of the module (to __x86_return_thunk, __fentry__,
// an exported function) leaves the code, at an address of its own above
// the module's (externBase). Without them every such displacement is
// 0, a jump to the next instruction.
func (img *Image) relocateText() error {
	ef := img.ELF
	if ef.Machine != elf.EM_X86_64 {
		return nil
	}
	end := uint64(ModuleBase)
	for _, s := range ef.Sections {
		if s.Flags&elf.SHF_ALLOC != 0 && s.Addr+s.Size > end {
			end = s.Addr + s.Size
		}
	}
	externBase := (end + 0xfffff) &^ 0xfffff
	var syms []elf.Symbol
	img.text = map[int][]byte{}
	for _, rs := range ef.Sections {
		if rs.Type != elf.SHT_RELA || int(rs.Info) >= len(ef.Sections) {
			continue
		}
		target := ef.Sections[rs.Info]
		const code = elf.SHF_ALLOC | elf.SHF_EXECINSTR
		if target.Flags&code != code || target.Type != elf.SHT_PROGBITS || target.Size == 0 {
			continue
		}
		if syms == nil {
			var err error
			if syms, err = ef.Symbols(); err != nil {
				return err
			}
		}
		b, err := target.Data()
		if err != nil {
			return err
		}
		err = forRela(ef, rs, syms, func(off uint64, typ elf.R_X86_64, symNo uint64, sym elf.Symbol, add int64) {
			var v uint64
			switch {
			case sym.Section == elf.SHN_UNDEF || sym.Section >= elf.SHN_LORESERVE:
				v = externBase + 16*symNo
			case int(sym.Section) < len(ef.Sections):
				v = ef.Sections[sym.Section].Addr + sym.Value
			default:
				return
			}
			v = uint64(int64(v) + add)
			p := target.Addr + off
			switch typ {
			case elf.R_X86_64_PC32, elf.R_X86_64_PLT32:
				if off+4 <= uint64(len(b)) {
					ef.ByteOrder.PutUint32(b[off:], uint32(v-p))
				}
			case elf.R_X86_64_32, elf.R_X86_64_32S:
				if off+4 <= uint64(len(b)) {
					ef.ByteOrder.PutUint32(b[off:], uint32(v))
				}
			case elf.R_X86_64_64:
				if off+8 <= uint64(len(b)) {
					ef.ByteOrder.PutUint64(b[off:], v)
				}
			}
		})
		if err != nil {
			return err
		}
		img.text[int(rs.Info)] = b
	}
	return nil
}

// ReadText returns the bytes of the allocated section holding
// [addr, addr+n), or nil. They are the mapping's: see the package doc.
func (img *Image) ReadText(addr, n uint64) []byte {
	for i, s := range img.ELF.Sections {
		if s.Flags&elf.SHF_ALLOC == 0 || s.Type != elf.SHT_PROGBITS {
			continue
		}
		if b, ok := img.text[i]; ok {
			if addr >= s.Addr && addr+n <= s.Addr+uint64(len(b)) {
				return b[addr-s.Addr : addr-s.Addr+n]
			}
			continue
		}
		if addr >= s.Addr && addr+n <= s.Addr+s.Size && s.Offset+s.Size <= uint64(len(img.mapping)) {
			o := s.Offset + addr - s.Addr
			return img.mapping[o : o+n]
		}
	}
	return nil
}

// Code tells the code of an executable image that can run from code the
// linker left behind dead, whose DWARF still describes it as a function:
//
//   - a __weak definition overridden by a strong one keeps its bytes in
//     .text (without -ffunction-sections the linker cannot drop them) but
//     loses its symbol: nothing calls it (126 in Debian's 6.1.0-56 vmlinux,
//     arch_cpu_idle among them);
//   - code of a section the linker discarded (--gc-sections, COMDAT
//     groups) has its DWARF addresses resolved to 0 or a tombstone,
//     outside any code section.
type Code struct {
	text    [][2]uint64     // allocated executable sections
	symAt   map[uint64]bool // addresses of function (and untyped) symbols
	global  map[string]bool // names of global and weak function symbols
	symbols bool            // the symbol table keeps local symbols (is not stripped of them)
}

// Code reads what Discarded needs from an executable image's sections
// and symbol table; nil for a relocatable module, whose addresses are
// section offsets until it is loaded.
func (img *Image) Code() (c *Code, err error) {
	defer mmapfile.Catch(&err, debug.SetPanicOnFault(true))
	ef := img.ELF
	if ef.Type == elf.ET_REL {
		return nil, nil
	}
	c = &Code{symAt: map[uint64]bool{}, global: map[string]bool{}}
	for _, s := range ef.Sections {
		if s.Flags&(elf.SHF_ALLOC|elf.SHF_EXECINSTR) == elf.SHF_ALLOC|elf.SHF_EXECINSTR && s.Type == elf.SHT_PROGBITS {
			c.text = append(c.text, [2]uint64{s.Addr, s.Addr + s.Size})
		}
	}
	syms, err := ef.Symbols()
	if err != nil && !errors.Is(err, elf.ErrNoSymbols) {
		return nil, img.Explain(fmt.Errorf("reading the symbol table: %w", err))
	}
	for _, s := range syms {
		typ, bind := elf.ST_TYPE(s.Info), elf.ST_BIND(s.Info)
		if typ == elf.STT_FILE {
			c.symbols = true // strip --discard-all removes these
		}
		if typ != elf.STT_FUNC && typ != elf.STT_NOTYPE || s.Section == elf.SHN_UNDEF {
			continue
		}
		c.symAt[s.Value] = true
		if typ == elf.STT_FUNC && bind != elf.STB_LOCAL {
			c.global[s.Name] = true
		}
	}
	return c, nil
}

// Discarded reports whether the function name whose DWARF puts its entry
// at entry is dead code (see Code). A function is never called dead for
// want of a symbol when the symbol table has been stripped of local ones
// (it has no STT_FILE symbols).
func (c *Code) Discarded(entry uint64, name string) bool {
	if c == nil {
		return false
	}
	if !slices.ContainsFunc(c.text, func(r [2]uint64) bool { return entry >= r[0] && entry < r[1] }) {
		return true
	}
	return c.symbols && !c.symAt[entry] && c.global[name]
}
