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
