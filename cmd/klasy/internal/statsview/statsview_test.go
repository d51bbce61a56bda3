package statsview

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/klasy/klasy/cmd/klasy/internal/hist"
	"github.com/klasy/klasy/internal/golden"
	"github.com/klasy/klasy/weaver/records"
)

// statsOf parses a stats file of weaver/records' testdata (agg.txt is
// what the lab kernel printed for weaver/testdata/agg.klasy).
func statsOf(t *testing.T, name string) *records.Stats {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "weaver", "records", "testdata", "stats", name+".txt"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := records.ParseStats(b)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestStatsPrintGolden keeps what klasy stats prints, data and
// warnings, for stats files of the runtime in testdata/stats.
func TestStatsPrintGolden(t *testing.T) {
	tests := []struct {
		name, stats, aspect string
		json                bool
	}{
		{"agg", "agg", "", false},
		{"agg.json", "agg", "", true},
		{"by", "by", "", false},
		{"by.json", "by", "", true},
		{"smap", "smap", "", false},
		{"smap.json", "smap", "", true},
		{"two-aspects", "two-aspects", "", false},
		{"two-aspects.json", "two-aspects", "", true},
		{"one-aspect", "two-aspects", "busy_one", false},
		{"no-aspect", "empty", "", false},
		{"no-runtime", "", "", false},
		{"no-runtime.json", "", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var st *records.Stats
			if tt.stats != "" {
				st = statsOf(t, tt.stats)
			}
			var out, errb bytes.Buffer
			if err := Print(&out, &errb, "lab fake", st, tt.aspect, tt.json, nil); err != nil {
				t.Fatal(err)
			}
			if tt.json {
				for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
					if line != "" && !json.Valid([]byte(line)) {
						t.Errorf("not one JSON object per line: %s", line)
					}
				}
			}
			golden.Check(t, filepath.Join("testdata", "stats", tt.name+".golden"), out.String()+"-- stderr --\n"+errb.String())
		})
	}
}

func TestStatsAspectNotWoven(t *testing.T) {
	for _, tt := range []struct {
		stats, want string
	}{
		{"two-aspects", "aspect nosuch is not woven into lab fake (woven: quiet, busy_one)"},
		{"empty", "aspect nosuch is not woven into lab fake (woven: none)"},
		{"", "aspect nosuch is not woven into lab fake: nothing of klasy is"},
	} {
		var st *records.Stats
		if tt.stats != "" {
			st = statsOf(t, tt.stats)
		}
		err := Print(&bytes.Buffer{}, &bytes.Buffer{}, "lab fake", st, "nosuch", false, nil)
		if err == nil || err.Error() != tt.want {
			t.Errorf("%s: %v, want %q", tt.stats, err, tt.want)
		}
	}
}

// The JSON of klasy stats, read back as a script would: a hist's
// buckets carry inclusive bounds, a timer its averages.
func TestStatsJSONValues(t *testing.T) {
	var out bytes.Buffer
	if err := Print(&out, &bytes.Buffer{}, "lab fake", statsOf(t, "agg"), "", true, nil); err != nil {
		t.Fatal(err)
	}
	maps := map[string]MapJSON{}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var m MapJSON
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatal(err)
		}
		maps[m.Map] = m
	}
	h := maps["hist:29"]
	if len(h.Buckets) != 10 || *h.Buckets[0].Min != 1 || *h.Buckets[0].Max != 1 || *h.Buckets[9].Min != 512 || *h.Buckets[9].Max != 1023 || h.Buckets[9].Count != 4 {
		t.Errorf("hist:29 buckets %+v, want [1] to [512, 1K) with 4 in the last", h.Buckets)
	}
	l := maps["lhist:30"]
	if l.Linear == nil || *l.Linear != (hist.LinearJSON{Min: 5, Max: 105, Step: 10}) || l.Buckets[0].Min != nil || *l.Buckets[0].Max != 4 || *l.Buckets[11].Min != 105 || l.Buckets[11].Max != nil {
		t.Errorf("lhist:30 %+v %+v, want (..., 5) to [105, ...)", l.Linear, l.Buckets)
	}
	s := maps["sleep"]
	if s.Wall == nil || s.Wall.AvgNS != 202584100/4 || s.CPU.MaxNS != 441552 || *s.Count != 4 {
		t.Errorf("sleep %+v", s)
	}
	b := maps["bytes"]
	if len(b.Keys) != 4 || !reflect.DeepEqual(b.Keys[0], KeyJSON{Key: 1000003, Count: 4, Value: 4000}) || !reflect.DeepEqual(b.Keys[3], KeyJSON{Key: 1000000, Count: 3, Value: 3}) {
		t.Errorf("bytes keys %+v, want the largest sum first", b.Keys)
	}
}
