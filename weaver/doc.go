// Package weaver weaves aspects into a running Linux kernel: it resolves
// pointcuts to join points in the kernel image (dwarfmap), generates an
// advice module in C with one trampoline per hook (gen.go), builds it
// with kbuild against the kernel's headers and loads it next to the
// runtime module (weaver/runtime), which registers the hooks through the
// kernel's kprobes and keeps the trace buffer and the aggregation maps.
// A <replace> advice becomes an ftrace-based kprobe that returns from
// the function at once with the advice's value (replace.go).
// A Session is one target kernel — a lab's, reached through its agent,
// or this machine's — whose running build has been checked against its
// image.
//
//	Plan / Resolve   aspect + image -> join points (no kernel touched)
//	Generate         join points -> advice module source
//	Weave            build, load, register: all or nothing
//	Drain            the records advice stored, symbolized
//	Stats            the maps advice aggregated into (COUNT, HIST, TIMER...)
//	Unweave          remove aspects, save their unread records
package weaver
