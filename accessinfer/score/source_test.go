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

func TestMemberMacro(t *testing.T) {
	for _, tc := range []struct {
		line          string
		macro, member string
	}{
		{"#define sk_reuseport\t\t__sk_common.skc_reuseport", "sk_reuseport", "skc_reuseport"},
		{"#define inet_daddr\t\tsk.__sk_common.skc_daddr /* comment */", "inet_daddr", "skc_daddr"},
		{"#define tw_dport\t\t__tw_common.skc_dport", "tw_dport", "skc_dport"},
		{"#define p_dev p->dev", "p_dev", "dev"},
		{"#define f(x) (x)->m", "", ""},
		{"#define BIT 0x10", "", ""},
		{"#define NAME other_name", "", ""},
	} {
		macro, member, _ := aliasOf([]byte(tc.line))
		if macro != tc.macro || member != tc.member {
			t.Errorf("%q: macro %q member %q, want %q %q", tc.line, macro, member, tc.macro, tc.member)
		}
	}
}

func TestGetterMacro(t *testing.T) {
	for _, tc := range []struct {
		line          string
		macro, member string
	}{
		{"#define skb_vlan_tag_present(__skb)\t((__skb)->vlan_present)", "skb_vlan_tag_present", "vlan_present"},
		{"#define f(x) (x)->m", "f", "m"},
		{"#define f(x) x->m /* c */", "f", "m"},
		{"#define f(x) ((y)->m)", "", ""},
		{"#define f(x, y) ((x)->m)", "", ""},
		{"#define f(x) ((x)->m + 1)", "", ""},
		{"#define f(x) ((x)->m.n)", "", ""},
	} {
		macro, member, _ := getterOf([]byte(tc.line))
		if macro != tc.macro || member != tc.member {
			t.Errorf("%q: macro %q member %q, want %q %q", tc.line, macro, member, tc.macro, tc.member)
		}
	}
}
