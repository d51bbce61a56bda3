// Package members reads C types from DWARF (typedefs and qualifiers
// stripped, struct and union members with their bit offsets) and finds
// the chain of named members an access of some bytes of an object falls
// on, as the klasy GCC plugin names them: anonymous members collapsed
// into their named container, an anonymous struct named by its nearest
// typedef, struct_group()'s union by its anonymous struct, a bitfield
// by the bits an instruction tests or changes, a union's member by the
// value's type, and nothing where the bytes do not decide (padding, a
// union the value does not tell, several members, a copy or an
// initializer of the whole).
package members
