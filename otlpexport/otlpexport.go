// Package otlpexport sends what klasy trace reads to a tracing backend
// (Jaeger, Tempo, an OpenTelemetry collector) as OpenTelemetry traces
// over OTLP, HTTP or gRPC, with the OpenTelemetry Go SDK. A flow (the
// xflow pointcut's flow ID) is one trace; each hop of it, the flow's
// consecutive records in one domain, is a span, the child of the hop
// before it, with a span event per record; each domain is a service of
// its own. A record outside every flow is a span of its own, in a trace
// of its own. Spans are batched and each batch retried for a bounded
// time; what could not be sent is counted and said, never dropped
// silently. It touches no kernel: callers hand it timeline events.
package otlpexport

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/klasy/klasy/internal/human"
	"github.com/klasy/klasy/timeline"
	"github.com/klasy/klasy/weaver/records"
)

// Options say where spans go and how hard to try.
type Options struct {
	// URL is the backend's OTLP endpoint: http://HOST:4318 or https://…
	// for OTLP/HTTP (the path defaults to /v1/traces), grpc://HOST:4317
	// or grpcs://… for OTLP/gRPC.
	URL string
	// Retry bounds how long one batch is retried before its spans are
	// counted as not sent; 0 means 30 seconds.
	Retry time.Duration
	// Note is told of each batch that could not be sent, as it happens.
	Note io.Writer
}

// Counts are the spans an Exporter handed to the backend.
type Counts struct {
	Sent, Failed int64
}

// Exporter turns timeline events into spans, one service per domain.
type Exporter struct {
	opt       Options
	endpoint  endpoint
	services  map[string]*service
	flows     map[int32]*flowState
	sent      atomic.Int64
	failed    atomic.Int64
	noteMu    sync.Mutex
	lastError string
}

// service is one domain's tracer and the provider that batches its
// spans to the backend.
type service struct {
	provider *sdktrace.TracerProvider
	tracer   trace.Tracer
}

// flowState is how far a flow was exported: its trace, and its last
// hop's span and domain, which a later record extends or follows.
type flowState struct {
	trace    trace.TraceID
	hops     int
	lastSpan trace.SpanID
	domain   string
}

type endpoint struct {
	grpc   bool
	url    string // as the SDK's WithEndpointURL takes it
	pretty string // as the user gave it, for messages
}

// parseURL checks an OTLP endpoint URL and says which protocol it names.
func parseURL(raw string) (endpoint, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return endpoint{}, fmt.Errorf("--otlp %q: want a URL such as http://localhost:4318 (OTLP/HTTP) or grpc://localhost:4317 (OTLP/gRPC)", raw)
	}
	e := endpoint{pretty: raw}
	switch u.Scheme {
	case "http", "https":
		if u.Path == "" || u.Path == "/" {
			u.Path = "/v1/traces"
		}
	case "grpc", "grpcs":
		e.grpc = true
		u.Scheme = map[string]string{"grpc": "http", "grpcs": "https"}[u.Scheme]
	default:
		return endpoint{}, fmt.Errorf("--otlp %q: the scheme must be http, https (OTLP/HTTP), grpc or grpcs (OTLP/gRPC)", raw)
	}
	e.url = u.String()
	return e, nil
}

// CheckURL says whether raw is an OTLP endpoint New takes.
func CheckURL(raw string) error {
	_, err := parseURL(raw)
	return err
}

// New checks opt and returns an Exporter that sends nothing until
// events are added.
func New(opt Options) (*Exporter, error) {
	ep, err := parseURL(opt.URL)
	if err != nil {
		return nil, err
	}
	if opt.Retry <= 0 {
		opt.Retry = 30 * time.Second
	}
	if opt.Note == nil {
		opt.Note = io.Discard
	}
	// The SDK logs each failed export itself; the counting exporter says
	// it once, with the count.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(error) {}))
	return &Exporter{opt: opt, endpoint: ep, services: map[string]*service{}, flows: map[int32]*flowState{}}, nil
}

