package records

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klasy/klasy/internal/golden"
)

// TestParseStatsGolden parses each testdata/stats/NAME.txt (agg.txt is
// what the lab kernel printed for weaver/testdata/agg.klasy, its longest
// map cut to three keys) and compares the result with NAME.json.
func TestParseStatsGolden(t *testing.T) {
	txts, _ := filepath.Glob("testdata/stats/*.txt")
	if len(txts) == 0 {
		t.Fatal("no testdata/stats/*.txt")
	}
	for _, txt := range txts {
		name := strings.TrimSuffix(txt, ".txt")
		t.Run(filepath.Base(name), func(t *testing.T) {
			in, err := os.ReadFile(txt)
			if err != nil {
				t.Fatal(err)
			}
			s, err := ParseStats(in)
			if err != nil {
				t.Fatalf("ParseStats: %v", err)
			}
			got, _ := json.MarshalIndent(s, "", "\t")
			got = append(got, '\n')
			golden.Check(t, name+".json", string(got))
		})
	}
}

func TestParseStatsLabels(t *testing.T) {
	in, err := os.ReadFile("testdata/stats/agg.txt")
	if err != nil {
		t.Fatal(err)
	}
	s, err := ParseStats(in)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range s.Aspects[0].Maps {
		got = append(got, m.Label())
	}
	want := "calls orphan count:25 bytes least most hist:29 lhist:30 distinct sleep spin"
	if strings.Join(got, " ") != want {
		t.Errorf("labels %q, want %q", strings.Join(got, " "), want)
	}
}

