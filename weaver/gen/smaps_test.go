package gen

import (
	"strings"
	"testing"

	"github.com/klasy/klasy/weaver/joinpoint"
)

// The module numbers the shared maps its advice names (not those in
// comments or strings) and gives their names to the runtime.
func TestSharedMapsGenerated(t *testing.T) {
	f := aggAspect(t, "MAP_SET(qtime, 1, current->pid); /* MAP_SET(no, 1, 2) */", "u64 t = MAP_GET(qtime, 3) + MAP_GET_OR( last , 0, 4);\nMAP_DELETE(gone, 5); pr_info(\"MAP_GET(nor, 1)\");")
	jps := []*joinpoint.JoinPoint{{Advice: 1, Kind: joinpoint.Kprobe, Addr: 0x1000, Function: "f", File: "f.c", Line: 1, Entry: true}}
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