// service returns domain's tracer, starting its provider the first time.
func (e *Exporter) service(ctx context.Context, domain string) (*service, error) {
	if s, ok := e.services[domain]; ok {
		return s, nil
	}
	var exp sdktrace.SpanExporter
	var err error
	if e.endpoint.grpc {
		exp, err = otlptracegrpc.New(ctx, otlptracegrpc.WithEndpointURL(e.endpoint.url),
			otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: true, InitialInterval: 500 * time.Millisecond,
				MaxInterval: 5 * time.Second, MaxElapsedTime: e.opt.Retry}))
	} else {
		exp, err = otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(e.endpoint.url),
			otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: true, InitialInterval: 500 * time.Millisecond,
				MaxInterval: 5 * time.Second, MaxElapsedTime: e.opt.Retry}))
	}
	if err != nil {
		return nil, fmt.Errorf("otlp exporter for %s: %w", e.endpoint.pretty, err)
	}
	res := resource.NewSchemaless(
		attribute.String("service.name", domain),
		attribute.String("host.name", domain),
		attribute.String("klasy.domain", domain))
	// Blocking: a full queue waits for the backend instead of dropping
	// spans no one would count. A batch a second at most: trace --follow
	// shows what happens as it happens.
	bsp := sdktrace.NewBatchSpanProcessor(&counting{SpanExporter: exp, e: e}, sdktrace.WithBlocking(),
		sdktrace.WithBatchTimeout(time.Second))
	p := sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithSpanProcessor(bsp),
		sdktrace.WithIDGenerator(givenIDs{}), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	s := &service{provider: p, tracer: p.Tracer("github.com/klasy/klasy")}
	e.services[domain] = s
	return s, nil
}

// counting counts the spans its exporter sent and those it could not.
type counting struct {
	sdktrace.SpanExporter
	e *Exporter
}

func (c *counting) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := c.SpanExporter.ExportSpans(ctx, spans)
	if err != nil {
		c.e.failed.Add(int64(len(spans)))
		c.e.note(len(spans), err)
		return err
	}
	c.e.sent.Add(int64(len(spans)))
	return nil
}

// note says a batch was not sent; the same error again is said once.
func (e *Exporter) note(n int, err error) {
	e.noteMu.Lock()
	defer e.noteMu.Unlock()
	msg := err.Error()
	if msg == e.lastError {
		fmt.Fprintf(e.opt.Note, "klasy: otlp: %s more not sent to %s\n", human.Plural(n, "span"), e.endpoint.pretty)
		return
	}
	e.lastError = msg
	fmt.Fprintf(e.opt.Note, "klasy: otlp: %s not sent to %s: %v\n", human.Plural(n, "span"), e.endpoint.pretty, err)
}

// Add exports events, in host time order as timeline.Merge gives them;
// wall maps an event's host time to the wall-clock time its span gets.
// A hop ends where its flow's next record is in another domain, or at
// the end of es; a flow continued in a later Add (trace --follow)
// continues its trace with a new hop.
func (e *Exporter) Add(ctx context.Context, es []timeline.Event, wall func(hostNS int64) time.Time) error {
	open := map[int32][]timeline.Event{}
	var order []int32
	for _, ev := range es {
		if ev.Flow == 0 {
			if err := e.single(ctx, ev, wall); err != nil {
				return err
			}
			continue
		}
		h, ok := open[ev.Flow]
		if ok && h[0].Domain != ev.Domain {
			if err := e.hop(ctx, h, wall); err != nil {
				return err
			}
			h, ok = nil, false
		}
		if !ok {
			order = append(order, ev.Flow)
		}
		open[ev.Flow] = append(h, ev)
	}
	for _, f := range order {
		if h, ok := open[f]; ok {
			if err := e.hop(ctx, h, wall); err != nil {
				return err
			}
			delete(open, f)
		}
	}
	return nil
}

