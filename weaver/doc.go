// Package weaver weaves aspects into a running Linux kernel. A Session is
// one target kernel (weaver/target) whose running build has been checked
// against its image; on it:
//
//	Plan      parsed aspect -> join points (weaver/resolve; no kernel touched)
//	Prepare   join points -> advice module (weaver/gen), built with kbuild
//	          against the kernel's headers, with the runtime (weaver/runtime)
//	Load      load both; the runtime registers the hooks: all or nothing
//	Drain     the records advice stored, symbolized (weaver/records)
//	Stats     the maps advice aggregated into (COUNT, HIST, TIMER...)
//	Unweave   remove aspects, save their unread records
//
// weaver/multi does the same across the domains of a domains file,
// weaver/cover runs KernInst's live coverage on top of it.
package weaver
