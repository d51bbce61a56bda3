package otlpexport

import (
	"bytes"
	"context"
	"encoding/hex"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/klasy/klasy/otlpexport/otlptest"
	"github.com/klasy/klasy/timeline"
	"github.com/klasy/klasy/weaver/records"
)

// flowEvents are trace --domains' Table 6.8 rows: flow 17 from domain U
// to domain 0 (three records, then two), a record outside flows in
// between, and flow 18 in domain 0.
func flowEvents() []timeline.Event {
	ev := func(dom string, ns int64, flow int32, fn string, line int) timeline.Event {
		return timeline.Event{Domain: dom, HostNS: ns, TraceRecord: records.TraceRecord{Aspect: "xen_net", Advice: 1,
			CPU: 1, PID: 7, Comm: "ab", PC: "0xffffffff81000000", Function: fn, File: "net/x.c", Line: line,
			Flow: flow, Values: records.Ints(int64(flow))}}
	}
	return []timeline.Event{
		ev("U", 1_000, 17, "alloc_skb_from_cache", 1),
		ev("U", 4_400, 17, "tcp_sendmsg", 2),
		ev("U", 4_500, 0, "unrelated", 3),
		ev("U", 131_800, 17, "network_start_xmit", 4),
		ev("0", 883_500, 17, "netbk_fill_frags", 5),
		ev("0", 891_000, 18, "netif_rx", 6),
		ev("0", 895_900, 17, "netif_rx", 6),
	}
}

var epoch = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)

func wall(ns int64) time.Time { return epoch.Add(time.Duration(ns)) }

func TestFlowIsOneTraceOfHops(t *testing.T) {
	r := otlptest.Start(t, http.StatusOK)
	e, err := New(Options{URL: r.URL})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Add(context.Background(), flowEvents(), wall); err != nil {
		t.Fatal(err)
	}
	c, err := e.Close(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if c != (Counts{Sent: 4}) {
		t.Errorf("counts %+v, want 4 spans sent: 2 hops of flow 17, flow 18, the record outside flows", c)
	}
	traces := map[string][]otlptest.Span{}
	for _, s := range r.Spans() {
		id := hex.EncodeToString(s.Span.TraceId)
		traces[id] = append(traces[id], s)
	}
	if len(traces) != 3 {
		t.Fatalf("%d traces, want 3 (flow 17, flow 18, the record outside flows)", len(traces))
	}
	var f17 []otlptest.Span
	for id, ss := range traces {
		if strings.HasPrefix(id, "00000011") {
			f17 = ss
		}
	}
	slices.SortFunc(f17, func(a, b otlptest.Span) int { return int(a.Span.StartTimeUnixNano - b.Span.StartTimeUnixNano) })
	if len(f17) != 2 {
		t.Fatalf("flow 17 (trace ID 00000011…) has %d spans, want its 2 hops", len(f17))
	}
	u, d0 := f17[0], f17[1]
	if u.Service != "U" || d0.Service != "0" {
		t.Errorf("flow 17's hops are in services %q, %q; want U then 0", u.Service, d0.Service)
	}
	if len(u.Span.ParentSpanId) != 0 || !bytes.Equal(d0.Span.ParentSpanId, u.Span.SpanId) {
		t.Errorf("hop in 0 has parent %x, want the hop in U (%x), which is the root", d0.Span.ParentSpanId, u.Span.SpanId)
	}
	if u.Span.Name != "alloc_skb_from_cache" || len(u.Span.Events) != 3 || len(d0.Span.Events) != 2 {
		t.Errorf("hop in U: %q with %d events, hop in 0: %d events; want alloc_skb_from_cache with 3, then 2",
			u.Span.Name, len(u.Span.Events), len(d0.Span.Events))
	}
	if got, want := u.Span.StartTimeUnixNano, uint64(wall(1_000).UnixNano()); got != want {
		t.Errorf("hop in U starts at %d, want %d", got, want)
	}
	if got, want := u.Span.EndTimeUnixNano, uint64(wall(131_800).UnixNano()); got != want {
		t.Errorf("hop in U ends at %d, want its last record's time %d", got, want)
	}
	attrs := map[string]string{}
	for _, a := range d0.Span.Events[1].Attributes {
		attrs[a.Key] = a.Value.String()
	}
	for k, want := range map[string]string{"code.function.name": "netif_rx", "code.line.number": "6", "thread.id": "7", "klasy.advice": "xen_net#1"} {
		if !strings.Contains(attrs[k], want) {
			t.Errorf("record event attribute %s = %s, want %s", k, attrs[k], want)
		}
	}
}

// A flow read in two batches (trace --follow) stays one trace: the
// second batch's hop is the child of the first's.
func TestFlowAcrossBatches(t *testing.T) {
	r := otlptest.Start(t, http.StatusOK)
	e, err := New(Options{URL: r.URL + "/"})
	if err != nil {
		t.Fatal(err)
	}
	es := flowEvents()
	ctx := context.Background()
	if err := e.Add(ctx, es[:4], wall); err != nil {
		t.Fatal(err)
	}
	if err := e.Add(ctx, es[4:], wall); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Close(ctx); err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, s := range r.Spans() {
		if strings.HasPrefix(hex.EncodeToString(s.Span.TraceId), "00000011") {
			ids[hex.EncodeToString(s.Span.TraceId)] = true
		}
	}
	if len(ids) != 1 {
		t.Errorf("flow 17 read in two batches became %d traces, want 1", len(ids))
	}
}

// A backend that refuses: every span counted as not sent, said once per
// error, and the retry bounded.
func TestBackendDownCounted(t *testing.T) {
	r := otlptest.Start(t, http.StatusServiceUnavailable)
	var note bytes.Buffer
	e, err := New(Options{URL: r.URL, Retry: time.Second, Note: &note})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Add(context.Background(), flowEvents(), wall); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	c, err := e.Close(context.Background())
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("closing took %v: the retry is not bounded", took)
	}
	if c.Failed != 4 || c.Sent != 0 {
		t.Errorf("counts %+v, want 4 failed", c)
	}
	if err == nil || !strings.Contains(err.Error(), "4 of 4 spans could not be sent") {
		t.Errorf("Close: %v, want the spans not sent counted", err)
	}
	if !strings.Contains(note.String(), "spans not sent to "+r.URL) {
		t.Errorf("nothing said as the batch failed: %q", note.String())
	}
	if r.Posts() < 2 {
		t.Errorf("%d requests: a 503 was not retried", r.Posts())
	}
}

func TestBadURL(t *testing.T) {
	for _, u := range []string{"", "localhost:4318", "ftp://x:1", "http://"} {
		if _, err := New(Options{URL: u}); err == nil || !strings.Contains(err.Error(), "--otlp") {
			t.Errorf("New(%q): %v, want an error naming --otlp", u, err)
		}
	}
	for _, u := range []string{"http://localhost:4318", "https://h/v1/traces", "grpc://localhost:4317", "grpcs://h:4317"} {
		if _, err := New(Options{URL: u}); err != nil {
			t.Errorf("New(%q): %v", u, err)
		}
	}
}
