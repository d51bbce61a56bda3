// Package jaegertest runs a real Jaeger for the tests that check what
// klasy trace --otlp sends: the all-in-one binary scripts/build-jaeger.sh
// builds into the cache, with OTLP receivers and in-memory storage on
// ports of its own, and a reader of its query API (/api/traces), which is
// what a user looks at. Without the binary a test skips, or fails under
// make test (feature "jaeger").
package jaegertest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/klasy/klasy/internal/cachedir"
	"github.com/klasy/klasy/internal/testenv"
)

// Version is the Jaeger scripts/build-jaeger.sh builds.
const Version = "v1.76.0"

// Jaeger is a running Jaeger: OTLPHTTP and OTLPGRPC are the URLs klasy
// trace --otlp takes.
type Jaeger struct {
	OTLPHTTP, OTLPGRPC string
	query, bin, config string
	cmd                *exec.Cmd
	log                *bytes.Buffer // what the running one prints
	exited             chan struct{}
}

// freePort returns a port nothing listens on now.
func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

const config = `service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  jaeger_query:
    storage:
      traces: mem
    http:
      endpoint: 127.0.0.1:%d
    grpc:
      endpoint: 127.0.0.1:%d
  jaeger_storage:
    backends:
      mem:
        memory:
          max_traces: 100000
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:%d
      http:
        endpoint: 127.0.0.1:%d
processors:
  batch:
    timeout: 100ms
exporters:
  jaeger_storage_exporter:
    trace_storage: mem
`

// Start starts Jaeger and waits until its query API answers; it is
// stopped when t ends.
func Start(t testing.TB) *Jaeger {
	t.Helper()
	bin := filepath.Join(cachedir.Root(), "jaeger", Version, "jaeger")
	_, err := os.Stat(bin)
	if err != nil {
		err = fmt.Errorf("no Jaeger at %s: run make jaeger", bin)
	}
	testenv.Need(t, "jaeger", err)
	// The ports are free when picked, not when Jaeger binds them: another
	// process may take one in between. Then it is tried on others.
	for attempt := 1; ; attempt++ {
		qhttp, qgrpc, ogrpc, ohttp := freePort(t), freePort(t), freePort(t), freePort(t)
		cfg := filepath.Join(t.TempDir(), "jaeger.yaml")
		if err := os.WriteFile(cfg, fmt.Appendf(nil, config, qhttp, qgrpc, ogrpc, ohttp), 0o644); err != nil {
			t.Fatal(err)
		}
		j := &Jaeger{
			OTLPHTTP: fmt.Sprintf("http://127.0.0.1:%d", ohttp),
			OTLPGRPC: fmt.Sprintf("grpc://127.0.0.1:%d", ogrpc),
			query:    fmt.Sprintf("http://127.0.0.1:%d", qhttp),
			bin:      bin,
			config:   cfg,
		}
		err := j.start()
		if err == nil {
			t.Cleanup(j.Stop)
			return j
		}
		if attempt == 3 || !bytes.Contains(j.log.Bytes(), []byte("address already in use")) {
			t.Fatal(err)
		}
		t.Logf("jaeger: a port was taken before it bound it, trying others")
	}
}

// start runs Jaeger and waits until its query API answers.
func (j *Jaeger) start() error {
	j.log, j.exited = &bytes.Buffer{}, make(chan struct{})
	j.cmd = exec.Command(j.bin, "--config", j.config)
	j.cmd.Stdout, j.cmd.Stderr = j.log, j.log
	if err := j.cmd.Start(); err != nil {
		return err
	}
	cmd, exited := j.cmd, j.exited
	go func() { cmd.Wait(); close(exited) }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := j.get("/api/services"); err == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("jaeger exited at start:\n%s", j.log)
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			j.Stop()
			return fmt.Errorf("jaeger's query API did not answer in 60 s:\n%s", j.log)
		}
	}
}

