package score

import (
	"slices"
	"testing"
)

func TestCalledNames(t *testing.T) {
	for _, tc := range []struct {
		text string
		want []string
	}{
		{"\treturn hstate_inode(file_inode(f));", []string{"hstate_inode", "file_inode"}},
		{"if (skb_cloned (skb) && x->len)", []string{"if", "skb_cloned"}},
		{"\tint a = b[3] + 0x1f(;", nil},
		{"foo", nil},
		{"f2(x)", []string{"f2"}},
	} {
		got := calledNames([]byte(tc.text))
		if !slices.Equal(got, tc.want) {
			t.Errorf("calledNames(%q) = %q, want %q", tc.text, got, tc.want)
		}
	}
}
