package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klasy/klasy/cmd/klasy/internal/tracerun"
	"github.com/klasy/klasy/timeline"
	"github.com/klasy/klasy/weaver/records"
)

// fakeDomains are Table 6.8's first rows: flow 17 from Domain U to
// Domain 0, whose clocks run 5 ms and 1 ms ahead of the host's, with a
// record of no flow and one of another flow between. The host clock
// ticks 10 ns per read and each guest answers 5 ns after the host's
// first read: each offset is estimated exactly, ± 5 ns.
func fakeDomains(t *testing.T) []tracerun.Domain {
	var host int64 = 100
	hostClock = func() int64 { host += 10; return host }
	t.Cleanup(func() { hostClock = timeline.HostNow })
	clock := func(offset int64) func(context.Context) (int64, error) {
		return func(context.Context) (int64, error) { return host + 5 + offset, nil }
	}
	r := func(ns uint64, cpu int, flow int32, fn, file string, line int) records.TraceRecord {
		return records.TraceRecord{Aspect: "xen_net", Advice: 1, TimeNS: ns, CPU: cpu, PID: 1, Comm: "ab", PC: "0xffffffff81000000",
			Function: fn, File: file, Line: line, Flow: flow, Values: records.Ints(int64(flow))}
	}
	const u0, d0 = 5_000_000 + 1_000_000, 1_000_000 + 1_000_000 // each clock's reading at host time 1 ms
	st := &records.Status{Lost: []uint64{0}}
	return []tracerun.Domain{
		{Name: "U", Clock: clock(5_000_000), Src: &fakeSource{
			saved: []records.TraceRecord{r(u0, 0, 17, "alloc_skb_from_cache", "net/core/skbuff.c", 234)},
			batches: [][]records.TraceRecord{{
				r(u0+3_400, 1, 17, "tcp_sendmsg", "net/ipv4/tcp.c", 726), r(u0+3_500, 1, 0, "unrelated", "fs/x.c", 1),
				r(u0+130_800, 0, 17, "network_start_xmit", "drivers/net/xen-netfront.c", 963)}},
			status: st, out: &bytes.Buffer{}}},
		{Name: "0", Clock: clock(1_000_000), Src: &fakeSource{
			batches: [][]records.TraceRecord{{
				r(d0+882_500, 0, 17, "netbk_fill_frags", "drivers/net/xen-netback/netback.c", 1058),
				r(d0+890_000, 1, 18, "netif_rx", "net/core/dev.c", 1543),
				r(d0+894_900, 0, 17, "netif_rx", "net/core/dev.c", 1543)}},
			status: st, out: &bytes.Buffer{}}},
	}
}

// runTraceDomainsOn runs 'klasy trace --domains FILE' with args on the
// fake domains.
func runTraceDomainsOn(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	ds := fakeDomains(t)
	open := openTraceDomains
	openTraceDomains = func(ctx context.Context, s *stdio, file string) ([]tracerun.Domain, error) {
		if file != "xen.yaml" {
			t.Errorf("trace opened domains file %q, want xen.yaml", file)
		}
		return ds, nil
	}
	defer func() { openTraceDomains = open }()
	var out, errb bytes.Buffer
	err = run(&stdio{In: strings.NewReader(""), Out: &out, Err: &errb}, append([]string{"trace", "--domains", "xen.yaml"}, args...))
	for _, d := range ds {
		if !d.Src.(*fakeSource).closed {
			t.Errorf("domain %s's session not closed", d.Name)
		}
	}
	return out.String(), errb.String(), err
}

func TestTraceDomains(t *testing.T) {
	out, stderr, err := runTraceDomainsOn(t)
	if err != nil || stderr != "" {
		t.Fatalf("trace --domains: %v\n%s", err, stderr)
	}
	want := `# domain U: 4 records; clock +5.000 ms from the host's ± 0.00 µs (best round trip of 16: 0.01 µs)
# domain 0: 3 records; clock +1.000 ms from the host's ± 0.00 µs (best round trip of 16: 0.01 µs)
[    0.001000] U cpu0 1 ab xen_net#1 alloc_skb_from_cache net/core/skbuff.c:234 0xffffffff81000000 17 flow=17
[    0.001003] U cpu1 1 ab xen_net#1 tcp_sendmsg net/ipv4/tcp.c:726 0xffffffff81000000 17 flow=17
[    0.001003] U cpu1 1 ab xen_net#1 unrelated fs/x.c:1 0xffffffff81000000 0
[    0.001130] U cpu0 1 ab xen_net#1 network_start_xmit drivers/net/xen-netfront.c:963 0xffffffff81000000 17 flow=17
[    0.001882] 0 cpu0 1 ab xen_net#1 netbk_fill_frags drivers/net/xen-netback/netback.c:1058 0xffffffff81000000 17 flow=17
[    0.001890] 0 cpu1 1 ab xen_net#1 netif_rx net/core/dev.c:1543 0xffffffff81000000 18 flow=18
[    0.001894] 0 cpu0 1 ab xen_net#1 netif_rx net/core/dev.c:1543 0xffffffff81000000 17 flow=17
`
	if out != want {
		t.Errorf("trace --domains printed\n%s\nwant\n%s", out, want)
	}

	out, _, err = runTraceDomainsOn(t, "--flow")
	if err != nil {
		t.Fatal(err)
	}
	wantFlow := `flow 17: 5 events in U, 0 over 894.90 µs from [    0.001000]
  ELAPSED µs  DOMAIN  FILE                               LINE  FUNCTION
        0.00  U       net/core/skbuff.c                  234   alloc_skb_from_cache
        3.40  U       net/ipv4/tcp.c                     726   tcp_sendmsg
      130.80  U       drivers/net/xen-netfront.c         963   network_start_xmit
      882.50  0       drivers/net/xen-netback/netback.c  1058  netbk_fill_frags
      894.90  0       net/core/dev.c                     1543  netif_rx

flow 18: 1 event in 0 over 0.00 µs from [    0.001890]
  ELAPSED µs  DOMAIN  FILE            LINE  FUNCTION
        0.00  0       net/core/dev.c  1543  netif_rx
`
	if got := out[strings.Index(out, "flow 17"):]; got != wantFlow {
		t.Errorf("trace --domains --flow printed\n%s\nwant\n%s", got, wantFlow)
	}
}

