// Package runtime holds the kernel side of klasy: the runtime module
// (klasy_runtime.ko) that every advice module registers its hooks with,
// and klasy_rt.h, the ABI between the two. The sources are embedded so
// that klasy can build the module with kbuild against any target's
// headers; weaver/records reads what the module shows in debugfs.
package runtime

import "embed"

// Sources holds the runtime's C files (klasy_core.c, klasy_tp.c for
// tracepoint hooks, klasy_fops.c and klasy_direct.c for entry and after
// hooks on ftrace, klasy_agg.c and klasy_internal.h for aggregation,
// klasy_stack.c for STACK_ID's table, klasy_flow*.[ch] for the flow
// tables, linked by Kbuild), klasy_rt.h and Kbuild: build them with
// kbuild.Build. Advice modules include klasy_rt.h and build with the
// runtime's Module.symvers in kbuild.Options.ExtraSymbols
// (KBUILD_EXTRA_SYMBOLS), so the kernel orders unloading.
//
//go:embed *.c *.h Kbuild
var Sources embed.FS

const (
	// ModuleName is the runtime's name in /proc/modules.
	ModuleName = "klasy_runtime"
	// Header is the ABI header advice modules include.
	Header = "klasy_rt.h"
	// ABIVersion is KLASY_ABI_VERSION in klasy_rt.h, shown in status as abi=N.
	ABIVersion = 19

	// DebugfsDir is the runtime's directory in the guest's debugfs.
	DebugfsDir = "/sys/kernel/debug/klasy"
	// RecordsPath consumes whole records on read (weaver/records.Decode).
	RecordsPath = DebugfsDir + "/records"
	// StatusPath is the runtime, aspects and hooks as text
	// (weaver/records.ParseStatus).
	StatusPath = DebugfsDir + "/status"
	// StatsPath is the aspects' aggregation maps, merged over the CPUs,
	// as text (weaver/records.ParseStats).
	StatsPath = DebugfsDir + "/stats"
	// FlowIDsPath is what get_new_flowid counted, one line:
	// "wraps=N skipped=N none=N" (IDs passed over as live, calls that
	// found no free ID).
	FlowIDsPath = DebugfsDir + "/flow_ids"
	// StacksPath is the kernel stacks advice saved with STACK_ID(), by
	// id (weaver/records.ParseStacks).
	StacksPath = DebugfsDir + "/stacks"

	// BufferKBParam is the module parameter for the trace buffer per CPU
	// in KiB, between BufferKBMin and BufferKBMax (default 1024).
	BufferKBParam = "buffer_kb"
	BufferKBMin   = 8
	BufferKBMax   = 64 * 1024
)
