package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"

	"github.com/klasy/klasy/cmd/klasy/internal/tracerun"
	"github.com/klasy/klasy/otlpexport/otlptest"
)

// trace --domains --otlp: flow 17 reaches the backend as one trace of
// two hops, one per domain; the timeline is printed as without it.
func TestTraceDomainsOTLP(t *testing.T) {
	r := otlptest.Start(t, http.StatusOK)
	out, errs, err := runTraceDomainsOn(t, "--otlp", r.URL)
	if err != nil {
		t.Fatalf("trace --domains --otlp: %v\n%s", err, errs)
	}
	if !strings.Contains(out, "network_start_xmit") || !strings.Contains(errs, "otlp: 4 spans sent") {
		t.Errorf("stdout:\n%s\nstderr:\n%s\nwant the timeline, and 4 spans sent said (flow 17 in two hops, flow 18, the record outside flows)", out, errs)
	}
	hops := map[string]bool{}
	for _, s := range r.Spans() {
		if strings.HasPrefix(hex.EncodeToString(s.Span.TraceId), "00000011") {
			hops[s.Service] = true
		}
	}
	if !hops["U"] || !hops["0"] || len(hops) != 2 {
		t.Errorf("flow 17's spans are in services %v, want U and 0", hops)
	}
}

// A backend that refuses: trace fails saying so, and every record read
// from the kernels is put back for the next trace.
func TestTraceDomainsOTLPRefusedRecordsKept(t *testing.T) {
	r := otlptest.Start(t, http.StatusBadRequest)
	ds := fakeDomains(t)
	open := openTraceDomains
	openTraceDomains = func(ctx context.Context, s *stdio, file string) ([]tracerun.Domain, error) { return ds, nil }
	defer func() { openTraceDomains = open }()
	var out, errb bytes.Buffer
	err := run(&stdio{In: strings.NewReader(""), Out: &out, Err: &errb}, []string{"trace", "--domains", "xen.yaml", "--otlp", r.URL})
	if err == nil || !strings.Contains(err.Error(), "6 records read from the kernels were not written") ||
		!strings.Contains(err.Error(), "spans could not be sent") {
		t.Fatalf("trace --domains --otlp REFUSING: %v, want 6 records not written, spans not sent", err)
	}
	for _, d := range ds {
		f := d.Src.(*fakeSource)
		if len(f.putBack) != 3 || f.dones != 0 {
			t.Errorf("domain %s: put back %d records, saved removed %d times; want 3 and 0", d.Name, len(f.putBack), f.dones)
		}
	}
}

// A bad URL is refused before any record is read.
func TestTraceOTLPBadURL(t *testing.T) {
	ds := fakeDomains(t)
	open := openTraceDomains
	openTraceDomains = func(ctx context.Context, s *stdio, file string) ([]tracerun.Domain, error) { return ds, nil }
	defer func() { openTraceDomains = open }()
	var out, errb bytes.Buffer
	err := run(&stdio{In: strings.NewReader(""), Out: &out, Err: &errb}, []string{"trace", "--domains", "xen.yaml", "--otlp", "localhost:4318"})
	if err == nil || !strings.Contains(err.Error(), "--otlp") {
		t.Fatalf("trace --otlp localhost:4318: %v, want the URL refused", err)
	}
	for _, d := range ds {
		if f := d.Src.(*fakeSource); f.takes > 0 || f.drains > 0 {
			t.Errorf("domain %s was read before the URL was refused", d.Name)
		}
	}
}
