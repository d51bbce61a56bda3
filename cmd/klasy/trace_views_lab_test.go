package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/klasy/klasy/lab"
	"github.com/klasy/klasy/lab/labboot"
)

// viewsAspect stores (count, pos) of the preads klasy_prog makes at
// positions of 1,000,000 and more, which no other process in the guest
// asks for: every record is the test's.
const viewsAspect = `<aspect>
  <advice>
    <pointcut>execution(ksys_pread64) AND argument(count, countp) AND argument(pos, posp)</pointcut>
    <before><![CDATA[
      if (*(loff_t *)posp >= 1000000)
        STORE_DATA2(*(size_t *)countp, *(loff_t *)posp);
    ]]></before>
  </advice>
</aspect>
`

// The views on records of a real kernel, through the klasy commands a
// user types: weave, the program's preads, trace --hist (drawn as
// written here by hand), trace --group-by --json, and records saved by
// unweave.
func TestTraceViewsInLab(t *testing.T) {
	if testing.Short() {
		t.Skip("boots a lab")
	}
	const prog = "/tmp/klasy_prog"
	l := labboot.Boot(t, lab.Config{Name: labboot.Name("views"), Kernel: lab.Debian})
	labboot.Install(t, l, prog, labboot.StaticProgram(t, "../../weaver/testdata/prog/klasy_prog.c"))
	klasy := func(args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		if err := run(&stdio{In: strings.NewReader(""), Out: &out, Err: &errb}, args); err != nil {
			t.Fatalf("klasy %s: %v\n%s", strings.Join(args, " "), err, errb.String())
		}
		return out.String()
	}
	pread := func(count, pos, n int) {
		klasy("lab", "exec", l.Name(), "--", prog, "pread", "/proc/self/stat", fmt.Sprint(count), fmt.Sprint(pos), fmt.Sprint(n))
	}
	aspect := filepath.Join(t.TempDir(), "views.klasy")
	if err := os.WriteFile(aspect, []byte(viewsAspect), 0o644); err != nil {
		t.Fatal(err)
	}
	state := func() string { return klasy("lab", "exec", l.Name(), "--", "sh", "-c", labboot.KernelState) }
	before := state()
	klasy("weave", "--lab", l.Name(), aspect)
	woven := true
	defer func() {
		if woven {
			klasy("unweave", "--lab", l.Name(), "views")
		}
	}()

	pread(1, 1000000, 3)
	pread(7, 1000001, 5)
	pread(100, 1000002, 2)
	pread(1000, 1000003, 4)
	const wantHist = `@views#1:
[1]                    3 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@                     |
[2, 4)                 0 |                                                    |
[4, 8)                 5 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|
[8, 16)                0 |                                                    |
[16, 32)               0 |                                                    |
[32, 64)               0 |                                                    |
[64, 128)              2 |@@@@@@@@@@@@@@@@@@@@                                |
[128, 256)             0 |                                                    |
[256, 512)             0 |                                                    |
[512, 1K)              4 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@           |

`
	if got := klasy("trace", "--lab", l.Name(), "--hist", "1"); got != wantHist {
		t.Errorf("klasy trace --hist 1 printed\n%s\nwant\n%s", got, wantHist)
	}

	pread(5, 1000010, 3)
	pread(6, 1000011, 2)
	pread(5, 1000010, 1)
	type group struct {
		Aspect     string `json:"aspect"`
		ValueIndex int    `json:"value_index"`
		Value      int64  `json:"value"`
		DurationNS uint64 `json:"duration_ns"`
		Records    []struct {
			ElapsedNS uint64  `json:"elapsed_ns"`
			Function  string  `json:"function"`
			InlinedIn string  `json:"inlined_in"`
			Values    []int64 `json:"values"`
		} `json:"records"`
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(klasy("trace", "--lab", l.Name(), "--group-by", "2", "--group-gap", "1m", "--json")), "\n") {
		var g group
		if err := json.Unmarshal([]byte(line), &g); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		var rows []string
		var last uint64
		for i, r := range g.Records {
			rows = append(rows, fmt.Sprintf("%s in %s %v", r.Function, r.InlinedIn, r.Values))
			if i == 0 && r.ElapsedNS != 0 || r.ElapsedNS < last {
				t.Errorf("group %d: elapsed_ns %d after %d", g.Value, r.ElapsedNS, last)
			}
			last = r.ElapsedNS
		}
		if last != g.DurationNS {
			t.Errorf("group %d: duration_ns %d, its last record at %d", g.Value, g.DurationNS, last)
		}
		got = append(got, fmt.Sprintf("%s %d=%d: %s", g.Aspect, g.ValueIndex, g.Value, strings.Join(rows, ", ")))
	}
	// One process per pread run, well within the minute of
	// --group-gap, however loaded the machine: position 1000010's third
	// run joins its group.
	x64 := "ksys_pread64 in __x64_sys_pread64 "
	want := []string{
		"views 2=1000010: " + strings.Repeat(x64+"[5 1000010], ", 3) + x64 + "[5 1000010]",
		"views 2=1000011: " + x64 + "[6 1000011], " + x64 + "[6 1000011]",
	}
	if !slices.Equal(got, want) {
		t.Errorf("klasy trace --group-by 2 --json grouped\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// Records saved by unweave are the view's too.
	pread(9, 1000020, 2)
	woven = false
	klasy("unweave", "--lab", l.Name(), "views")
	if after := state(); after != before {
		t.Errorf("after unweave, modules and kprobes:\n%s\nbefore:\n%s", after, before)
	}
	const wantSaved = `{"aspect":"views","advice":1,"value_index":1,"type":"hist","count":2,"buckets":[{"min":8,"max":15,"count":2}]}` + "\n"
	if got := klasy("trace", "--lab", l.Name(), "--hist", "1", "--json"); got != wantSaved {
		t.Errorf("klasy trace --hist 1 --json after unweave printed %s, want %s", got, wantSaved)
	}
}
