package pattern

// MatchPath reports whether p matches path or a tail of it that starts
// after a '/'.
func MatchPath(p *Pattern, path string) bool {
	if p.Match(path) {
		return true
	}
	for i := 0; i < len(path); i++ {
		if path[i] == '/' && p.Match(path[i+1:]) {
			return true
		}
	}
	return false
}

// MatchAll reports whether every pattern matches one of names: a path
// (MatchPath) or, with funcs, a function name. No pattern: true.
func MatchAll(ps []*Pattern, funcs bool, names ...string) bool {
	for _, p := range ps {
		ok := false
		for _, n := range names {
			ok = ok || n != "" && (funcs && p.Match(n) || !funcs && MatchPath(p, n))
		}
		if !ok {
			return false
		}
	}
	return true
}