// flowTraceID is a flow's trace: its flow ID first (so a trace ID shows
// it in hex), then a hash of the domain it started in and the host time
// of its first record, which keeps the same flow ID of another weave or
// run a trace of its own.
func flowTraceID(first timeline.Event) trace.TraceID {
	var id trace.TraceID
	binary.BigEndian.PutUint32(id[:4], uint32(first.Flow))
	h := sha256.Sum256(fmt.Appendf(nil, "klasy flow %d %s %d", first.Flow, first.Domain, first.HostNS))
	copy(id[4:], h[:12])
	return id
}

// hopSpanID is the span of a flow's hop n.
func hopSpanID(tid trace.TraceID, n int) trace.SpanID {
	var id trace.SpanID
	h := sha256.Sum256(fmt.Appendf(nil, "%x hop %d", tid[:], n))
	copy(id[:], h[:8])
	if id == (trace.SpanID{}) {
		id[7] = 1
	}
	return id
}

// hop exports one hop of a flow as a span, the child of the flow's hop
// before it.
func (e *Exporter) hop(ctx context.Context, hop []timeline.Event, wall func(int64) time.Time) error {
	first, last := hop[0], hop[len(hop)-1]
	svc, err := e.service(ctx, first.Domain)
	if err != nil {
		return err
	}
	fl, ok := e.flows[first.Flow]
	if !ok {
		fl = &flowState{trace: flowTraceID(first)}
		e.flows[first.Flow] = fl
	}
	sid := hopSpanID(fl.trace, fl.hops)
	sctx := context.WithValue(ctx, idsKey{}, ids{trace: fl.trace, span: sid})
	if fl.hops > 0 {
		parent := trace.NewSpanContext(trace.SpanContextConfig{TraceID: fl.trace, SpanID: fl.lastSpan,
			TraceFlags: trace.FlagsSampled, Remote: fl.domain != first.Domain})
		sctx = trace.ContextWithSpanContext(sctx, parent)
	}
	attrs := append(recordAttrs(first), attribute.Int("klasy.flow", int(first.Flow)),
		attribute.Int("klasy.hop", fl.hops), attribute.Int("klasy.records", len(hop)))
	_, span := svc.tracer.Start(sctx, first.Function, trace.WithTimestamp(wall(first.HostNS)),
		trace.WithAttributes(attrs...), trace.WithSpanKind(trace.SpanKindInternal))
	for _, ev := range hop {
		span.AddEvent(ev.Function, trace.WithTimestamp(wall(ev.HostNS)), trace.WithAttributes(recordAttrs(ev)...))
	}
	span.End(trace.WithTimestamp(wall(last.HostNS)))
	fl.hops++
	fl.lastSpan, fl.domain = sid, first.Domain
	return nil
}

// single exports a record outside every flow: a span of its own.
func (e *Exporter) single(ctx context.Context, ev timeline.Event, wall func(int64) time.Time) error {
	svc, err := e.service(ctx, ev.Domain)
	if err != nil {
		return err
	}
	t := wall(ev.HostNS)
	_, span := svc.tracer.Start(ctx, ev.Function, trace.WithTimestamp(t), trace.WithAttributes(recordAttrs(ev)...),
		trace.WithNewRoot())
	span.End(trace.WithTimestamp(t))
	return nil
}

// recordAttrs are a record's fields as span attributes, by
// OpenTelemetry's semantic conventions where they have a name.
func recordAttrs(ev timeline.Event) []attribute.KeyValue {
	as := []attribute.KeyValue{
		attribute.String("code.function.name", ev.Function),
		attribute.String("code.file.path", ev.File),
		attribute.Int("code.line.number", ev.Line),
		attribute.Int("cpu.logical_number", ev.CPU),
		attribute.Int("thread.id", ev.PID),
		attribute.String("thread.name", ev.Comm),
		attribute.String("klasy.domain", ev.Domain),
		attribute.String("klasy.advice", fmt.Sprintf("%s#%d", ev.Aspect, ev.Advice)),
		attribute.String("klasy.pc", ev.PC),
	}
	if ev.InlinedIn != "" {
		as = append(as, attribute.String("klasy.inlined_in", ev.InlinedIn))
	}
	if len(ev.Values) > 0 {
		as = append(as, valuesAttr(ev.Values))
	}
	if ev.Dropped > 0 {
		as = append(as, attribute.Int("klasy.dropped_values", ev.Dropped))
	}
	return as
}

