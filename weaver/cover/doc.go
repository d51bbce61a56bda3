// Package cover is KernInst's live coverage: from the hit counts of the
// block(...) hooks of a function, its blocks' and arcs' counts (arcs by
// flow conservation over x86code's graph) and gcov's line counts
// (cover.go), and the weave, count and unweave of klasy cover
// (coverrun.go).
package cover
