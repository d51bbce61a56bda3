// Package accessjp places access join points (dissertation §4.2–4.3):
// from the plugin's records or, in an image built without the plugin,
// accessinfer's inferred accesses (each exact, on its instruction), with
// target(x) and local_var(v, x) bound at each hook. The plugin's records
// (.debug_klasy) say where each struct member is accessed: a source line
// of a function. The line's code is found in every copy of that
// function — its out-of-line bodies and every copy inlined elsewhere —
// through the line table, and each copy gets a join point in one of
// three tiers:
//
//   - exact: the line's instructions are decoded and exactly one
//     accesses the member: its memory operand's displacement falls on the
//     member (for a bitfield, on its storage unit), its kind fits the
//     access (a load for a read, a store for a write, a read-modify-write
//     for ++ and +=, lea for &), and when several do, the one whose base
//     register holds the base variable there (its DWARF location). before
//     advice runs before that instruction, after advice right after it,
//     with the context values taken before it;
//   - line: the line's is_stmt address(es), one per basic block, for
//     before advice, and the address after the line's last instruction in
//     the same block for after advice. A line without code in a copy
//     falls back to its statement's line (a multi-line condition, as the
//     plugin records it) and then to KLASY's nearest-line rule (§4.3.2);
//   - skipped, with the reason.
//
// within_function(G) selects the accesses written in G and those in
// code inlined into G: an inlined copy counts for the function the plugin
// recorded and for the out-of-line function its code landed in.
// within_file(F) likewise selects accesses written in F (the hook file
// of the record, or its function's file) and those whose code landed in
// a function of F. local_var(v, x) selects only the join points where v
// is in scope.
package accessjp
