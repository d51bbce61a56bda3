package aspect

import (
	"os"
	"strings"
	"testing"
)

// TestProsePointcuts runs the pointcuts the dissertation's prose quotes,
// each with the verdict the prose gives (testdata/figures/prose_pointcuts.txt).
func TestProsePointcuts(t *testing.T) {
	data, err := os.ReadFile("testdata/figures/prose_pointcuts.txt")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for i, line := range strings.Split(string(data), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 3 {
			t.Fatalf("line %d: want VERDICT<TAB>POINTCUT<TAB>WHY, got %q", i+1, line)
		}
		n++
		_, diags := Load("prose.klasy", []byte(advice(f[1])))
		switch f[0] {
		case "valid", "extended":
			if len(diags) > 0 {
				t.Errorf("line %d: %s (%s) is valid, got:\n%v", i+1, f[1], f[2], diags)
			}
		case "invalid":
			if len(diags) == 0 {
				t.Errorf("line %d: %s (%s) is invalid, klasy accepts it", i+1, f[1], f[2])
			}
			for _, d := range diags {
				t.Logf("%s -> %s", f[1], d.Msg)
			}
		default:
			t.Fatalf("line %d: verdict %q", i+1, f[0])
		}
	}
	if n == 0 {
		t.Fatal("no cases")
	}
}