// Restart starts a stopped Jaeger again on the same ports, with empty
// storage.
func (j *Jaeger) Restart(t testing.TB) {
	t.Helper()
	j.Stop()
	if err := j.start(); err != nil {
		t.Fatal(err)
	}
}

// Stop stops Jaeger (its storage is gone with it).
func (j *Jaeger) Stop() {
	select {
	case <-j.exited:
		return
	default:
	}
	j.cmd.Process.Signal(os.Interrupt)
	select {
	case <-j.exited:
	case <-time.After(10 * time.Second):
		j.cmd.Process.Kill()
		<-j.exited
	}
}

// Log is what Jaeger printed.
func (j *Jaeger) Log() string { return j.log.String() }

func (j *Jaeger) get(path string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, j.query+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %s", path, resp.Status, b.String())
	}
	return b.Bytes(), nil
}

// Span is a span as Jaeger's query API gives it.
type Span struct {
	TraceID, SpanID, Parent string
	Name, Service           string
	Start                   time.Time
	Duration                time.Duration
	Tags                    map[string]any
	Events                  int
}

// Trace is a trace's spans, in start order.
type Trace struct {
	ID    string
	Spans []Span
}

// apiTraces is /api/traces' answer.
type apiTraces struct {
	Data []struct {
		TraceID string `json:"traceID"`
		Spans   []struct {
			TraceID       string `json:"traceID"`
			SpanID        string `json:"spanID"`
			OperationName string `json:"operationName"`
			References    []struct {
				RefType string `json:"refType"`
				SpanID  string `json:"spanID"`
			} `json:"references"`
			StartTime int64  `json:"startTime"` // µs
			Duration  int64  `json:"duration"`  // µs
			ProcessID string `json:"processID"`
			Tags      []struct {
				Key   string `json:"key"`
				Value any    `json:"value"`
			} `json:"tags"`
			Logs []json.RawMessage `json:"logs"`
		} `json:"spans"`
		Processes map[string]struct {
			ServiceName string `json:"serviceName"`
		} `json:"processes"`
	} `json:"data"`
}

// Traces returns the traces with a span of service (up to limit).
func (j *Jaeger) Traces(service string, limit int) ([]Trace, error) {
	b, err := j.get(fmt.Sprintf("/api/traces?service=%s&limit=%d&lookback=2d", url.QueryEscape(service), limit))
	if err != nil {
		return nil, err
	}
	var at apiTraces
	if err := json.Unmarshal(b, &at); err != nil {
		return nil, fmt.Errorf("jaeger's /api/traces: %w", err)
	}
	var ts []Trace
	for _, d := range at.Data {
		tr := Trace{ID: d.TraceID}
		for _, s := range d.Spans {
			sp := Span{TraceID: s.TraceID, SpanID: s.SpanID, Name: s.OperationName,
				Service: d.Processes[s.ProcessID].ServiceName, Start: time.UnixMicro(s.StartTime),
				Duration: time.Duration(s.Duration) * time.Microsecond, Tags: map[string]any{}, Events: len(s.Logs)}
			for _, r := range s.References {
				if r.RefType == "CHILD_OF" {
					sp.Parent = r.SpanID
				}
			}
			for _, tg := range s.Tags {
				sp.Tags[tg.Key] = tg.Value
			}
			tr.Spans = append(tr.Spans, sp)
		}
		sort.SliceStable(tr.Spans, func(a, b int) bool { return tr.Spans[a].Start.Before(tr.Spans[b].Start) })
		ts = append(ts, tr)
	}
	return ts, nil
}

// Wait polls Traces until ok accepts them or the timeout ends, and
// returns the last answer: spans reach the query API after Jaeger's
// batch.
func (j *Jaeger) Wait(service string, limit int, timeout time.Duration, ok func([]Trace) bool) ([]Trace, error) {
	deadline := time.Now().Add(timeout)
	for {
		ts, err := j.Traces(service, limit)
		if err == nil && ok(ts) || time.Now().After(deadline) {
			return ts, err
		}
		time.Sleep(300 * time.Millisecond)
	}
}
