package elfimage

import (
	"debug/elf"
	"encoding/binary"
	"fmt"
	"runtime/debug"
	"sort"

	"github.com/klasy/klasy/internal/mmapfile"
)

// Reserved is code the kernel patches itself and so refuses kprobes on
// (kernel/kprobes.c check_kprobe_address_safe): jump label sites (a
// static branch's 2- or 5-byte nop or jump) and static call sites.
type Reserved struct {
	spans [][2]uint64 // [lo, hi), sorted by lo
	what  []string
	// jumps are the jump label sites with the target the kernel's jmp
	// there goes to when the static branch is taken.
	jumps map[uint64]uint64
	// ftrace are the ftrace sites (__mcount_loc): the call __fentry__
	// at a function's entry that the kernel makes a nop at boot, and a
	// kprobe there an ftrace-based one.
	ftrace map[uint64]bool
}

// The x86-64 layouts of the kernel's tables (include/linux/jump_label.h,
// include/linux/static_call_types.h): addresses relative to the field.
const (
	jumpEntrySize       = 16 // s32 code, s32 target, long key
	staticCallSiteSize  = 8  // s32 addr, s32 key
	patchedInstructions = 5  // the longest form the kernel writes there
)

// Reserved reads the jump label and static call tables of a linked
// kernel image through their __start_/__stop_ symbols; nil, nil for an
// image without them (a module, whose tables are relocated at load).
func (img *Image) Reserved() (r *Reserved, err error) {
	defer mmapfile.Catch(&err, debug.SetPanicOnFault(true))
	if img.ELF.Type == elf.ET_REL {
		return nil, nil
	}
	syms, err := img.ELF.Symbols()
	if err != nil {
		return nil, nil // no symbols, no tables to find
	}
	at := map[string]uint64{}
	for _, s := range syms {
		switch s.Name {
		case "__start___jump_table", "__stop___jump_table", "__start_static_call_sites", "__stop_static_call_sites",
			"__start_mcount_loc", "__stop_mcount_loc":
			at[s.Name] = s.Value
		}
	}
	r = &Reserved{jumps: map[uint64]uint64{}, ftrace: map[uint64]bool{}}
	table := func(start, stop string, size uint64, what string) error {
		lo, ok1 := at[start]
		hi, ok2 := at[stop]
		if !ok1 || !ok2 || hi <= lo {
			return nil
		}
		b := img.ReadText(lo, hi-lo)
		if b == nil || (hi-lo)%size != 0 {
			return fmt.Errorf("%s..%s (%#x..%#x) is not readable entries of %d bytes", start, stop, lo, hi, size)
		}
		for off := uint64(0); off < hi-lo; off += size {
			rel := int32(binary.LittleEndian.Uint32(b[off:]))
			code := lo + off + uint64(int64(rel))
			n := uint64(patchedInstructions)
			// A 2-byte nop (66 90) or short jmp (eb): the kernel's
			// arch_jump_entry_size reserves those 2 bytes only.
			if ins := img.ReadText(code, 2); size == jumpEntrySize && ins != nil && (ins[0] == 0x66 && ins[1] == 0x90 || ins[0] == 0xeb) {
				n = 2
			}
			r.spans = append(r.spans, [2]uint64{code, code + n})
			r.what = append(r.what, what)
			if size == jumpEntrySize {
				rel := int32(binary.LittleEndian.Uint32(b[off+4:]))
				r.jumps[code] = lo + off + 4 + uint64(int64(rel))
			}
		}
		return nil
	}
	if err := table("__start___jump_table", "__stop___jump_table", jumpEntrySize, "a jump label (static branch) site"); err != nil {
		return nil, err
	}
	if err := table("__start_static_call_sites", "__stop_static_call_sites", staticCallSiteSize, "a static call site"); err != nil {
		return nil, err
	}
	if lo, hi := at["__start_mcount_loc"], at["__stop_mcount_loc"]; lo != 0 && hi > lo {
		if b := img.ReadText(lo, hi-lo); b != nil && (hi-lo)%8 == 0 {
			for off := 0; off < len(b); off += 8 {
				r.ftrace[binary.LittleEndian.Uint64(b[off:])] = true
			}
		}
	}
	idx := make([]int, len(r.spans))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool { return r.spans[idx[a]][0] < r.spans[idx[b]][0] })
	spans, what := make([][2]uint64, len(idx)), make([]string, len(idx))
	for i, j := range idx {
		spans[i], what[i] = r.spans[j], r.what[j]
	}
	r.spans, r.what = spans, what
	return r, nil
}

// At says what reserves addr ("" if nothing does).
func (r *Reserved) At(addr uint64) string {
	if r == nil {
		return ""
	}
	i := sort.Search(len(r.spans), func(i int) bool { return r.spans[i][0] > addr })
	for j := i - 1; j >= 0 && j >= i-4; j-- {
		if addr >= r.spans[j][0] && addr < r.spans[j][1] {
			return r.what[j]
		}
	}
	return ""
}

// JumpsIn returns the jump label sites in [lo, hi) with their targets:
// the kernel makes each a jmp to its target or a nop as the static
// branch is switched.
func (r *Reserved) JumpsIn(lo, hi uint64) map[uint64]uint64 {
	if r == nil {
		return nil
	}
	out := map[uint64]uint64{}
	i := sort.Search(len(r.spans), func(i int) bool { return r.spans[i][0] >= lo })
	for ; i < len(r.spans) && r.spans[i][0] < hi; i++ {
		if t, ok := r.jumps[r.spans[i][0]]; ok {
			out[r.spans[i][0]] = t
		}
	}
	return out
}

// FtraceSite reports whether addr is an ftrace site: the call of
// __fentry__ at a function's entry, a nop once the kernel has booted. A
// kprobe there is ftrace-based: registering one updates ftrace.
func (r *Reserved) FtraceSite(addr uint64) bool {
	return r != nil && r.ftrace[addr]
}

// Len is the number of reserved sites.
func (r *Reserved) Len() int {
	if r == nil {
		return 0
	}
	return len(r.spans)
}
