package records

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klasy/klasy/internal/golden"
)

// TestParseStatusGolden parses each testdata/status/NAME.txt and compares
// the result with NAME.json.
func TestParseStatusGolden(t *testing.T) {
	txts, _ := filepath.Glob("testdata/status/*.txt")
	if len(txts) == 0 {
		t.Fatal("no testdata/status/*.txt")
	}
	for _, txt := range txts {
		name := strings.TrimSuffix(txt, ".txt")
		t.Run(filepath.Base(name), func(t *testing.T) {
			in, err := os.ReadFile(txt)
			if err != nil {
				t.Fatal(err)
			}
			s, err := ParseStatus(in)
			if err != nil {
				t.Fatalf("ParseStatus: %v", err)
			}
			got, _ := json.MarshalIndent(s, "", "\t")
			got = append(got, '\n')
			golden.Check(t, name+".json", string(got))
		})
	}
}

func TestParseStatusTotals(t *testing.T) {
	in, err := os.ReadFile("testdata/status/two-aspects.txt")
	if err != nil {
		t.Fatal(err)
	}
	s, err := ParseStatus(in)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.TotalLost(); got != 17 {
		t.Errorf("TotalLost = %d, want 17 (0+12+0+5)", got)
	}
}

func TestParseStatusErrors(t *testing.T) {
	const rt = "runtime abi=19 cpus=1 buffer_kb=8 ftrace_ops=1 fexit=1 fexit_held=0 unread=0 lost=0\n"
	const asp = "aspect id=2 name=a module=m hooks=1 register_us=5 ops=0 ops_err=0 fexit=0 fexit_err=0 call_missed=0 call_full=0 call_dropped=0\n"
	hook := func(kv string) string {
		f := map[string]string{}
		order := strings.Fields("aspect index kind addr image mech hits missed advice function inlined_in file line module access")
		for _, p := range strings.Fields("aspect=2 index=0 kind=kprobe addr=0x10 image=0x20 mech=int3 hits=1 missed=0 advice=1 function=f inlined_in=- file=f.c line=3 module=- access=-") {
			k, v, _ := strings.Cut(p, "=")
			f[k] = v
		}
		for _, p := range strings.Fields(kv) {
			k, v, _ := strings.Cut(p, "=")
			if v == "DEL" {
				delete(f, k)
				continue
			}
			if _, ok := f[k]; !ok {
				order = append(order, k)
			}
			f[k] = v
		}
		var b strings.Builder
		b.WriteString("hook")
		for _, k := range order {
			if v, ok := f[k]; ok {
				b.WriteString(" " + k + "=" + v)
			}
		}
		return b.String() + "\n"
	}
	const flow = "flow name=f entries=1 limit=32 hits=2 misses=3 evictions=4 freed=5 ambiguous=6 dropped=7 noid=8\n"
	if _, err := ParseStatus([]byte(rt + flow + asp + hook(""))); err != nil {
		t.Fatalf("the valid base case fails: %v", err)
	}
	tests := []struct{ in, want string }{
		{"", "status: empty"},
		{asp, `status line 1: "aspect": want the runtime line first`},
		{rt + rt, `status line 2: "runtime": want the runtime line first, and only there`},
		{"runtime abi=1 cpus=1 buffer_kb=8 unread=0 lost=0\n", "status line 1: runtime ABI 1, this klasy reads ABI 19"},
		{"runtime abi=7 cpus=1 buffer_kb=8 unread=0 lost=0\n", "status line 1: runtime ABI 7, this klasy reads ABI 19"},
		{"runtime abi=19 cpus=1 buffer_kb=8 unread=0 lost=0\n", "status line 1: no ftrace_ops="},
		{rt + "aspect id=2 name=a module=m hooks=1 register_us=5 ops=2 ops_err=0\n", "ops=2 above hooks=1"},
		{rt + "aspect id=2 name=a module=m hooks=1 register_us=5 ops=0 ops_err=16\n", "ops_err=16: not 0 or a negative error number"},
		{rt + "aspect id=2 name=a module=m hooks=1 register_us=5 ops=0 ops_err=0\n", "no fexit="},
		{rt + "aspect id=2 name=a module=m hooks=1 register_us=5 ops=1 ops_err=0 fexit=1 fexit_err=0 call_missed=0 call_full=0 call_dropped=0\n", "ops=1 and fexit=1 above hooks=1"},
		{rt + "aspect id=2 name=a module=m hooks=1 register_us=5 ops=0 ops_err=0 fexit=0 fexit_err=5 call_missed=0 call_full=0 call_dropped=0\n", "fexit_err=5: not 0 or a negative error number"},
		{rt + "aspect id=2 name=a module=m hooks=1 register_us=5 ops=0 ops_err=0 fexit=0 fexit_err=0\n", "no call_missed="},
		{rt + "aspect id=2 name=a module=m hooks=1 register_us=5 ops=0 ops_err=0 fexit=0 fexit_err=0 call_missed=-1 call_full=0 call_dropped=0\n", "call_missed=-1: not a 64-bit decimal"},
		{rt + "aspect id=2 name=a module=m hooks=1 register_us=5 ops=0 ops_err=0 fexit=0 fexit_err=0 call_missed=0 call_full=0\n", "no call_dropped="},
		{"runtime abi=19 cpus=2 buffer_kb=8 ftrace_ops=1 fexit=1 fexit_held=0 unread=0 lost=0\n", "lost= has 1 counts for 2 CPUs"},
		{"runtime abi=19 cpus=1 buffer_kb=8 ftrace_ops=1 fexit=1 fexit_held=0 unread=-1 lost=0\n", "unread=-1: not a 64-bit decimal"},
		{"runtime abi=19 cpus=1 buffer_kb=8 ftrace_ops=1 fexit=1 fexit_held=0 lost=0\n", "status line 1: no unread="},
		{"runtime abi=19 cpus=1 buffer_kb=8 ftrace_ops=1 fexit=1 fexit_held=0 unread=0 lost=0 new=1\n", "unknown key new"},
		{"runtime abi=19 cpus=1 buffer_kb=8 ftrace_ops=1 fexit=1 fexit_held=0 unread=0 unread=0 lost=0\n", "unread twice"},
		{"runtime abi=19 cpus=1  buffer_kb=8 ftrace_ops=1 unread=0 lost=0\n", `"" is not key=value`},
		{"runtime abi=19 cpus=1 buffer_kb= ftrace_ops=1 unread=0 lost=0\n", `"buffer_kb=" is not key=value`},
		{"runtime abi=19 cpus=1 buffer_kb=8 ftrace_ops=1 fexit=1 fexit_held=0 unread=0 lost=0,x\n", `lost=0,x: "x" is not a 64-bit decimal`},
		{rt + "probe x=1\n", `status line 2: unknown line kind "probe"`},
		{rt + hook(""), "status line 2: hook of aspect 2 outside that aspect"},
		{rt + asp, "status line 2: aspect 2 has 0 hook lines, its line says hooks=1"},
		{rt + asp + asp, "status line 3: aspect 2 has 0 hook lines"},
		{rt + asp + hook("") + asp + hook(""), "status line 4: aspect id 2 twice"},
		{rt + asp + hook("") + hook("index=1"), "status line 4: aspect 2 has 2 hook lines, its line says hooks=1"},
		{rt + asp + hook("index=1"), "status line 3: hook index 1, want 0"},
		{rt + asp + hook("aspect=3"), "hook of aspect 3 outside that aspect"},
		{rt + asp + hook("kind=uprobe"), "kind=uprobe: want kprobe, kretprobe, replace or tracepoint"},
		{rt + asp + hook("mech=fast"), "unknown mech=fast"},
		{rt + asp + hook("addr=10"), "addr=10: not 0x and hex digits"},
		{rt + asp + hook("image=0xg"), "image=0xg: not 0x and hex digits"},
		{rt + asp + hook("advice=1,,2"), `advice=1,,2: "" is not a 16-bit decimal`},
		{rt + asp + hook("advice=70000"), `"70000" is not a 16-bit decimal`},
		{rt + asp + hook("line=DEL"), "status line 3: no line="},
		{rt + asp + hook("module=DEL"), "status line 3: no module="},
		{rt + asp + hook("hits=DEL missed=x"), "no hits="},
		{rt + asp + hook("extra=1"), "status line 3: unknown key extra"},
		{rt + "aspect id=4294967296 name=a module=m hooks=0 register_us=5 ops=0 ops_err=0 fexit=0 fexit_err=0 call_missed=0 call_full=0 call_dropped=0\n", "id=4294967296: not a 32-bit decimal"},
		{flow, `status line 1: "flow": want the runtime line first`},
		{rt + asp + hook("") + flow, "status line 4: flow line after an aspect"},
		{rt + flow + flow, "status line 3: flow f twice"},
		{rt + strings.Replace(flow, "entries=1", "entries=33", 1), "status line 2: entries=33 above limit=32"},
		{rt + strings.Replace(flow, " misses=3", "", 1), "status line 2: no misses="},
		{rt + strings.Replace(flow, "hits=2", "hits=-2", 1), "hits=-2: not a 64-bit decimal"},
		{rt + strings.Replace(flow, "dropped=7", "dropped=7 nmi=1", 1), "status line 2: unknown key nmi"},
	}
	for _, tt := range tests {
		_, err := ParseStatus([]byte(tt.in))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseStatus(%q) error = %v\nwant one containing %q", tt.in, err, tt.want)
		}
	}
}

// FuzzParseStatus: ParseStatus never panics, and what it accepts is
// consistent: hooks=N lines per aspect, a lost count per CPU, flows named
// once and within their limit. testdata/status/*.txt seed it.
func FuzzParseStatus(f *testing.F) {
	txts, _ := filepath.Glob("testdata/status/*.txt")
	for _, txt := range txts {
		b, err := os.ReadFile(txt)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		s, err := ParseStatus(in)
		if err != nil {
			return
		}
		if len(s.Lost) != s.CPUs {
			t.Fatalf("accepted %d lost counts for %d CPUs", len(s.Lost), s.CPUs)
		}
		names := map[string]bool{}
		for _, fl := range s.Flows {
			if names[fl.Name] || fl.Entries > fl.Limit {
				t.Fatalf("accepted flow %+v (twice, or above its limit)", fl)
			}
			names[fl.Name] = true
		}
		for _, a := range s.Aspects {
			for i, h := range a.Hooks {
				if h.Aspect != a.ID || h.Index != i {
					t.Fatalf("aspect %d: hook %d is %d/%d", a.ID, i, h.Aspect, h.Index)
				}
			}
		}
	})
}
