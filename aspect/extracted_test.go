package aspect

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// The figures as the PDF extraction printed them (typos kept) must be
// rejected at the token the typo is in (testdata/figures/README.md).
func TestFiguresAsExtracted(t *testing.T) {
	tests := []struct{ file, at, msg string }{
		{"fig4_1", "14:23", "bare '&'"},
		{"fig5_4", "8:47", "AND at the end of the pointcut"},
		{"fig5_6", "9:39", "usage: local_var(LOCAL, VAR)"},
		{"fig5_10", "14:7", "self-closing"},
		{"fig5_11", "12:7", "did you mean <xin_move>?"},
	}
	for _, tt := range tests {
		path := "testdata/figures/as_extracted/" + tt.file + ".klasy"
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		_, diags := Load(path, src)
		if len(diags) != 1 {
			t.Errorf("%s: want one diagnostic, got %v", path, diags)
			continue
		}
		d := diags[0]
		if got := fmt.Sprintf("%d:%d", d.Pos.Line, d.Pos.Col); got != tt.at || !strings.Contains(d.Msg, tt.msg) {
			t.Errorf("%s: got %s, want %s: ...%s...", path, d, tt.at, tt.msg)
		}
	}
}
