package statusview

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/klasy/klasy/weaver/records"
)

// TestStatusFlows: klasy status prints each flow table of the status
// file, in text and in --json, with every count where the runtime put it.
func TestStatusFlows(t *testing.T) {
	st := parsedStatus(t, "flows")
	var b bytes.Buffer
	Write(&b, "lab demo", st)
	for _, want := range []string{
		"flow netflow: 3 of 65536 entries, 120 hits, 4017 misses, 0 evictions, 2 freed, 1 ambiguous, 0 dropped, 9 without ID\n",
		"flow rxflow: 0 of 32 entries, 0 hits, 0 misses, 68 evictions, 0 freed, 0 ambiguous, 5 dropped, 0 without ID\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("klasy status lacks %q:\n%s", want, b.String())
		}
	}
	if i, j := strings.Index(b.String(), "flow netflow"), strings.Index(b.String(), "aspect netflow"); i < 0 || j < i {
		t.Errorf("flows should come before the aspects:\n%s", b.String())
	}

	js, err := json.Marshal(View("lab demo", st))
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Flows []map[string]any `json:"flows"`
	}
	if err := json.Unmarshal(js, &v); err != nil {
		t.Fatal(err)
	}
	want := []map[string]any{
		{"name": "netflow", "entries": 3.0, "limit": 65536.0, "hits": 120.0, "misses": 4017.0, "evictions": 0.0, "freed": 2.0, "ambiguous": 1.0, "dropped": 0.0, "noid": 9.0},
		{"name": "rxflow", "entries": 0.0, "limit": 32.0, "hits": 0.0, "misses": 0.0, "evictions": 68.0, "freed": 0.0, "ambiguous": 0.0, "dropped": 5.0, "noid": 0.0},
	}
	got, _ := json.Marshal(v.Flows)
	w, _ := json.Marshal(want)
	if !bytes.Equal(got, w) {
		t.Errorf("klasy status --json flows:\n%s\nwant\n%s", got, w)
	}
	// Without a runtime, flows is an empty list, not null.
	js, _ = json.Marshal(View("lab demo", nil))
	if !bytes.Contains(js, []byte(`"flows":[]`)) {
		t.Errorf("klasy status --json without a runtime: %s", js)
	}
}

// TestStatusReplace: klasy status says which hooks replace a function,
// in text (the HOOK column) and in --json (kind).
func TestStatusReplace(t *testing.T) {
	st := parsedStatus(t, "replace")
	var b bytes.Buffer
	Write(&b, "lab demo", st)
	for _, want := range []string{
		"  37    0       ftrace replace  1       tcp_send_delayed_ack  net/ipv4/tcp_output.c:3974  0xffffffff818a4ec0\n",
		"  3     1       ftrace replace  1,2     ksys_lseek  fs/read_write.c:294  0xffffffff813650a0\n",
		"  3     0       kretprobe       3       ksys_lseek  fs/read_write.c:294  0xffffffff813650a0\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("klasy status lacks %q:\n%s", want, b.String())
		}
	}
	js, err := json.Marshal(View("lab demo", st))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(js), `"kind":"replace","mechanism":"ftrace"`); n != 2 {
		t.Errorf("klasy status --json shows %d replace hooks on ftrace, want 2: %s", n, js)
	}
}

// TestStatusDisarmed: with kprobes disarmed in the whole kernel, klasy
// status says which hooks stop, per mechanism: kprobes (ftrace-based,
// jump, int3) and kretprobes do, hooks on an aspect's ftrace_ops or
// direct trampoline (fexit) and tracepoints do not; in text and --json.
func TestStatusDisarmed(t *testing.T) {
	for _, c := range []struct{ file, want string }{
		{"flows", "kprobes are disarmed in this kernel (/sys/kernel/debug/kprobes/enabled is 0): 1 kprobe hook below does not run until they are armed again (echo 1 > it)\n"},
		// setattr_exec: one ftrace-ops and one fexit hook; inlined_copies:
		// a jump and an int3 kprobe, and one whose code is gone.
		{"two-aspects", "kprobes are disarmed in this kernel (/sys/kernel/debug/kprobes/enabled is 0): 2 kprobe hooks below do not run until they are armed again (echo 1 > it); 2 hooks on ftrace-ops, fexit run (not kprobes)\n"},
	} {
		st := parsedStatus(t, c.file)
		for _, disarmed := range []bool{false, true} {
			st.Disarmed = disarmed
			var b bytes.Buffer
			Write(&b, "lab demo", st)
			if got := strings.Contains(b.String(), "kprobes are disarmed in this kernel"); got != disarmed {
				t.Errorf("%s, disarmed %v: text says so %v:\n%s", c.file, disarmed, got, b.String())
			}
			if disarmed && !strings.Contains(b.String(), "lab demo: "+c.want) {
				t.Errorf("%s: klasy status lacks %q:\n%s", c.file, c.want, b.String())
			}
			js, err := json.Marshal(View("lab demo", st))
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Contains(string(js), `"disarmed":true`); got != disarmed {
				t.Errorf("%s, disarmed %v: JSON says so %v: %s", c.file, disarmed, got, js)
			}
		}
	}
	// Only hooks that are not kprobes.
	st := parsedStatus(t, "two-aspects")
	st.Aspects = st.Aspects[:1]
	st.Disarmed = true
	var b bytes.Buffer
	Write(&b, "lab demo", st)
	if want := "(echo 1 > it)"; strings.Contains(b.String(), want) || !strings.Contains(b.String(), "no hook below is a kprobe; 2 hooks on ftrace-ops, fexit run (not kprobes)\n") {
		t.Errorf("an aspect without kprobes, disarmed:\n%s", b.String())
	}
}

