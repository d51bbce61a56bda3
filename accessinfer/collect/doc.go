// Package collect gathers what many workers found, function by
// function, into one slice by address: a Slab whose arrays each
// function's results are appended into (a few large allocations
// instead of one per function and a copy), and Merge, which joins the functions' results, each by
// address already, into the order a stable sort of them all by address
// gives, without sorting them all.
package collect
