// Package kstack symbolizes the kernel stacks advice saves (STACK_ID,
// COUNT_STACK, STORE_STACK in klasy_rt.h): each running return address
// of the runtime's table becomes, through the KASLR slide and the
// image's DWARF index, its function and offset and file:line, with the
// functions inlined at that address as frames of their own (as
// addr2line -i); klasy's own frames (the advice module's, the kprobe,
// ftrace and tracepoint machinery that called it) are dropped from the
// top. It also writes a stack as bpftrace prints a kstack and as a line
// of the folded format flame graph tools read.
package kstack

import (
	"cmp"
	"debug/elf"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/klasy/klasy/dwarfmap"
	"github.com/klasy/klasy/weaver/records"
)

// Frame is one frame of a symbolized stack (records.Frame: records
// keep the frames of the stacks they hold).
type Frame = records.Frame

// Symbolizer turns running addresses of one kernel into frames.
type Symbolizer struct {
	X     *dwarfmap.Index // the running kernel's image; nil: addresses only
	Slide uint64          // running address minus image address
	b     *dwarfmap.Batch
	cache map[uint64][]Frame
	syms  []elf.Symbol // the image's code symbols by address, once needed
}

// New is a symbolizer over x (nil: frames are bare addresses).
func New(x *dwarfmap.Index, slide uint64) *Symbolizer {
	return &Symbolizer{X: x, Slide: slide, cache: map[uint64][]Frame{}}
}

// machinery are the prefixes of the kernel's functions that run a klasy
// handler rather than the probed code: they can only lead a stack saved
// without the probed registers (a tracepoint's), above the probed code.
var machinery = []string{
	"__traceiter_", "kprobe_", "__kprobe", "opt_pre_handler", "optimized_callback",
	"ftrace_", "arch_ftrace_", "__ftrace", "kretprobe_", "__kretprobe", "trampoline_handler",
	"rethook_", "arch_rethook", "exc_int3", "asm_exc_int3", "do_int3",
}

// Stack symbolizes addrs (innermost first, as the runtime saved them)
// and drops klasy's frames from the top: addresses outside the image
// (the advice module, ftrace's and kprobes' trampolines) and the
// kernel's functions that call handlers. Without an image nothing is
// known to be klasy's: every address stays.
func (s *Symbolizer) Stack(addrs []uint64) []Frame {
	var out []Frame
	top := s.X != nil
	for i, a := range addrs {
		fs := s.frames(a, i > 0)
		if top && (fs[0].Func == "" || isMachinery(fs[len(fs)-1].Func)) {
			continue
		}
		top = false
		out = append(out, fs...)
	}
	return out
}

func isMachinery(fn string) bool {
	for _, p := range machinery {
		if strings.HasPrefix(fn, p) {
			return true
		}
	}
	return false
}

// frames symbolizes one address: the inlined functions there, innermost
// first, then the out-of-line one. A return address (ret) is looked up
// one byte back, in the call it returns from, as addr2line users do.
func (s *Symbolizer) frames(a uint64, ret bool) []Frame {
	key := a << 1
	if ret {
		key |= 1
	}
	if fs, ok := s.cache[key]; ok {
		return fs
	}
	fs := s.lookup(a, ret)
	s.cache[key] = fs
	return fs
}

func (s *Symbolizer) lookup(a uint64, ret bool) []Frame {
	bare := []Frame{{Addr: a}}
	if s.X == nil {
		return bare
	}
	img := a - s.Slide
	at := img
	if ret {
		at--
	}
	fi, ok := s.X.FuncAt(at)
	if !ok {
		// Assembly has no DWARF function (entry_SYSCALL_64's labels):
		// the ELF symbol at or before it, as kallsyms names it.
		if name, off, ok := s.symbolAt(img, at); ok {
			return []Frame{{Addr: a, Func: name, Offset: off}}
		}
		return bare
	}
	out := Frame{Addr: a, Func: fi.Name}
	if img >= fi.Entry {
		out.Offset = img - fi.Entry
	}
	file, line, _ := s.X.LineOf(at)
	if s.b == nil {
		s.b, _ = s.X.NewBatch()
	}
	var fs []Frame
	if s.b != nil {
		// Innermost first: each copy's line is where it was, the next
		// one out is at the copy's call. The copies at an address nest,
		// and a nested DIE comes after its parent: by size (CopiesAt's
		// order) copies of one size would go in either order.
		cs := s.b.CopiesAt(at)
		slices.SortStableFunc(cs, func(x, y dwarfmap.Instance) int { return cmp.Compare(y.DIE, x.DIE) })
		for _, c := range cs {
			fs = append(fs, Frame{Addr: a, Func: c.Name, File: file, Line: line, Inlined: true})
			file, line = c.CallFile, c.CallLine
		}
	}
	out.File, out.Line = file, line
	return append(fs, out)
}