// TestStatusCallCounters: an aspect's per-call variable accesses that
// missed their task's slot, calls opened without one, and open calls
// dropped with their slot, are shown when there are any, in text and
// --json.
func TestStatusCallCounters(t *testing.T) {
	st := parsedStatus(t, "flows")
	var b bytes.Buffer
	Write(&b, "lab demo", st)
	want := "aspect netflow (module klasy_a_netflow): 1 hook, per-call variables: 3 missed (the task's slot was being taken over), 1 call without a slot, 2 dropped before their return (the task's slot taken over after a minute, the task gone, or nested too deep): a return after that reads them as 0\n"
	if !strings.Contains(b.String(), want) {
		t.Errorf("klasy status lacks %q:\n%s", want, b.String())
	}
	b.Reset()
	Write(&b, "lab demo", parsedStatus(t, "two-aspects"))
	if strings.Contains(b.String(), "per-call variables") {
		t.Errorf("per-call counters shown for aspects that have none:\n%s", b.String())
	}
	js, err := json.Marshal(View("lab demo", st))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(js), `"call_missed":3,"call_full":1,"call_dropped":2`) {
		t.Errorf("klasy status --json lacks the per-call counters: %s", js)
	}
}

// parsedStatus parses weaver/records' status file testdata NAME.txt.
func parsedStatus(t *testing.T, name string) *records.Status {
	t.Helper()
	text, err := os.ReadFile("../../../../weaver/records/testdata/status/" + name + ".txt")
	if err != nil {
		t.Fatal(err)
	}
	st, err := records.ParseStatus(text)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestStatusFtraceOps: klasy status says how many of an aspect's hooks
// are on its ftrace_ops and, when ftrace refused it, why its entry hooks
// are kprobes, and likewise for after hooks on its direct trampoline
// (fexit); each hook's mechanism, in text and --json.
func TestStatusFtraceOps(t *testing.T) {
	st := parsedStatus(t, "two-aspects")
	var b bytes.Buffer
	Write(&b, "lab demo", st)
	for _, want := range []string{
		"aspect setattr_exec (module klasy_a_setattr_exec): 2 hooks, 1 on its ftrace_ops, 1 after on its direct trampoline (fexit)\n",
		"aspect inlined_copies (module klasy_a_inlined_copies): 3 hooks, entry hooks are kprobes: ftrace refused the ftrace_ops (error -16, device or resource busy), after hooks are kretprobes: ftrace refused the direct ops (error -16, device or resource busy)\n",
		"ftrace-ops  1,2",
		"fexit       3",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("klasy status lacks %q:\n%s", want, b.String())
		}
	}
	js, err := json.Marshal(View("lab demo", st))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"ftrace_ops":1,"fexit":1,"hooks":[{"kind":"kprobe","mechanism":"ftrace-ops"`, `"ftrace_ops":0,"ops_err":-16,"fexit":0,"fexit_err":-16,`, `"kind":"kretprobe","mechanism":"fexit"`} {
		if !bytes.Contains(js, []byte(want)) {
			t.Errorf("klasy status --json lacks %s:\n%s", want, js)
		}
	}
}

// TestStatusFexitHeld: when tasks inside functions whose after advice
// was unwoven keep the runtime loaded (fexit_held=N in the runtime's
// line), klasy status says so, in text and in --json.
func TestStatusFexitHeld(t *testing.T) {
	text, err := os.ReadFile("../../../../weaver/records/testdata/status/empty.txt")
	if err != nil {
		t.Fatal(err)
	}
	for _, held := range []int{0, 2} {
		in := strings.Replace(string(text), "fexit_held=0", fmt.Sprintf("fexit_held=%d", held), 1)
		st, err := records.ParseStatus([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		Write(&b, "lab demo", st)
		said := strings.Contains(b.String(), "2 direct trampolines of unwoven aspects keep the runtime loaded")
		if said != (held > 0) {
			t.Errorf("fexit_held=%d: text says so %v:\n%s", held, said, b.String())
		}
		js, err := json.Marshal(View("lab demo", st))
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(string(js), `"fexit_held":2`); got != (held > 0) {
			t.Errorf("fexit_held=%d: JSON says so %v: %s", held, got, js)
		}
	}
}
