// Package collect gathers what many workers found, function by
// function, into one slice by address: Merge joins the functions'
// results, each by address already, into the order a stable sort of
// them all by address gives, without sorting them all.
package collect
