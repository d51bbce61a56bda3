package traceview

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/klasy/klasy/cmd/klasy/internal/perfetto"
	"github.com/klasy/klasy/timeline"
	"github.com/klasy/klasy/weaver/records"
)

// TestPerfettoExport writes two packets' records and reads the file
// back as a viewer would: a named process, a track per CPU, a slice per
// record, and one flow per group, from slice to slice of its records.
func TestPerfettoExport(t *testing.T) {
	rec := func(ns uint64, cpu int, fn string, skb int64) records.TraceRecord {
		return records.TraceRecord{Aspect: "net_trace", Advice: 1, TimeNS: ns, CPU: cpu, PID: 7, Comm: "nc", PC: "0xffffffff81000000",
			Function: fn, File: "net/core/dev.c", Line: 1, Values: records.Ints(skb)}
	}
	rs := []records.TraceRecord{
		rec(1000, 0, "netif_receive_skb", 0xa), rec(1500, 0, "netif_receive_skb", 0xb),
		rec(2000, 1, "ip_rcv", 0xa), rec(4000, 1, "tcp_v4_rcv", 0xa), rec(4500, 0, "ip_rcv", 0xb),
	}
	gv := NewGroupView(1, time.Second, os.Stderr)
	e := &perfetto.Export{Path: filepath.Join(t.TempDir(), "t.json"), Target: "lab t"}
	for _, r := range rs {
		e.Add(r)
		gv.Add(r)
	}
	if err := e.Write(gv.Groups()); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(e.Path)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		TraceEvents []timeline.TraceEvent `json:"traceEvents"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	// Each flow's points as (cpu track, ts, in, out), in the file's order,
	// which is time order.
	flows := map[int][]string{}
	for _, ev := range doc.TraceEvents {
		count[ev.Ph]++
		switch ev.Ph {
		case "M":
			if ev.Name == "process_name" && ev.Args["name"] != "lab t" {
				t.Errorf("process named %v", ev.Args["name"])
			}
		case "X":
			if ev.BindID != 0 {
				flows[ev.BindID] = append(flows[ev.BindID], fmt.Sprintf("%v@%v in=%v out=%v", ev.Name, ev.TS, ev.FlowIn, ev.FlowOut))
			}
		}
	}
	if count["X"] != 5 || count["M"] != 3 { // process + cpu0 + cpu1
		t.Errorf("events by phase %v, want 5 slices and 3 names", count)
	}
	want := map[int][]string{
		1: {"netif_receive_skb@1 in=false out=true", "ip_rcv@2 in=true out=true", "tcp_v4_rcv@4 in=true out=false"},
		2: {"netif_receive_skb@1.5 in=false out=true", "ip_rcv@4.5 in=true out=false"},
	}
	if fmt.Sprint(flows) != fmt.Sprint(want) {
		t.Errorf("flows %v, want %v", flows, want)
	}
}