func TestTraceDomainsJSON(t *testing.T) {
	perfetto := filepath.Join(t.TempDir(), "t.json")
	out, _, err := runTraceDomainsOn(t, "--json", "--perfetto", perfetto)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var head struct {
		Domains []struct {
			Name     string `json:"name"`
			OffsetNS int64  `json:"offset_ns"`
			BoundNS  int64  `json:"bound_ns"`
			RTTNS    int64  `json:"rtt_ns"`
			Samples  int    `json:"samples"`
			Records  int    `json:"records"`
		} `json:"domains"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &head); err != nil {
		t.Fatal(err)
	}
	if len(head.Domains) != 2 || head.Domains[0].Name != "U" || head.Domains[0].OffsetNS != 5_000_000 || head.Domains[0].BoundNS != 5 ||
		head.Domains[0].RTTNS != 10 || head.Domains[0].Samples != 16 || head.Domains[1].OffsetNS != 1_000_000 || head.Domains[1].Records != 3 {
		t.Errorf("header %s", lines[0])
	}
	var last int64
	for _, l := range lines[1:] {
		var e struct {
			Domain   string `json:"domain"`
			HostNS   int64  `json:"host_ns"`
			TimeNS   uint64 `json:"time_ns"`
			Function string `json:"function"`
			Flow     int32  `json:"flow"`
		}
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatal(err)
		}
		if e.Domain == "" || e.HostNS < last || e.Function == "" {
			t.Errorf("event %s: no domain or function, or before the one before", l)
		}
		last = e.HostNS
	}
	if len(lines) != 8 {
		t.Errorf("%d lines, want a header and 7 events", len(lines))
	}

	out, _, err = runTraceDomainsOn(t, "--flow", "--json")
	if err != nil {
		t.Fatal(err)
	}
	lines = strings.Split(strings.TrimSpace(out), "\n")
	var fl struct {
		Flow       int32    `json:"flow"`
		DurationNS int64    `json:"duration_ns"`
		Domains    []string `json:"domains"`
		Events     []struct {
			ElapsedNS int64  `json:"elapsed_ns"`
			Domain    string `json:"domain"`
			Line      int    `json:"line"`
		} `json:"events"`
	}
	if len(lines) != 3 || json.Unmarshal([]byte(lines[1]), &fl) != nil {
		t.Fatalf("trace --flow --json printed\n%s\nwant a header and 2 flows", out)
	}
	if fl.Flow != 17 || fl.DurationNS != 894_900 || strings.Join(fl.Domains, ",") != "U,0" || len(fl.Events) != 5 ||
		fl.Events[3].ElapsedNS != 882_500 || fl.Events[3].Domain != "0" || fl.Events[3].Line != 1058 {
		t.Errorf("flow %s", lines[1])
	}

	b, err := os.ReadFile(perfetto)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		TraceEvents []timeline.TraceEvent `json:"traceEvents"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	procs, bound := map[int]any{}, map[int]int{}
	for _, e := range doc.TraceEvents {
		if e.Name == "process_name" {
			procs[e.PID] = e.Args["name"]
		}
		if e.BindID != 0 {
			bound[e.BindID]++
		}
	}
	if len(procs) != 2 || procs[1] != "U" || procs[2] != "0" || len(bound) != 1 {
		t.Errorf("processes %v, flows (bind_id: slices) %v; want U and 0 and one flow of 5 (flow 18 has one event)", procs, bound)
	}
	for id, n := range bound {
		if n != 5 {
			t.Errorf("flow %d binds %d slices, want 5", id, n)
		}
	}
}

func TestTraceDomainsUsage(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--domains", "x.yaml", "--lab", "a"}, "not with --lab"},
		{[]string{"--domains", "x.yaml", "--follow"}, "--follow is not supported with --domains"},
		{[]string{"--domains", "x.yaml", "--group-by", "1"}, "--flow gives each flow's path"},
		{[]string{"--flow"}, "give --domains FILE"},
	} {
		var out, errb bytes.Buffer
		err := run(&stdio{In: strings.NewReader(""), Out: &out, Err: &errb}, append([]string{"trace"}, tt.args...))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("trace %v = %v, want an error saying %q", tt.args, err, tt.want)
		}
	}
}
