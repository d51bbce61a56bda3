// Package aspect parses, validates and prints klasy aspects: XML-tagged C
// with pointcuts (dissertation ch. 4.2, 5.2-5.4).
//
// Parse reads the XML layer (package xmlscan, scanned by hand so that
// every decoded byte keeps its offset in the file) into a File, checking
// the elements and attributes each element takes (file.go), and parses
// each <pointcut> with the participle grammar of pointcut.go, whose
// structs are the pointcut AST. Check (check.go) applies the language's rules and
// returns every violation as a Diagnostic at the offending token, printed
// FILE:LINE:COL: message. Load does both. Format prints a File back as
// an aspect.
//
// An aspect is UTF-8 text (Parse names UTF-16 and points at a NUL byte or
// invalid UTF-8); its lines end in LF, CR LF or CR. Readers bound a file
// to MaxFileSize bytes, and Parse refuses a pointcut over MaxPointcut
// before parsing it.
package aspect