func TestParseStatsErrors(t *testing.T) {
	const hdr = "stats abi=19 cpus=1\n"
	const asp = "aspect id=1 name=a maps=1 room=1 unclaimed=0 failed=0\n"
	const keyed = "map index=0 kind=count name=- advice=1 file=a.klasy line=3 keys=1 dropped=0\n"
	const hist = "map index=0 kind=hist name=h advice=1 file=a.klasy line=3 count=1 buckets=65\n"
	const timer = "map index=0 kind=timer name=t advice=1 file=a.klasy line=3 count=0 wall_sum=0 wall_min=0 wall_max=0 cpu_sum=0 cpu_min=0 cpu_max=0 no_start=0 dropped=0 nested=0 orphaned=0 inside=0 buckets=65\n"
	if _, err := ParseStats([]byte(hdr + asp + keyed + "key k=1 n=1 v=1\n")); err != nil {
		t.Fatalf("the valid base case fails: %v", err)
	}
	tests := []struct{ in, want string }{
		{"", "stats: empty"},
		{asp, `stats line 1: "aspect": want the stats line first`},
		{"stats abi=8 cpus=1\n", "runtime ABI 8, this klasy reads ABI 19"},
		{"stats abi=19\n", "no cpus="},
		{hdr + hdr, `stats line 2: "stats": want the stats line first, and only there`},
		{hdr + "bogus x=1\n", `unknown line kind "bogus"`},
		{hdr + "map index=0 kind=count name=- advice=1 file=a line=3 keys=0 dropped=0\n", "a map outside an aspect"},
		{hdr + asp, "aspect 1 has 0 map lines, its line says maps=1"},
		{hdr + asp + keyed, "map 0 has 0 key lines, its line says keys=1"},
		{hdr + asp + keyed + "key k=1 n=1 v=1\nkey k=1 n=1 v=1\n", "map 0 has 2 key lines, its line says keys=1"},
		{hdr + strings.Replace(asp, "maps=1", "maps=2", 1) + strings.Replace(keyed, "keys=1", "keys=2", 1) + "key k=2 n=1 v=1\nkey k=1 n=1 v=1\n" +
			strings.Replace(keyed, "index=0", "index=1", 1) + "key k=1 n=1 v=1\n", "key 1 after 2: want them merged and increasing"},
		{hdr + asp + strings.Replace(keyed, "index=0", "index=1", 1), "map index 1, want 0"},
		{hdr + asp + strings.Replace(keyed, "kind=count", "kind=avg", 1), "unknown kind=avg"},
		{hdr + asp + keyed + "key k=1 n=0 v=1\n", "key 1 with n=0"},
		{hdr + asp + keyed + "key k=-1 n=1 v=1\n", "k=-1: not a 64-bit decimal"},
		{hdr + asp + keyed + "key k=1 n=1 v=x\n", "v=x: not a signed 64-bit decimal"},
		{hdr + asp + keyed + "b i=1 n=1\n", "a b bucket outside a map that has them"},
		{hdr + asp + hist + "key k=1 n=1 v=1\n", "a key outside a count, sum, min or max map"},
		{hdr + asp + hist + "b i=65 n=1\n", "bucket 65 of 65"},
		{hdr + asp + hist + "w i=1 n=1\n", "a w bucket outside a map that has them"},
		{hdr + asp + strings.Replace(hist, "buckets=65", "buckets=64", 1), "buckets=64, want 65 for a hist"},
		{hdr + asp + "map index=0 kind=lhist name=- advice=1 file=a line=3 lo=0 hi=100 step=10 count=0 buckets=10\n", "buckets=10, want 12 for a lhist"},
		{hdr + asp + "map index=0 kind=lhist name=- advice=1 file=a line=3 lo=0 hi=100 step=7 count=0 buckets=16\n", "buckets=16, want -1 for a lhist"},
		{hdr + asp + strings.Replace(timer, "buckets=65", "buckets=12", 1), "buckets=12, a timer has 65"},
		{hdr + asp + strings.Replace(timer, " inside=0", "", 1), "no inside="},
		{hdr + asp + timer + "b i=1 n=1\n", "a b bucket outside a map that has them"},
		{hdr + asp + keyed + "key k=1 n=1 v=1 extra=1\n", "unknown key extra"},
		{hdr + asp + keyed + "key k=1 n=1 v=1\nfail kind=count name=x advice=1 file=a line=4 reason=conflict with=0\n", "lists 1 failed uses, its line says failed=0"},
		{hdr + strings.Replace(asp, "failed=0", "failed=1", 1) + keyed + "key k=1 n=1 v=1\nfail kind=count name=x advice=1 file=a line=4 reason=tired with=0\n", "unknown reason=tired"},
		{hdr + "fail kind=count name=x advice=1 file=a line=4 reason=room with=-1\n", "a fail outside an aspect"},
		{hdr + asp + strings.Replace(keyed, "line=3", "line=3 key=ustack", 1), "key=ustack on a count map: only a count's keys may be kstack"},
		{hdr + asp + strings.Replace(strings.Replace(keyed, "line=3", "line=3 key=kstack", 1), "kind=count", "kind=sum", 1), "key=kstack on a sum map"},
		{hdr + "smap index=0 name=s entries=0 size=4096 overflow=0 busy=0\n", "a shared map outside an aspect"},
		{hdr + asp + keyed + "key k=1 n=1 v=1\nskey t=0x0 w=1 v=2\n", "an skey outside a shared map"},
		{hdr + asp + keyed + "key k=1 n=1 v=1\nsmap index=1 name=s entries=0 size=4096 overflow=0 busy=0\n", "shared map index 1, want 0"},
		{hdr + asp + keyed + "key k=1 n=1 v=1\nsmap index=0 name=s entries=2 size=4096 overflow=0 busy=0\nskey t=0x0 w=1 v=2\n", "shared map 0 has 1 skey lines, its line says entries=2"},
		{hdr + asp + keyed + "key k=1 n=1 v=1\nsmap index=0 name=s entries=1 size=4096 overflow=0 busy=0\nskey t=0x0 w=1 v=-2\n", "v=-2"},
	}
	for _, tt := range tests {
		_, err := ParseStats([]byte(tt.in))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseStats(%q) error = %v\nwant one containing %q", tt.in, err, tt.want)
		}
	}
}

// TestParseStatsKStack: a COUNT_STACK map says key=kstack; its keys are
// stack ids, past int64's range.
func TestParseStatsKStack(t *testing.T) {
	in := "stats abi=19 cpus=2\naspect id=1 name=kstack maps=1 room=1 unclaimed=0 failed=0\n" +
		"map index=0 kind=count name=stacks advice=1 file=kstack.klasy line=15 key=kstack keys=2 dropped=0\n" +
		"key k=42 n=3 v=1\nkey k=18364758544493064720 n=7 v=1\n"
	s, err := ParseStats([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	m := s.Aspects[0].Maps[0]
	if m.Key != KeyKStack || !s.HasStacks() || len(m.Keys) != 2 || m.Keys[1].Key != 18364758544493064720 || m.Keys[1].Value != 7 {
		t.Errorf("map %+v: want key kstack, keys 42 (3) and 18364758544493064720 (7)", m)
	}
	var none *Stats
	if none.HasStacks() {
		t.Error("nil stats have stacks")
	}
}
