// Package otlptest is an OTLP/HTTP endpoint for unit tests: it keeps
// the spans it is sent, or refuses every request with a given status.
package otlptest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Receiver is a running endpoint; URL is its base URL.
type Receiver struct {
	URL    string
	mu     sync.Mutex
	spans  []Span
	status int
	posts  int
}

// Span is a span received, with its resource's service.name.
type Span struct {
	Service string
	Span    *tracepb.Span
}

// Start starts a receiver that answers status (200: keeps the spans),
// stopped when t ends.
func Start(t testing.TB, status int) *Receiver {
	r := &Receiver{status: status}
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	r.URL = srv.URL
	return r
}

// Spans returns the spans received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Posts returns how many requests came.
func (r *Receiver) Posts() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.posts
}

func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.posts++
	if r.status != http.StatusOK {
		w.WriteHeader(r.status)
		return
	}
	body, _ := io.ReadAll(req.Body)
	var msg collectortrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &msg); err != nil || req.URL.Path != "/v1/traces" {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	for _, rs := range msg.ResourceSpans {
		var svc string
		for _, a := range rs.Resource.Attributes {
			if a.Key == "service.name" {
				svc = a.Value.GetStringValue()
			}
		}
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				r.spans = append(r.spans, Span{svc, s})
			}
		}
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	w.Write(out)
}
