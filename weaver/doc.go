// Package weaver resolves pointcuts to join points in a kernel image,
// generates the advice module and splices its hooks through kprobes.
//
// Nothing is implemented yet: it waits for the aspect, dwarfmap and lab
// packages it is built on.
package weaver
