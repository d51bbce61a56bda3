// Package suggest names the known name nearest to a misspelt one, for
// "did you mean" hints.
package suggest
