// Package dwscan reads what accessinfer's tracking needs from one
// compilation unit's DWARF, in one pass over its DIEs (with dwarfmap's
// diescan, which decodes only the attributes asked for): the out-of-line
// functions with their ranges and parameters and the locals that can
// type an access, those of the copies inlined into them (with the file
// and line they were called from, the file named by the line table's
// header, read by dwarfmap/lineprog) and of lexical blocks, each with its location list (DWARF
// 2-4 .debug_loc and DWARF 5 .debug_loclists);
// the variables at fixed addresses (globals, statics, per-CPU variables
// at their offset in .data..percpu); each function's return type; and
// the few location expression shapes a variable living in one place
// has (Describe).
package dwscan
