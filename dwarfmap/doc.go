// Package dwarfmap indexes a kernel image's ELF and DWARF: file:line to
// addresses, functions and their inlined copies, struct layouts, and where
// each variable lives at a PC.
package dwarfmap
