package gen

import (
	"strings"
	"testing"

	"github.com/klasy/klasy/aspect"
	"github.com/klasy/klasy/weaver/joinpoint"
)

// The module numbers the shared maps its advice names (not those in
// comments or strings) and gives their names to the runtime.
func TestSharedMapsGenerated(t *testing.T) {
	f := aggAspect(t, "MAP_SET(qtime, 1, current->pid); /* MAP_SET(no, 1, 2) */", "u64 t = MAP_GET(qtime, 3) + MAP_GET_OR( last , 0, 4);\nMAP_DELETE(gone, 5); pr_info(\"MAP_GET(nor, 1)\");")
	jps := []*joinpoint.JoinPoint{{Advice: 1, Kind: joinpoint.Kprobe, Addr: 0x1000, Function: "f", File: "f.c", Line: 1, Entry: true}}
	c := generatedC(t, f, jps)
	for _, want := range []string{
		"__klasy_map_qtime = 0,", "__klasy_map_last = 1,", "__klasy_map_gone = 2,",
		`static const char *const klasy_smap_names[] = {` + "\n\t\"qtime\",\n\t\"last\",\n\t\"gone\",\n};",
		".nsmaps = ARRAY_SIZE(klasy_smap_names),", ".smap_names = klasy_smap_names,",
	} {
		if !strings.Contains(c, want) {
			t.Errorf("generated C lacks %q", want)
		}
	}
	if strings.Contains(c, "__klasy_map_no") || strings.Contains(c, "__klasy_map_nor") {
		t.Error("a name in a comment or a string was numbered")
	}
}

// An aspect with more shared maps than the runtime keeps is refused
// before anything is built, naming them.
func TestSharedMapsTooMany(t *testing.T) {
	var b strings.Builder
	for i := range sharedMapsMax + 1 {
		b.WriteString("MAP_SET(m" + string(rune('a'+i)) + ", 1, 2);\n")
	}
	jps := []*joinpoint.JoinPoint{{Advice: 1, Kind: joinpoint.Kprobe, Addr: 0x1000, Function: "f", File: "f.c", Line: 1, Entry: true}}
	_, err := Generate(aggAspect(t, b.String()), jps, GenOptions{Path: "agg.klasy", RefAddr: 1})
	if err == nil || !strings.Contains(err.Error(), "an aspect may have 8") || !strings.Contains(err.Error(), "mi") {
		t.Errorf("Generate with %d shared maps: %v, want a refusal naming them", sharedMapsMax+1, err)
	}
}

// MAP_SIZE(name, n) gives the runtime each map's size; a bad one is
// refused before anything is built.
func TestSharedMapSize(t *testing.T) {
	jps := []*joinpoint.JoinPoint{{Advice: 1, Kind: joinpoint.Kprobe, Addr: 0x1000, Function: "f", File: "f.c", Line: 1, Entry: true}}
	c := generatedC(t, aggAspect(t, "MAP_SIZE(q, 16384);\nMAP_SET(a, 1, 2); MAP_SET(q, 1, 2);"), jps)
	for _, want := range []string{"static const u32 klasy_smap_sizes[] = {\n\t16384,\n\t0,\n};", ".smap_sizes = klasy_smap_sizes,"} {
		if !strings.Contains(c, want) {
			t.Errorf("generated C lacks %q", want)
		}
	}
	for body, want := range map[string]string{
		"MAP_SIZE(q, 0); MAP_SET(q, 1, 2);":                   "MAP_SIZE(q, 0): want a number of keys from 1 to 65536",
		"MAP_SIZE(q, 70000); MAP_SET(q, 1, 2);":               "MAP_SIZE(q, 70000)",
		"MAP_SIZE(q, N); MAP_SET(q, 1, 2);":                   "MAP_SIZE(q, N)",
		"MAP_SIZE(q, 10); MAP_SIZE(q, 20); MAP_SET(q, 1, 2);": "a map has one size",
	} {
		if _, err := Generate(aggAspect(t, body), jps, GenOptions{Path: "agg.klasy", RefAddr: 1}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Generate of %q: %v, want an error with %q", body, err, want)
		}
	}
}

// generatedC is the C of the module generated for f's advice at jps.
func generatedC(t *testing.T, f *aspect.File, jps []*joinpoint.JoinPoint) string {
	t.Helper()
	mod, err := Generate(f, jps, GenOptions{Path: "agg.klasy", RefAddr: 1})
	if err != nil {
		t.Fatal(err)
	}
	var c string
	for name, b := range mod.Files {
		if strings.HasSuffix(name, ".c") {
			c += string(b)
		}
	}
	return c
}
