package tracepoints

import (
	"debug/elf"
	"encoding/binary"
	"strings"

	"github.com/klasy/klasy/dwarfmap"
)

// Symbol names TRACE_EVENT gives an event NAME of system SYS: its
// struct trace_event_call event_NAME points (member class) at its
// template's struct trace_event_class, whose first member, system, points
// at str__SYS__trace_system_name.
const (
	eventPrefix  = "event_"
	systemPrefix = "str__"
	systemSuffix = "__trace_system_name"
)

// systems maps each event of x's image to its TRACE_SYSTEM, as tracefs
// names it (raw_syscalls for sys_enter, declared in syscalls.h), by
// following those pointers in the image's data. Events it cannot follow
// (a tracepoint without an event, an image without symbols) are left out:
// their header's name stands in.
func systems(x *dwarfmap.Index) map[string]string {
	img := x.Image()
	if img == nil || img.Path == "" {
		return nil
	}
	call, err := x.Struct("trace_event_call")
	if err != nil {
		return nil
	}
	classOff := int64(-1)
	for _, m := range call.Members {
		if m.Name == "class" && m.Depth == 0 {
			classOff = m.Offset
		}
	}
	f, err := elf.Open(img.Path)
	if err != nil || classOff < 0 {
		return nil
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil {
		return nil
	}
	events := map[string]uint64{}
	names := map[uint64]string{} // str__SYS__trace_system_name by address
	for _, s := range syms {
		switch {
		case strings.HasPrefix(s.Name, systemPrefix) && strings.HasSuffix(s.Name, systemSuffix):
			names[s.Value] = strings.TrimSuffix(strings.TrimPrefix(s.Name, systemPrefix), systemSuffix)
		case strings.HasPrefix(s.Name, eventPrefix) && !strings.HasPrefix(s.Name, "event_class_"):
			events[strings.TrimPrefix(s.Name, eventPrefix)] = s.Value
		}
	}
	word := func(addr uint64) (uint64, bool) {
		for _, sec := range f.Sections {
			if sec.Type == elf.SHT_PROGBITS && addr >= sec.Addr && addr+8 <= sec.Addr+sec.Size {
				var b [8]byte
				if _, err := sec.ReadAt(b[:], int64(addr-sec.Addr)); err != nil {
					return 0, false
				}
				return binary.LittleEndian.Uint64(b[:]), true
			}
		}
		return 0, false
	}
	out := map[string]string{}
	for ev, addr := range events {
		class, ok := word(addr + uint64(classOff))
		if !ok {
			continue
		}
		str, ok := word(class) // trace_event_class.system, its first member
		if sys := names[str]; ok && sys != "" {
			out[ev] = sys
		}
	}
	return out
}