// Lines are the frames as bpftrace prints a kstack, one per line after
// indent, each with its source line and "(inlined)".
func Lines(fs []Frame, indent string) string {
	var b strings.Builder
	for _, f := range fs {
		b.WriteString(indent + f.Name())
		if w := f.Where(); w != "" {
			b.WriteString(" " + w)
		}
		if f.Inlined {
			b.WriteString(" (inlined)")
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// Folded is the stack as the folded format names it, root first:
// "entry_SYSCALL_64;do_syscall_64;...;leaf" (functions only, as
// stackcollapse scripts print them; ';' and spaces never occur in C
// names, and addresses stand for frames of no function).
func Folded(fs []Frame) string {
	names := make([]string, len(fs))
	for i, f := range fs {
		n := f.Func
		if n == "" {
			n = fmt.Sprintf("0x%x", f.Addr)
		}
		names[len(fs)-1-i] = n
	}
	return strings.Join(names, ";")
}

// Table is one kernel's stacks, symbolized as they are asked for.
type Table struct {
	Stacks *records.Stacks
	Sym    *Symbolizer
}

// Frames are stack id's frames; ok is false for an id the table does
// not hold (the table was full when it was saved).
func (t *Table) Frames(id uint64) (fs []Frame, ok bool) {
	if t == nil || t.Stacks == nil {
		return nil, false
	}
	addrs, ok := t.Stacks.Frames[id]
	if !ok {
		return nil, false
	}
	return t.Sym.Stack(addrs), true
}

// symbolAt names image address img (looked up at at) by the image's ELF
// symbols: the last code symbol at or before it, in a section of code.
func (s *Symbolizer) symbolAt(img, at uint64) (string, uint64, bool) {
	if s.syms == nil {
		s.syms = codeSymbols(s.X.Image().ELF)
	}
	// A module's address, past the image's code, is no symbol's.
	if !inCode(s.X.Image().ELF, at) {
		return "", 0, false
	}
	i := sort.Search(len(s.syms), func(i int) bool { return s.syms[i].Value > at }) - 1
	if i < 0 {
		return "", 0, false
	}
	sym := s.syms[i]
	if sym.Size > 0 && at >= sym.Value+sym.Size {
		return "", 0, false
	}
	return sym.Name, img - sym.Value, true
}

// codeSymbols are f's function and untyped symbols in sections of code,
// by address (empty, not nil, when it has none).
func codeSymbols(f *elf.File) []elf.Symbol {
	out := []elf.Symbol{}
	syms, err := f.Symbols()
	if err != nil || f.Type == elf.ET_REL {
		return out
	}
	for _, sym := range syms {
		typ := elf.ST_TYPE(sym.Info)
		if sym.Name == "" || (typ != elf.STT_FUNC && typ != elf.STT_NOTYPE) || int(sym.Section) >= len(f.Sections) ||
			sym.Section == elf.SHN_UNDEF || f.Sections[sym.Section].Flags&elf.SHF_EXECINSTR == 0 {
			continue
		}
		out = append(out, sym)
	}
	slices.SortStableFunc(out, func(x, y elf.Symbol) int { return cmp.Compare(x.Value, y.Value) })
	return out
}

// inCode says whether addr is in one of f's sections of code.
func inCode(f *elf.File, addr uint64) bool {
	for _, sec := range f.Sections {
		if sec.Flags&elf.SHF_EXECINSTR != 0 && sec.Flags&elf.SHF_ALLOC != 0 && addr >= sec.Addr && addr < sec.Addr+sec.Size {
			return true
		}
	}
	return false
}
