// Package aspect parses, validates and prints klasy aspects: XML-tagged C
// with pointcuts (dissertation ch. 4.2, 5.2-5.4).
package aspect
