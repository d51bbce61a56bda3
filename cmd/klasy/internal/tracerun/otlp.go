package tracerun

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/klasy/klasy/internal/human"
	"github.com/klasy/klasy/otlpexport"
	"github.com/klasy/klasy/timeline"
	"github.com/klasy/klasy/weaver/records"
)

// otlpSink is trace --otlp: the records of one kernel, or the merged
// timeline of several, sent to a tracing backend as they are read.
type otlpSink struct {
	exp    *otlpexport.Exporter
	domain string
	clock  timeline.Clock // the kernel's clock against the host's
	// wall maps host CLOCK_MONOTONIC to the wall clock, which spans take.
	monoAt int64
	wallAt time.Time
	err    io.Writer
}

// newOTLPSink checks the URL and, for one kernel (clock non-nil),
// measures that kernel's clock against the host's.
func newOTLPSink(ctx context.Context, f Options, errw io.Writer, domain string, clock func(context.Context) (int64, error)) (*otlpSink, error) {
	exp, err := otlpexport.New(otlpexport.Options{URL: f.OTLP, Retry: f.OTLPRetry, Note: errw})
	if err != nil {
		return nil, err
	}
	s := &otlpSink{exp: exp, domain: domain, err: errw}
	if clock != nil {
		c, err := timeline.Measure(ctx, f.ClockSamples, f.HostClock, clock)
		if err != nil {
			return nil, fmt.Errorf("--otlp: %s's clock: %w", domain, err)
		}
		s.clock = c
	}
	s.monoAt, s.wallAt = f.HostClock(), time.Now()
	return s, nil
}

func (s *otlpSink) wall(hostNS int64) time.Time {
	return s.wallAt.Add(time.Duration(hostNS - s.monoAt))
}

// addRecords sends one kernel's records.
func (s *otlpSink) addRecords(ctx context.Context, rs []records.TraceRecord) error {
	if len(rs) == 0 {
		return nil
	}
	es := timeline.Merge([]timeline.Domain{{Name: s.domain, Clock: s.clock, Records: rs}})
	return s.exp.Add(ctx, es, s.wall)
}

// addEvents sends a merged timeline.
func (s *otlpSink) addEvents(ctx context.Context, es []timeline.Event) error {
	return s.exp.Add(ctx, es, s.wall)
}

// close sends what is queued and says how much went: the error counts
// the spans not sent.
func (s *otlpSink) close() error {
	// Not the trace's context: Ctrl-C ends reading, and what was read is
	// still sent (each batch's retries are bounded).
	c, err := s.exp.Close(context.Background())
	if err == nil {
		fmt.Fprintf(s.err, "klasy: otlp: %s sent\n", human.Plural(int(c.Sent), "span"))
	}
	return err
}
