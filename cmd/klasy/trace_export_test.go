package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/klasy/klasy/weaver"
)

// TestPerfettoExport writes two packets' records and reads the file
// back as a viewer would: a named process, a track per CPU, a slice per
// record, and one flow per group whose points sit inside its slices.
func TestPerfettoExport(t *testing.T) {
	rec := func(ns uint64, cpu int, fn string, skb int64) weaver.TraceRecord {
		return weaver.TraceRecord{Aspect: "net_trace", Advice: 1, TimeNS: ns, CPU: cpu, PID: 7, Comm: "nc", PC: "0xffffffff81000000",
			Function: fn, File: "net/core/dev.c", Line: 1, Values: []int64{skb}}
	}
	rs := []weaver.TraceRecord{
		rec(1000, 0, "netif_receive_skb", 0xa), rec(1500, 0, "netif_receive_skb", 0xb),
		rec(2000, 1, "ip_rcv", 0xa), rec(4000, 1, "tcp_v4_rcv", 0xa), rec(4500, 0, "ip_rcv", 0xb),
	}
	gv := &groupView{pick: newValuePicker("--group-by", 1, os.Stderr), gap: 1e9, open: map[groupKey]*traceGroup{}}
	e := &perfettoExport{path: filepath.Join(t.TempDir(), "t.json"), target: "lab t"}
	for _, r := range rs {
		e.add(r)
		gv.add(r)
	}
	if err := e.write(gv.groups, 1); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(e.path)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		TraceEvents []traceEvent `json:"traceEvents"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	flows := map[int][]string{}
	slices := map[[2]float64]bool{} // (tid, ts) of each slice
	for _, ev := range doc.TraceEvents {
		count[ev.Ph]++
		switch ev.Ph {
		case "M":
			if ev.Name == "process_name" && ev.Args["name"] != "lab t" {
				t.Errorf("process named %v", ev.Args["name"])
			}
		case "X":
			slices[[2]float64{float64(ev.TID), ev.TS}] = true
		case "s", "t", "f":
			flows[ev.ID] = append(flows[ev.ID], ev.Ph)
			if ev.BP != "e" || !slices[[2]float64{float64(ev.TID), ev.TS}] {
				t.Errorf("flow point %+v is not inside a slice of its record", ev)
			}
		}
	}
	if count["X"] != 5 || count["M"] != 3 { // process + cpu0 + cpu1
		t.Errorf("events by phase %v, want 5 slices and 3 names", count)
	}
	if len(flows) != 2 || len(flows[1]) != 3 || flows[1][0] != "s" || flows[1][2] != "f" || len(flows[2]) != 2 {
		t.Errorf("flows %v, want one of 3 points (s t f) and one of 2 (s f)", flows)
	}
}
