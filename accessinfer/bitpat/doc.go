// Package bitpat finds, in a block of x86-64 instructions, how code
// reads and writes bitfields: the load of a storage unit whose bits the
// instructions after it pick out (shr, and, test, bt, a compare of the
// masked value), the load-modify-store sequences that write some of its
// bits (and with a mask, or the new bits from a register or memory,
// store back), and the direct forms on memory (test, and, or, bt*).
// accessinfer names a bitfield member by these bits.
package bitpat
