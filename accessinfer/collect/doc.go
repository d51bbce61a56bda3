// Package collect gathers what many workers found, function by
// function, into one slice by address: a Slab that each function's
// results are copied into (a few large allocations instead of one per
// function), and Merge, which joins the functions' results, each by
// address already, into the order a stable sort of them all by address
// gives, without sorting them all.
package collect
