// Package linecode is a kernel or module image as the resolver reads its
// code: its index, refusals and plugin access records, the code of a
// source line in one copy of a function (rows, the instructions they
// own, code merged into another line), and where hooks on a line go
// (one per basic block holding an is_stmt row).
package linecode
