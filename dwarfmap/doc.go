// Package dwarfmap indexes a kernel image's ELF and DWARF: file:line to
// addresses, functions and their inlined copies, struct layouts, and where
// each variable lives at a PC.
//
// KLASY resolved pointcuts through two daemons over precomputed tables
// because "without calculating before weaving, weaving will be too slow
// to use" (dissertation 4.3.2). dwarfmap does the same with a file:
//
//   - Build scans a vmlinux or .ko once: compilation units in parallel,
//     line tables through debug/dwarf, DIEs through a scanner that decodes
//     only what the index needs (scan.go). The result is flat arrays of
//     fixed-size records (index.go).
//   - The arrays are saved under $KLASY_CACHE/dwarfmap/<build-id>.idx and
//     mapped back on the next run: a load checks the header, not a parse
//     (cache.go); each query checks only the sections, or chunks of the
//     line table, that it reads, when it first reads them. Writers rename
//     complete temporary files, so concurrent builders are safe; damaged
//     or stale files are rebuilt, never used.
//   - Queries that need more than the index (variables and their
//     locations, struct layouts) decode one compilation unit on demand with
//     debug/dwarf and delve's godwarf (scopes), loclist (location lists),
//     op (expressions) and frame (the CFA from .debug_frame) packages.
//   - Basic blocks come from decoding a function with x86asm; they decide
//     KLASY's nearest-line rule for lines the compiler left without code.
package dwarfmap
