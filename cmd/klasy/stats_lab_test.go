package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/klasy/klasy/cmd/klasy/internal/statsview"
	"github.com/klasy/klasy/lab"
	"github.com/klasy/klasy/lab/labboot"
)

// aggAspect is weaver/testdata/agg.klasy: the maps klasy_prog's calls
// fill, with known counts.
const aggAspect = "../../weaver/testdata/agg.klasy"

// lineOf is the line of aggAspect that holds text: where an unnamed map
// is, so its label.
func lineOf(t *testing.T, text string) int {
	t.Helper()
	src, err := os.ReadFile(aggAspect)
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range strings.Split(string(src), "\n") {
		if strings.Contains(l, text) {
			return i + 1
		}
	}
	t.Fatalf("%s has no %q", aggAspect, text)
	return 0
}

// In-kernel aggregation on a real kernel of two CPUs, through the
// commands a user types: weave, klasy_prog's calls (some on each CPU, a
// timer started on one CPU and stopped on the other), klasy stats --json
// with exactly the counts, sums, buckets and keys the program made, its
// text drawn as bpftrace draws, and after unweave the kernel's modules
// and kprobes as before.
func TestStatsInLab(t *testing.T) {
	if testing.Short() {
		t.Skip("boots a lab")
	}
	const prog = "/tmp/klasy_prog"
	l := labboot.Boot(t, lab.Config{Name: labboot.Name("stats"), Kernel: lab.Debian, CPUs: 2})
	labboot.Install(t, l, prog, labboot.StaticProgram(t, "../../weaver/testdata/prog/klasy_prog.c"))
	klasyErr := func(args ...string) (string, string) {
		t.Helper()
		var out, errb bytes.Buffer
		if err := run(&stdio{In: strings.NewReader(""), Out: &out, Err: &errb}, args); err != nil {
			t.Fatalf("klasy %s: %v\n%s", strings.Join(args, " "), err, errb.String())
		}
		return out.String(), errb.String()
	}
	klasy := func(args ...string) string {
		t.Helper()
		out, _ := klasyErr(args...)
		return out
	}
	exec := func(argv ...string) string {
		t.Helper()
		return klasy(append([]string{"lab", "exec", l.Name(), "--"}, argv...)...)
	}
	progPID := func(argv ...string) int64 {
		t.Helper()
		first, _, _ := strings.Cut(exec(append([]string{prog}, argv...)...), "\n")
		pid, err := strconv.ParseInt(strings.TrimPrefix(first, "pid "), 10, 64)
		if err != nil {
			t.Fatalf("klasy_prog printed %q first, want its pid", first)
		}
		return pid
	}
	kernelState := func() string {
		t.Helper()
		return exec("sh", "-c", labboot.KernelState)
	}
	before := kernelState()
	if out := klasy("stats", "--lab", l.Name()); out != "lab "+l.Name()+": nothing of klasy is woven (no klasy runtime)\n" {
		t.Errorf("klasy stats before any weave printed %q", out)
	}

	klasy("weave", "--lab", l.Name(), aggAspect)
	klasy("weave", "--lab", l.Name(), "../../examples/read_latency.klasy")
	woven := true
	defer func() {
		if woven {
			klasy("unweave", "--lab", l.Name(), "--all")
		}
	}()

	pid := progPID("getppid-split", "100")
	for _, r := range []struct{ count, pos, n int }{{1, 1000000, 3}, {7, 1000001, 5}, {100, 1000002, 2}, {1000, 1000003, 4}} {
		progPID("pread", "/proc/self/stat", fmt.Sprint(r.count), fmt.Sprint(r.pos), fmt.Sprint(r.n))
	}
	progPID("pread-range", "/proc/self/stat", "1", "2000000", "1100")
	progPID("sleep", "50", "4")
	progPID("spin", "40", "3")
	dd := exec("sh", "-c", "dd if=/dev/zero of=/dev/null bs=4k count=200 2>/dev/null & echo $!; wait")
	// A read that fails, for read_latency's @errors: read(2) of a
	// directory, EISDIR (klasy's agent, whose reads failed too, is left
	// out of the join points).
	exec("sh", "-c", "cat / 2>/dev/null; true")

	out, stderr := klasyErr("stats", "--lab", l.Name(), "--aspect", "agg", "--json")
	maps := map[string]statsview.MapJSON{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var m statsview.MapJSON
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		if m.Aspect != "agg" {
			t.Errorf("--aspect agg printed a map of %s", m.Aspect)
		}
		maps[m.Map] = m
	}
	keys := func(name string) string {
		t.Helper()
		m, ok := maps[name]
		if !ok {
			t.Errorf("no map %s in %s", name, out)
			return ""
		}
		var s []string
		for _, k := range m.Keys {
			s = append(s, fmt.Sprintf("%d=%d/%d", k.Key, k.Value, k.Count))
		}
		return strings.Join(s, " ")
	}
	buckets := func(name string) string {
		t.Helper()
		var s []string
		for _, b := range maps[name].Buckets {
			if b.Count > 0 {
				lo, hi := "-inf", "inf"
				if b.Min != nil {
					lo = fmt.Sprint(*b.Min)
				}
				if b.Max != nil {
					hi = fmt.Sprint(*b.Max)
				}
				s = append(s, fmt.Sprintf("%s..%s=%d", lo, hi, b.Count))
			}
		}
		return strings.Join(s, " ")
	}
	keyOf := func(m statsview.MapJSON, key int64) string {
		for _, k := range m.Keys {
			if k.Key == key {
				return fmt.Sprintf("%d=%d/%d", k.Key, k.Value, k.Count)
			}
		}
		return "none"
	}
	countMap := fmt.Sprintf("count:%d", lineOf(t, "COUNT(pos)"))
	histMap := fmt.Sprintf("hist:%d", lineOf(t, "HIST(count)"))
	lhistMap := fmt.Sprintf("lhist:%d", lineOf(t, "LHIST(count"))
	for _, c := range []struct{ what, got, want string }{
		// 50 on each CPU, merged; the other processes' getppid calls
		// have other keys.
		{"@calls of klasy_prog", keyOf(maps["calls"], pid), fmt.Sprintf("%d=100/100", pid)},
		{"@" + countMap, keys(countMap), "1000001=5/5 1000003=4/4 1000000=3/3 1000002=2/2"},
		{"@bytes", keys("bytes"), "1000003=4000/4 1000002=200/2 1000001=35/5 1000000=3/3"},
		{"@least", keys("least"), "0=1/14"},
		{"@most", keys("most"), "0=1000/14"},
		{"@" + histMap, buckets(histMap), "1..1=3 4..7=5 64..127=2 512..1023=4"},
		{"@" + lhistMap, buckets(lhistMap), "-inf..4=3 5..14=5 95..104=2 105..inf=4"},
		// One CPU's table holds 1024 keys; the other 76 are counted.
		{"@distinct", fmt.Sprintf("%d keys, %d dropped", len(maps["distinct"].Keys), *maps["distinct"].Dropped), "1024 keys, 76 dropped"},
		{"@orphan", fmt.Sprintf("%d timed, %d without a start", *maps["orphan"].Count, *maps["orphan"].NoStart), "0 timed, 100 without a start"},
	} {
		if c.got != c.want {
			t.Errorf("%s: %s, want %s", c.what, c.got, c.want)
		}
	}
	if d := maps["distinct"]; len(d.Keys) == 1024 && (d.Keys[0].Key != 2000000 || d.Keys[1023].Key != 2001023 || d.Keys[0].Count != 1) {
		t.Errorf("@distinct holds %+v .. %+v, want the first 1024 positions once each", d.Keys[0], d.Keys[1023])
	}
	if m := maps[histMap]; *m.Count != 14 || m.Advice != 2 || m.Line != lineOf(t, "HIST(count)") {
		t.Errorf("@%s: %d values, advice %d line %d", histMap, *m.Count, m.Advice, m.Line)
	}
	// The sleeps: 50 ms each, almost none of it on a CPU.
	if s := maps["sleep"]; *s.Count != 4 || s.Wall.MinNS < 50e6 || s.CPU.MaxNS > s.Wall.MinNS/10 || *s.NoStart != 0 || *s.Inside != 0 {
		t.Errorf("@sleep: %d timed, wall %+v, on-CPU %+v; want 4 of 50 ms or more, on a CPU a tenth of that at most", *s.Count, *s.Wall, *s.CPU)
	}
	// The spins: 40 ms each of busy loop, half on each CPU, all on a CPU.
	if s := maps["spin"]; *s.Count != 3 || s.Wall.MinNS < 40e6 || s.CPU.TotalNS < s.Wall.TotalNS/2 || s.CPU.TotalNS > s.Wall.TotalNS {
		t.Errorf("@spin: %d timed, wall %+v, on-CPU %+v; want 3 of 40 ms or more, mostly on a CPU", *s.Count, *s.Wall, *s.CPU)
	}
	wantWarn := fmt.Sprintf("klasy: warning: aspect agg: HIST_AS(calls, ...) at advice 1, %s:%d counts nothing: calls is already the COUNT map @calls (advice 1, %s:%d)\n"+
		"klasy: warning: aspect agg: 100 hits of those uses not counted\n", aggAspect, lineOf(t, "HIST_AS(calls"), aggAspect, lineOf(t, "COUNT_AS(calls"))
	if stderr != wantWarn {
		t.Errorf("klasy stats warned\n%s\nwant\n%s", stderr, wantWarn)
	}

	// The text: the histograms drawn as klasy trace --hist draws them.
	text := klasy("stats", "--lab", l.Name())
	wantHist := fmt.Sprintf(`@%s: HIST (advice 2, %s:%d), 14 values
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
`, histMap, aggAspect, lineOf(t, "HIST(count)"))
	wantBytes := fmt.Sprintf("@bytes: SUM per key (advice 2, %s:%d), 4 keys\n      KEY   SUM\n  1000003  4000\n  1000002   200\n  1000001    35\n  1000000     3\n",
		aggAspect, lineOf(t, "SUM_AS(bytes"))
	for _, want := range []string{"aspect agg: 11 maps\n", "aspect read_latency: 4 maps\n", wantHist, wantBytes} {
		if !strings.Contains(text, want) {
			t.Errorf("klasy stats printed\n%s\nwithout\n%s", text, want)
		}
	}

	// The example: dd's 200 reads of 4 KiB, each timed.
	ddPID, err := strconv.ParseInt(strings.TrimSpace(dd), 10, 64)
	if err != nil {
		t.Fatalf("dd's pid: %q", dd)
	}
	out = klasy("stats", "--lab", l.Name(), "--aspect", "read_latency", "--json")
	ex := map[string]statsview.MapJSON{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var m statsview.MapJSON
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		ex[m.Map] = m
	}
	if i := slices.IndexFunc(ex["reads"].Keys, func(k statsview.KeyJSON) bool { return k.Key == ddPID }); i < 0 || ex["reads"].Keys[i].Count < 200 {
		t.Errorf("@reads: %+v, want dd (pid %d) with 200 reads or more", ex["reads"].Keys, ddPID)
	}
	var in4K uint64
	for _, b := range ex["read_size"].Buckets {
		if b.Min != nil && *b.Min == 4096 {
			in4K = b.Count
		}
	}
	if in4K < 200 {
		t.Errorf("@read_size: %d reads in [4K, 8K), want dd's 200 or more", in4K)
	}
	if !slices.ContainsFunc(ex["errors"].Keys, func(k statsview.KeyJSON) bool { return k.Key == int64(syscall.EISDIR) }) {
		t.Errorf("@errors: %+v, want EISDIR (%d) of cat's read of a directory", ex["errors"].Keys, syscall.EISDIR)
	}
	if r := ex["read"]; r.Count == nil || *r.Count < 200 || r.CPU.TotalNS > r.Wall.TotalNS {
		t.Errorf("@read: %+v", r)
	}

	checkStatsInterval(t, l.Name(), func() int64 { return progPID("getppid-split", "50") })

	// A parameter: examples/tools/readsize.klasy for dd's reads only
	// (-D COMM), while cat reads too.
	klasy("weave", "--lab", l.Name(), "-D", `COMM="dd"`, "../../examples/tools/readsize.klasy")
	exec("sh", "-c", "dd if=/dev/zero of=/dev/null bs=1000 count=37 2>/dev/null; cat /proc/self/stat /proc/self/maps >/dev/null")
	var rs statsview.MapJSON
	if err := json.Unmarshal([]byte(klasy("stats", "--lab", l.Name(), "--aspect", "readsize", "--json")), &rs); err != nil {
		t.Fatal(err)
	}
	var sizes []string
	for _, b := range rs.Buckets {
		if b.Count > 0 && b.Min != nil {
			sizes = append(sizes, fmt.Sprintf("[%d]=%d", *b.Min, b.Count))
		} else if b.Count > 0 {
			sizes = append(sizes, fmt.Sprintf("[..]=%d", b.Count))
		}
	}
	if strings.Join(sizes, " ") != "[512]=37" {
		t.Errorf("readsize -D COMM=\"dd\": reads by size %v, want dd's 37 of 1000 bytes only", sizes)
	}

	woven = false
	klasy("unweave", "--lab", l.Name(), "agg", "read_latency", "readsize")
	if after := kernelState(); after != before {
		t.Errorf("after unweave, modules and kprobes:\n%s\nbefore the weaves:\n%s", after, before)
	}
}

