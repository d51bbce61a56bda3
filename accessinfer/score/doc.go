// Package score measures accessinfer's inference against the plugin's
// records in .debug_klasy on an image that has both: precision and
// recall per struct and in total (Compare, PrintScores; see Score for
// how an instruction is matched to the plugin's source-level records).
// Its tests hold the built kernel to floors, BenchmarkInferVsPlugin
// prints the table with the inference time, and TestDiagnose writes
// every disagreement with its context, to sort them into classes.
package score
