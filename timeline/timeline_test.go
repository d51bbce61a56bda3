package timeline

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/klasy/klasy/weaver/records"
)

func rec(ns uint64, cpu int, fn string) records.TraceRecord {
	return records.TraceRecord{Aspect: "net", Advice: 1, TimeNS: ns, CPU: cpu, PID: 7, Comm: "nc", PC: "0xffffffff81000000", Function: fn, File: "net/core/dev.c", Line: 1}
}

func TestMerge(t *testing.T) {
	// Domain U's clock is 1 ms ahead of the host's, Domain 0's 2 ms
	// ahead: their records interleave in host time, not in their own.
	ds := []Domain{
		{Name: "U", Clock: Clock{OffsetNS: 1_000_000}, Records: []records.TraceRecord{
			rec(1_010_000, 0, "tcp_sendmsg"), rec(1_000_000, 1, "alloc_skb"), rec(1_030_000, 0, "netfront_xmit"), rec(1_050_000, 0, "tie")}},
		{Name: "0", Clock: Clock{OffsetNS: 2_000_000}, Records: []records.TraceRecord{
			rec(0, 0, "boot"), rec(2_000_000+40_000, 0, "netback_rx"), rec(2_000_000+50_000, 1, "tie")}},
	}
	var got []string
	for _, e := range Merge(ds) {
		got = append(got, fmt.Sprintf("%d %s %s", e.HostNS, e.Domain, e.Function))
		if e.TimeNS != ds[0].Records[0].TimeNS && e.Function == "tcp_sendmsg" {
			t.Errorf("the guest's own time changed: %d", e.TimeNS)
		}
	}
	want := []string{"-2000000 0 boot", "0 U alloc_skb", "10000 U tcp_sendmsg", "30000 U netfront_xmit", "40000 0 netback_rx", "50000 U tie", "50000 0 tie"}
	if !slices.Equal(got, want) {
		t.Errorf("Merge =\n%q\nwant\n%q", got, want)
	}
	if es := Merge(nil); len(es) != 0 {
		t.Errorf("Merge(nil) = %v", es)
	}
}

// importedFlow is an arrow as Perfetto's JSON importer draws it: from a
// slice (pid, tid, ts) to the next.
type slice struct {
	pid, tid int
	ts       float64
}

// importFlows reads trace events as ui.perfetto.dev's JSON importer
// does with v2 flow fields (json_trace_parser_impl.cc, flow_tracker.cc):
// X slices in time order, each with bind_id and flow_out only beginning
// a flow, flow_in and flow_out stepping it, flow_in only ending it; an
// arrow from the flow's last slice to this one at each step and end.
// Anything the importer would count as an error fails the test.
func importFlows(t *testing.T, evs []TraceEvent) [][2]slice {
	t.Helper()
	xs := slices.DeleteFunc(slices.Clone(evs), func(e TraceEvent) bool { return e.Ph != "X" })
	sort.SliceStable(xs, func(i, j int) bool { return xs[i].TS < xs[j].TS })
	open := map[int]slice{}
	var arrows [][2]slice
	end := map[[2]int]float64{}
	for _, e := range xs {
		if e.Dur == nil || *e.Dur < 0 {
			t.Fatalf("slice %+v without a duration: the importer drops it", e)
		}
		k := [2]int{e.PID, e.TID}
		if e.TS < end[k] {
			t.Fatalf("slice %s at %v overlaps the previous one of its track, ending at %v", e.Name, e.TS, end[k])
		}
		end[k] = e.TS + *e.Dur
		s := slice{e.PID, e.TID, e.TS}
		if e.BindID == 0 {
			if e.FlowIn || e.FlowOut {
				t.Fatalf("slice %+v has a flow direction without bind_id", e)
			}
			continue
		}
		prev, ok := open[e.BindID]
		switch {
		case e.FlowOut && !e.FlowIn:
			if ok {
				t.Fatalf("flow %d begun twice (flow_duplicate_id)", e.BindID)
			}
		case e.FlowIn:
			if !ok {
				t.Fatalf("flow %d stepped or ended without a start", e.BindID)
			}
			arrows = append(arrows, [2]slice{prev, s})
		default:
			t.Fatalf("slice %+v has bind_id without a direction (flow_without_direction)", e)
		}
		open[e.BindID] = s
		if !e.FlowOut {
			delete(open, e.BindID)
		}
	}
	if len(open) != 0 {
		t.Errorf("flows begun and never ended: %v", open)
	}
	return arrows
}