// checkStatsInterval runs klasy stats --interval until a round shows the
// getppid calls of a klasy_prog run started after its first round, then
// interrupts it as Ctrl-C would: each round under its time, the totals
// growing.
func checkStatsInterval(t *testing.T, labName string, calls func() int64) {
	t.Helper()
	out := &syncBuffer{}
	var errb bytes.Buffer
	done := make(chan error, 1)
	go func() {
		done <- run(&stdio{In: strings.NewReader(""), Out: out, Err: &errb},
			[]string{"stats", "--lab", labName, "--aspect", "agg", "--json", "--interval", "300ms"})
	}()
	rounds := func() []map[string]statsview.MapJSON {
		var rs []map[string]statsview.MapJSON
		for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			if strings.HasPrefix(line, `{"time":`) {
				rs = append(rs, map[string]statsview.MapJSON{})
				continue
			}
			var m statsview.MapJSON
			if json.Unmarshal([]byte(line), &m) == nil && len(rs) > 0 {
				rs[len(rs)-1][m.Map] = m
			}
		}
		return rs
	}
	waitFor := func(what string, ok func([]map[string]statsview.MapJSON) bool) {
		t.Helper()
		for deadline := time.Now().Add(60 * time.Second); !ok(rounds()); time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("klasy stats --interval: no %s in 60 s:\n%s\n%s", what, out.String(), errb.String())
			}
		}
	}
	waitFor("first round", func(rs []map[string]statsview.MapJSON) bool { return len(rs) >= 2 })
	pid := calls()
	counted := func(m statsview.MapJSON) bool {
		return slices.ContainsFunc(m.Keys, func(k statsview.KeyJSON) bool { return k.Key == pid && k.Count == 50 })
	}
	waitFor("round with the new calls", func(rs []map[string]statsview.MapJSON) bool { return counted(rs[len(rs)-1]["calls"]) })
	// Its handler is installed (it printed rounds): Ctrl-C ends it.
	syscall.Kill(os.Getpid(), syscall.SIGINT)
	if err := <-done; err != nil {
		t.Fatalf("klasy stats --interval: %v\n%s", err, errb.String())
	}
	rs := rounds()
	if counted(rs[0]["calls"]) {
		t.Errorf("the first round already counted calls made after it")
	}
	t.Logf("klasy stats --interval 300ms: %d rounds until Ctrl-C", len(rs))
}
