package gen

import (
	"fmt"
	"regexp"
	"strconv"
)

// Shared maps: MAP_SET(name, v, key...), MAP_GET(name, key...),
// MAP_GET_OR(name, dflt, key...), MAP_DELETE(name, key...) in any advice
// of the aspect (klasy_rt.h). The module numbers the aspect's names
// and gives them to the runtime, which keeps the maps.

// sharedMapsMax is KLASY_SMAP_MAX: the names one aspect may use.
const sharedMapsMax = 8

var sharedMapMacro = regexp.MustCompile(`\bMAP_(?:SET|GET|GET_OR|DELETE|SIZE)\s*\(\s*([A-Za-z_][A-Za-z0-9_]*)`)

// sharedMapSize is MAP_SIZE(name, n): the keys map name holds.
var sharedMapSize = regexp.MustCompile(`\bMAP_SIZE\s*\(\s*([A-Za-z_][A-Za-z0-9_]*)\s*,\s*([^,)]*?)\s*\)`)

// Bounds of a shared map's MAP_SIZE (KLASY_SMAP_ENTRIES is the default,
// KLASY_SMAP_MAX_ENTRIES the most).
const (
	sharedMapDefault = 4096
	sharedMapMaxKeys = 65536
)

// SharedMaps are the shared maps the advice of the aspect names, in
// order of first use (uses in comments and strings do not count).
func (g *cgen) sharedMaps() []string {
	return namesUsed(g.m.file, sharedMapMacro)
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
	g.numberNames("__klasy_map_", names)
	g.p("static const char *const klasy_smap_names[] = {")
	for _, n := range names {
		g.p("\t%s,", cString(n))
	}
	g.p("};")
	sizes, err := g.sharedMapSizes(names)
	if err != nil {
		return err
	}
	if sizes != nil {
		g.p("static const u32 klasy_smap_sizes[] = {")
		for _, n := range sizes {
			g.p("\t%d,", n)
		}
		g.p("};")
	}
	return nil
}

// sharedMapSizes are the keys each map holds, by MAP_SIZE(name, n) (0:
// the default); nil when no advice says.
func (g *cgen) sharedMapSizes(names []string) ([]int, error) {
	size := map[string]int{}
	for _, a := range g.m.file.Advice {
		for _, m := range sharedMapSize.FindAllStringSubmatch(cCode(a.Body.S), -1) {
			n, err := strconv.ParseUint(m[2], 0, 32)
			if err != nil || n < 1 || n > sharedMapMaxKeys {
				return nil, fmt.Errorf("MAP_SIZE(%s, %s): want a number of keys from 1 to %d (default %d)", m[1], m[2], sharedMapMaxKeys, sharedMapDefault)
			}
			if old, ok := size[m[1]]; ok && old != int(n) {
				return nil, fmt.Errorf("MAP_SIZE(%s, %d) and MAP_SIZE(%s, %d): a map has one size", m[1], old, m[1], n)
			}
			size[m[1]] = int(n)
		}
	}
	if len(size) == 0 {
		return nil, nil
	}
	out := make([]int, len(names))
	for i, n := range names {
		out[i] = size[n]
	}
	return out, nil
}

// sharedMapField sets the aspect's shared maps in struct klasy_aspect.
func (g *cgen) sharedMapField() {
	if len(g.sharedMaps()) > 0 {
		g.p("\t.nsmaps = ARRAY_SIZE(klasy_smap_names),")
		g.p("\t.smap_names = klasy_smap_names,")
		if sizes, _ := g.sharedMapSizes(g.sharedMaps()); sizes != nil {
			g.p("\t.smap_sizes = klasy_smap_sizes,")
		}
	}
}