func TestPerfetto(t *testing.T) {
	ds := []Domain{
		{Name: "lab a", Clock: Clock{OffsetNS: 500}, Records: []records.TraceRecord{
			rec(1500, 0, "alloc_skb"), rec(1800, 0, "tcp_sendmsg"), rec(2000, 1, "dev_queue_xmit"), rec(2100, 1, "other")}},
		{Name: "lab b", Clock: Clock{OffsetNS: -1000}, Records: []records.TraceRecord{
			rec(3000, 0, "netif_rx"), rec(5000, 0, "netif_receive_skb"), rec(5000, 0, "same_ns")}},
	}
	es := Merge(ds)
	idx := func(fn string) int {
		return slices.IndexFunc(es, func(e Event) bool { return e.Function == fn })
	}
	links := []Link{
		{Name: "flow 1", Events: []int{idx("netif_receive_skb"), idx("alloc_skb"), idx("dev_queue_xmit"), idx("netif_rx")}},
		{Name: "flow 2", Events: []int{idx("tcp_sendmsg")}},             // one event: no arrow
		{Name: "flow 3", Events: []int{idx("alloc_skb"), idx("other")}}, // alloc_skb is taken: one event left
	}
	var buf bytes.Buffer
	if err := WritePerfetto(&buf, []string{"lab a", "lab b"}, es, links); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		TraceEvents []TraceEvent `json:"traceEvents"`
	}
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	procs := map[int]string{}
	threads := map[int]string{}
	threadPID := map[int]int{}
	var nx int
	for _, e := range doc.TraceEvents {
		switch {
		case e.Ph == "M" && e.Name == "process_name":
			procs[e.PID] = e.Args["name"].(string)
		case e.Ph == "M" && e.Name == "thread_name":
			if e.TID == 0 || threads[e.TID] != "" {
				t.Errorf("thread id %d zero or named twice", e.TID)
			}
			threads[e.TID], threadPID[e.TID] = e.Args["name"].(string), e.PID
		case e.Ph == "X":
			nx++
			if threadPID[e.TID] != e.PID || procs[e.PID] != e.Args["domain"] {
				t.Errorf("slice %s on pid %d tid %d: its thread is not named before it, or its process is not its domain %v", e.Name, e.PID, e.TID, e.Args["domain"])
			}
		}
	}
	if len(procs) != 2 || procs[1] != "lab a" || procs[2] != "lab b" || len(threads) != 3 || nx != 7 {
		t.Errorf("processes %v threads %v slices %d; want lab a and lab b, 3 CPU tracks, 7 slices", procs, threads, nx)
	}
	arrows := importFlows(t, doc.TraceEvents)
	// Host times: alloc_skb 1000 (a cpu0), dev_queue_xmit 1500 (a cpu1),
	// netif_rx 4000 (b cpu0), netif_receive_skb 6000 (b cpu0).
	a0, a1 := 1<<16|1, 1<<16|2
	b0 := 2<<16 | 1
	want := [][2]slice{{{1, a0, 1}, {1, a1, 1.5}}, {{1, a1, 1.5}, {2, b0, 4}}, {{2, b0, 4}, {2, b0, 6}}}
	if !slices.Equal(arrows, want) {
		t.Errorf("arrows %v, want %v", arrows, want)
	}
	// The same-ns record ends the previous slice of its track at once.
	for _, e := range doc.TraceEvents {
		if e.Name == "netif_receive_skb" && *e.Dur != 0 {
			t.Errorf("netif_receive_skb lasts %v µs, want 0: same_ns follows at the same time", *e.Dur)
		}
		if e.Name == "alloc_skb" && *e.Dur != 0.3 && e.Ph == "X" {
			t.Errorf("alloc_skb lasts %v µs, want 0.3: tcp_sendmsg follows 300 ns later", *e.Dur)
		}
	}
}

// TestFlows follows Table 6.8's packet from Domain U to Domain 0: the
// flow's events come in host time order though Domain 0 stamped its
// records earlier than U stamped the first (its clock is 1 ms behind), records without a flow ID take part in none, and
// another flow interleaved with it stays apart.
func TestFlows(t *testing.T) {
	f := func(ns uint64, flow int32, fn string) records.TraceRecord {
		r := rec(ns, 0, fn)
		r.Flow = flow
		return r
	}
	ds := []Domain{
		{Name: "U", Clock: Clock{OffsetNS: 5_000_000}, Records: []records.TraceRecord{
			f(5_000_000, 17, "alloc_skb_from_cache"), f(5_003_400, 17, "tcp_sendmsg"), f(5_004_000, 0, "unrelated"),
			f(5_010_000, 18, "alloc_skb_from_cache"), f(5_130_800, 17, "network_start_xmit")}},
		{Name: "0", Clock: Clock{OffsetNS: 4_000_000}, Records: []records.TraceRecord{
			f(4_000_000+882_500, 17, "netbk_fill_frags"), f(4_000_000+894_900, 17, "netif_rx"), f(4_000_000+900_000, 18, "netif_rx")}},
	}
	es := Merge(ds)
	fls := Flows(es)
	var got []string
	for _, fl := range fls {
		var path []string
		for _, e := range fl.Events {
			path = append(path, fmt.Sprintf("%.1f %s %s", float64(e.HostNS-fl.Events[0].HostNS)/1e3, e.Domain, e.Function))
		}
		got = append(got, fmt.Sprintf("flow %d via %v: %v", fl.ID, fl.Domains(), path))
	}
	want := []string{
		"flow 17 via [U 0]: [0.0 U alloc_skb_from_cache 3.4 U tcp_sendmsg 130.8 U network_start_xmit 882.5 0 netbk_fill_frags 894.9 0 netif_rx]",
		"flow 18 via [U 0]: [0.0 U alloc_skb_from_cache 890.0 0 netif_rx]",
	}
	if !slices.Equal(got, want) {
		t.Errorf("Flows =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	links := FlowLinks(es)
	if len(links) != 2 || links[0].Name != "flow 17" || len(links[0].Events) != 5 || len(links[1].Events) != 2 {
		t.Fatalf("FlowLinks = %+v, want flow 17 of 5 events and flow 18 of 2", links)
	}
	for li, l := range links {
		for j, i := range l.Events {
			if es[i].Flow != fls[li].ID || es[i].Function != fls[li].Events[j].Function {
				t.Errorf("link %s event %d is %+v, want flow %d's %s", l.Name, j, es[i], fls[li].ID, fls[li].Events[j].Function)
			}
		}
	}
}
