// Package human writes klasy's numbers as a person reads them: a count
// with its noun, a duration in the unit that suits it, a value advice
// stored.
package human
