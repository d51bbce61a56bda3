// Package dwarfmap indexes a kernel image's ELF and DWARF: file:line to
// addresses, functions and their inlined copies, struct layouts, and where
// each variable lives at a PC.
//
// KLASY resolved pointcuts through two daemons over precomputed tables
// because "without calculating before weaving, weaving will be too slow
// to use" (dissertation 4.3.2). dwarfmap does the same with a file:
//
//   - Build scans a vmlinux or .ko (opened by elfimage) once: compilation
//     units in parallel, line tables through lineprog, DIEs through
//     diescan, a scanner that decodes only what the index needs
//     (tablebuild). The result is flat arrays of fixed-size records
//     (table), which this package queries.
//   - The arrays are saved under
//     $KLASY_CACHE/dwarfmap/<build-id>-<size>.v<format>.idx and mapped
//     back on the next run: a load checks the header, not a parse
//     (cachefile); each query checks only the sections, or chunks of the
//     line table, that it reads, when it first reads them (cached.go).
//     Writers rename complete temporary files, so concurrent builders are
//     safe; damaged or stale files are rebuilt, never used; temporary
//     files of killed builders are removed by the next build.
//   - Copies of functions whose code never runs (__weak definitions the
//     linker overrode, code of discarded sections: elfimage.Code) are
//     marked in the index and left out of its sort orders, so that no
//     query offers them, their inlined copies or their lines; Discarded
//     lists them.
//   - Image and index are read through shared mappings (mmapfile): the
//     queries that return errors turn a file truncated under them into
//     "FILE changed while it was read"; callers of the others (Funcs,
//     FuncAt, ...) on an index loaded from the cache arm their goroutine
//     with mmapfile.Catch, as klasy's commands do.
//   - Queries that need more than the index decode one compilation unit
//     on demand with debug/dwarf: variables and their locations (vars.go,
//     with delve's godwarf for the function's tree, dwvar for the
//     variables in scope and loc for location expressions, location lists
//     and CFA rules), struct layouts (structs.go, with dwtype).
//   - Basic blocks come from decoding a function with x86code; they decide
//     KLASY's nearest-line rule for lines the compiler left without code
//     (blocks.go).
//
// Callers import this package alone: Load (or Build), and the queries of
// an Index and of its Batch.
package dwarfmap
