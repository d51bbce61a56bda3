// Package ctxvalue computes an advice's context values at a hook: a
// small stack program over the registers the kprobe saved, compiled from
// a variable's DWARF location (DWARF 5 §2.5/2.6), and its C for the
// advice module, which reads memory only through
// copy_from_kernel_nofault.
package ctxvalue
