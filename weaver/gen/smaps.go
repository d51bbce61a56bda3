package gen

import (
	"fmt"
	"regexp"
)

// Shared maps: MAP_SET(name, v, key...), MAP_GET(name, key...),
// MAP_GET_OR(name, dflt, key...), MAP_DELETE(name, key...) in any advice
// of the aspect (klasy_rt.h). The module numbers the aspect's names
// and gives them to the runtime, which keeps the maps.

// sharedMapsMax is KLASY_SMAP_MAX: the names one aspect may use.
const sharedMapsMax = 8

var sharedMapMacro = regexp.MustCompile(`\bMAP_(?:SET|GET|GET_OR|DELETE)\s*\(\s*([A-Za-z_][A-Za-z0-9_]*)`)

// SharedMaps are the shared maps the advice of the aspect names, in
// order of first use (uses in comments and strings do not count).
func (g *cgen) sharedMaps() []string {
	var names []string
	seen := map[string]bool{}
	for _, a := range g.m.file.Advice {
		for _, m := range sharedMapMacro.FindAllStringSubmatch(cCode(a.Body.S), -1) {
			if !seen[m[1]] {
				seen[m[1]] = true
				names = append(names, m[1])
			}
		}
	}
	return names
}

// sharedMapDecls numbers the aspect's shared maps and names them for
// the runtime.
func (g *cgen) sharedMapDecls() error {
	names := g.sharedMaps()
	if len(names) == 0 {
		return nil
	}
	if len(names) > sharedMapsMax {
		return fmt.Errorf("advice uses %d shared maps (MAP_SET/MAP_GET/MAP_DELETE names %v); an aspect may have %d", len(names), names, sharedMapsMax)
	}
	g.p("")
	g.p("/* The aspect's shared maps (MAP_SET, MAP_GET, MAP_DELETE). */")
	g.p("enum {")
	for i, n := range names {
		g.p("\t__klasy_map_%s = %d,", n, i)
	}
	g.p("};")
	g.p("static const char *const klasy_smap_names[] = {")
	for _, n := range names {
		g.p("\t%s,", cString(n))
	}
	g.p("};")
	return nil
}

// sharedMapField sets the aspect's shared maps in struct klasy_aspect.
func (g *cgen) sharedMapField() {
	if len(g.sharedMaps()) > 0 {
		g.p("\t.nsmaps = ARRAY_SIZE(klasy_smap_names),")
		g.p("\t.smap_names = klasy_smap_names,")
	}
}