// Flush waits until every span added so far was sent or counted as not
// sent, and returns the counts so far.
func (e *Exporter) Flush(ctx context.Context) (Counts, error) {
	var errs []error
	for _, s := range e.services {
		errs = append(errs, s.provider.ForceFlush(ctx))
	}
	return e.Counts(), flushError(e, errors.Join(errs...))
}

// Close flushes and stops every service.
func (e *Exporter) Close(ctx context.Context) (Counts, error) {
	var errs []error
	for _, s := range e.services {
		errs = append(errs, s.provider.Shutdown(ctx))
	}
	e.services = map[string]*service{}
	return e.Counts(), flushError(e, errors.Join(errs...))
}

// flushError is Flush's and Close's error: the spans not sent, which the
// SDK's own error only repeats.
func flushError(e *Exporter, err error) error {
	if n := e.failed.Load(); n > 0 {
		return fmt.Errorf("otlp: %d of %s could not be sent to %s", n, human.Plural(int(n+e.sent.Load()), "span"), e.endpoint.pretty)
	}
	if err != nil && !strings.Contains(err.Error(), "already shutdown") {
		return fmt.Errorf("otlp: %w", err)
	}
	return nil
}

// Counts returns the spans sent and not sent so far.
func (e *Exporter) Counts() Counts { return Counts{Sent: e.sent.Load(), Failed: e.failed.Load()} }

// ids are the trace and span IDs a span is to get, put in its context:
// a flow's spans have IDs derived from the flow, not random ones.
type ids struct {
	trace trace.TraceID
	span  trace.SpanID
}

type idsKey struct{}

// givenIDs gives a span the IDs its context carries, or random ones.
type givenIDs struct{}

// random makes the IDs of spans outside flows.
type random struct{}

func (random) NewIDs(context.Context) (trace.TraceID, trace.SpanID) {
	var t trace.TraceID
	for t == (trace.TraceID{}) {
		binary.LittleEndian.PutUint64(t[:8], rand.Uint64())
		binary.LittleEndian.PutUint64(t[8:], rand.Uint64())
	}
	return t, random{}.NewSpanID(context.Background(), t)
}

func (random) NewSpanID(context.Context, trace.TraceID) trace.SpanID {
	var s trace.SpanID
	for s == (trace.SpanID{}) {
		binary.LittleEndian.PutUint64(s[:], rand.Uint64())
	}
	return s
}

func (givenIDs) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if v, ok := ctx.Value(idsKey{}).(ids); ok {
		return v.trace, v.span
	}
	return random{}.NewIDs(ctx)
}

func (givenIDs) NewSpanID(ctx context.Context, tid trace.TraceID) trace.SpanID {
	if v, ok := ctx.Value(idsKey{}).(ids); ok && v.trace == tid {
		return v.span
	}
	return random{}.NewSpanID(ctx, tid)
}

// valuesAttr is klasy.values: integers as an int64 array; with a string
// or another typed value among them, all as strings (an OTLP array has
// one type), integers in decimal and strings as stored.
func valuesAttr(vs []records.Value) attribute.KeyValue {
	ints := make([]int64, len(vs))
	strs := make([]string, len(vs))
	typed := false
	for i, v := range vs {
		n, ok := v.Integer()
		ints[i], strs[i] = n, strconv.FormatInt(n, 10)
		switch {
		case ok:
		case v.IsString() && !v.Bad:
			typed, strs[i] = true, v.Str
		default:
			typed, strs[i] = true, v.String()
		}
	}
	if typed {
		return attribute.StringSlice("klasy.values", strs)
	}
	return attribute.Int64Slice("klasy.values", ints)
}
