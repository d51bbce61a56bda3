// Package gen writes the advice module of an aspect's join points: C with
// one trampoline per hook, #line directives back to the aspect, the
// aggregation maps' declarations (agg.go), and the map from the
// compiler's errors back to the aspect's lines and columns.
package gen
