// Package joinpoint holds the types passed between the weaver's stages:
// a join point (where and when an advice runs, and the context values it
// is given), the hooks join points are grouped into, why the kernel would
// refuse a hook, what a resolve warns of, and the statistics of hooked
// accesses that klasy list and weave print.
package joinpoint
