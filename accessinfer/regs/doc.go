// Package regs says what an x86-64 instruction does with the general
// registers (reads, writes, a call's clobbers), by index in x86asm's
// 64-bit order (DWARF's register numbers mapped to it), and finds the short instruction patterns accessinfer's
// rules look for in a block: an address that reaches a rep stos or rep
// movs (an inlined memset or memcpy), two memory operands at one
// address (%rip-relative ones by where they point), a register a lea
// set to another plus a constant (two bases of one memcpy), a load whose
// register is next stored whole, a store of what a call returned.
package regs
