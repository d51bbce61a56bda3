package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/klasy/klasy/cmd/klasy/internal/tracerun"
	"github.com/klasy/klasy/internal/jaegertest"
	"github.com/klasy/klasy/timeline"
	"github.com/klasy/klasy/weaver/records"
	"github.com/klasy/klasy/weaver/target"
)

// flowTrace finds flow id's trace among ts (its ID starts with the flow
// ID in hex).
func flowTrace(ts []jaegertest.Trace, id int32) (jaegertest.Trace, bool) {
	for _, tr := range ts {
		if strings.HasPrefix(tr.ID, fmt.Sprintf("%08x", id)) {
			return tr, true
		}
	}
	return jaegertest.Trace{}, false
}

// checkHops checks that tr's spans are one hop per service in order,
// each the child of the one before.
func checkHops(t *testing.T, tr jaegertest.Trace, services ...string) {
	t.Helper()
	var got []string
	for i, s := range tr.Spans {
		got = append(got, s.Service)
		if i == 0 && s.Parent != "" {
			t.Errorf("trace %s: its first hop (%s, %s) has parent %s, want none", tr.ID, s.Service, s.Name, s.Parent)
		}
		if i > 0 && s.Parent != tr.Spans[i-1].SpanID {
			t.Errorf("trace %s: hop %d (%s, %s) has parent %q, want the hop before (%s)", tr.ID, i, s.Service, s.Name, s.Parent, tr.Spans[i-1].SpanID)
		}
	}
	if strings.Join(got, " ") != strings.Join(services, " ") {
		t.Errorf("trace %s: hops in services %v, want %v", tr.ID, got, services)
	}
}

// trace --domains --otlp into a real Jaeger, read back through its query
// API as a user's UI reads it: flow 17 is one trace, a hop in U then one
// in 0, each the child of the one before, named by its first function,
// with a span event per record.
func TestTraceDomainsToJaeger(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Jaeger")
	}
	j := jaegertest.Start(t)
	for i, url := range []string{j.OTLPHTTP, j.OTLPGRPC} {
		if i > 0 {
			j.Restart(t) // empty: the same records make the same trace
		}
		_, errs, err := runTraceDomainsOn(t, "--otlp", url)
		if err != nil {
			t.Fatalf("trace --domains --otlp %s: %v\n%s", url, err, errs)
		}
		ts, err := j.Wait("U", 100, 20*time.Second, func(ts []jaegertest.Trace) bool {
			tr, ok := flowTrace(ts, 17)
			return ok && len(tr.Spans) == 2
		})
		if err != nil {
			t.Fatal(err)
		}
		tr, ok := flowTrace(ts, 17)
		if !ok || len(ts) != 2 {
			t.Fatalf("%s: Jaeger has %d traces with a span in U, want flow 17's and the record outside flows':\n%+v", url, len(ts), ts)
		}
		checkHops(t, tr, "U", "0")
		if u := tr.Spans[0]; u.Name != "alloc_skb_from_cache" || u.Events != 3 || fmt.Sprint(u.Tags["klasy.flow"]) != "17" {
			t.Errorf("%s: flow 17's hop in U: %s with %d events, klasy.flow %v; want alloc_skb_from_cache, 3, 17", url, u.Name, u.Events, u.Tags["klasy.flow"])
		}
		if d := tr.Spans[1]; d.Name != "netbk_fill_frags" || d.Events != 2 || d.Tags["code.file.path"] != "drivers/net/xen-netback/netback.c" {
			t.Errorf("%s: flow 17's hop in 0: %s with %d events in %v; want netbk_fill_frags, 2, netback.c", url, d.Name, d.Events, d.Tags["code.file.path"])
		}
	}
}

// drainHook runs before each Drain of its source (a test's clock for
// what happens between reads).
type drainHook struct {
	*fakeSource
	before func(n int)
	n      int
}

func (d *drainHook) Drain(ctx context.Context) ([]records.TraceRecord, *records.Status, error) {
	d.n++
	d.before(d.n)
	return d.fakeSource.Drain(ctx)
}

func (d *drainHook) Clock(context.Context) (int64, error) { return timeline.HostNow(), nil }

// trace --follow --otlp with Jaeger stopped in the middle: the batch read
// while it is down is retried, then counted and said; trace goes on, and
// the batch read once it is back reaches it.
func TestTraceFollowJaegerStopped(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Jaeger")
	}
	j := jaegertest.Start(t)
	now := uint64(timeline.HostNow())
	rec := func(flow int32, fn string) records.TraceRecord {
		now += 1000
		return records.TraceRecord{Aspect: "x", Advice: 1, TimeNS: now, CPU: 0, PID: 1, Comm: "sh", PC: "0x1",
			Function: fn, File: "net/x.c", Line: 1, Flow: flow, Values: records.Ints(int64(flow))}
	}
	src := &drainHook{fakeSource: &fakeSource{
		batches: [][]records.TraceRecord{
			{rec(1, "before_stop"), rec(1, "before_stop2")},
			{rec(2, "while_down")},
			{rec(3, "after_restart")},
		},
		status: &records.Status{Lost: []uint64{0}}, interrupt: true, out: &bytes.Buffer{}}}
	src.before = func(n int) {
		switch n {
		case 2: // batch 1 is in Jaeger: stop it
			if _, err := j.Wait("lab fake", 10, 20*time.Second, func(ts []jaegertest.Trace) bool { _, ok := flowTrace(ts, 1); return ok }); err != nil {
				t.Error(err)
			}
			j.Stop()
		case 3: // batch 2 tried for its retry time, and failed
			time.Sleep(4 * time.Second)
			j.Restart(t)
		}
	}
	retry := otlpRetry
	otlpRetry = time.Second
	defer func() { otlpRetry = retry }()
	var out bytes.Buffer
	open, poll := openTraceSource, tracePoll
	defer func() { openTraceSource, tracePoll = open, poll }()
	openTraceSource = func(context.Context, *stdio, target.TargetOptions) (tracerun.Source, error) { return src, nil }
	tracePoll = time.Millisecond
	var errb bytes.Buffer
	err := run(&stdio{In: strings.NewReader(""), Out: &out, Err: &errb}, []string{"trace", "--lab", "fake", "--follow", "--otlp", j.OTLPHTTP})
	if err == nil || !strings.Contains(err.Error(), "1 of 3 spans could not be sent") {
		t.Errorf("trace --follow --otlp with Jaeger stopped once: %v, want 1 of 3 spans not sent\n%s", err, errb.String())
	}
	if !strings.Contains(errb.String(), "1 span not sent to "+j.OTLPHTTP) {
		t.Errorf("stderr %q: the batch lost was not said as it failed", errb.String())
	}
	if !strings.Contains(out.String(), "after_restart") {
		t.Errorf("trace did not go on after the failed batch:\n%s", out.String())
	}
	ts, err := j.Wait("lab fake", 10, 20*time.Second, func(ts []jaegertest.Trace) bool { _, ok := flowTrace(ts, 3); return ok })
	if _, ok := flowTrace(ts, 3); err != nil || !ok {
		t.Errorf("the batch read after Jaeger came back is not in Jaeger: %v %+v", err, ts)
	}
}
