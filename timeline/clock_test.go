package timeline

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestEstimate(t *testing.T) {
	tests := []struct {
		name    string
		ss      []Sample
		want    Clock
		wantErr string
	}{
		{"one sample", []Sample{{Before: 100, Guest: 5150, After: 200}}, Clock{OffsetNS: 5000, BoundNS: 50, RTTNS: 100, Samples: 1}, ""},
		{"shortest round trip wins", []Sample{{0, 1_000_500, 1000}, {2000, 1_002_040, 2080}, {3000, 1_003_500, 4000}},
			Clock{OffsetNS: 1_000_000, BoundNS: 40, RTTNS: 80, Samples: 3}, ""},
		{"first of equals", []Sample{{0, 10, 10}, {20, 40, 30}}, Clock{OffsetNS: 5, BoundNS: 5, RTTNS: 10, Samples: 2}, ""},
		{"guest behind the host", []Sample{{Before: 9_000_000, Guest: 1_000, After: 9_000_010}}, Clock{OffsetNS: -8_999_005, BoundNS: 5, RTTNS: 10, Samples: 1}, ""},
		// An odd round trip: the midpoint rounds down, the bound up.
		{"odd round trip", []Sample{{Before: 0, Guest: 0, After: 3}}, Clock{OffsetNS: -1, BoundNS: 2, RTTNS: 3, Samples: 1}, ""},
		{"zero round trip", []Sample{{Before: 7, Guest: 9, After: 7}}, Clock{OffsetNS: 2, RTTNS: 0, Samples: 1}, ""},
		{"no samples", nil, Clock{}, "no samples"},
		{"time runs back", []Sample{{0, 1, 10}, {20, 25, 19}}, Clock{}, "sample 1 ends at 19 before it starts at 20"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Estimate(tt.ss)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Estimate = %+v, %v; want error %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("Estimate = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

// TestEstimateWithinBound simulates exchanges with a guest whose clock
// runs a known offset from the host's and whose answers take random
// delays each way: the estimate must lie within its bound of the truth,
// and the bound must be half the shortest round trip.
func TestEstimateWithinBound(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 1000; trial++ {
		offset := r.Int64N(2e12) - 1e12
		host := r.Int64N(1e12)
		var ss []Sample
		minRTT := int64(-1)
		for i := 0; i < 1+r.IntN(20); i++ {
			out, back := r.Int64N(5e6), r.Int64N(5e6) // asymmetric delays
			if r.IntN(4) == 0 {
				back *= 100 // a slow answer now and then
			}
			s := Sample{Before: host, Guest: host + out + offset, After: host + out + back}
			ss = append(ss, s)
			if minRTT < 0 || out+back < minRTT {
				minRTT = out + back
			}
			host += out + back + r.Int64N(1e6)
		}
		c, err := Estimate(ss)
		if err != nil {
			t.Fatal(err)
		}
		if c.RTTNS != minRTT || c.BoundNS != (minRTT+1)/2 {
			t.Fatalf("trial %d: round trip %d bound %d, want %d and %d", trial, c.RTTNS, c.BoundNS, minRTT, (minRTT+1)/2)
		}
		if d := c.OffsetNS - offset; d > c.BoundNS || d < -c.BoundNS {
			t.Fatalf("trial %d: offset %d, truth %d: off by %d, beyond the bound %d", trial, c.OffsetNS, offset, d, c.BoundNS)
		}
	}
}

func TestMeasure(t *testing.T) {
	host := int64(1000)
	tick := func() int64 { host += 10; return host }
	calls := 0
	guest := func(context.Context) (int64, error) {
		calls++
		if calls == 3 {
			host += 1000 // one slow exchange, not the one used
		}
		return host + 500, nil
	}
	c, err := Measure(context.Background(), 4, tick, guest)
	if err != nil {
		t.Fatal(err)
	}
	if calls != 4 || c.Samples != 4 || c.RTTNS != 10 || c.OffsetNS != 495 || c.BoundNS != 5 {
		t.Errorf("Measure = %+v after %d calls, want 4 samples, round trip 10, offset 495 ± 5", c, calls)
	}
	calls = 0
	if _, err := Measure(context.Background(), 0, tick, guest); err != nil || calls != DefaultSamples {
		t.Errorf("Measure(n=0) made %d exchanges (%v), want %d", calls, err, DefaultSamples)
	}
	boom := errors.New("agent gone")
	_, err = Measure(context.Background(), 3, tick, func(context.Context) (int64, error) { return 0, boom })
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "reading the guest's clock") {
		t.Errorf("Measure with a failing guest = %v, want the failure wrapped", err)
	}
}

// TestHostNowAgainstItself: the host measured against itself has an
// offset within its bound of zero.
func TestHostNowAgainstItself(t *testing.T) {
	c, err := Measure(context.Background(), 0, HostNow, func(context.Context) (int64, error) { return HostNow(), nil })
	if err != nil {
		t.Fatal(err)
	}
	if c.OffsetNS > c.BoundNS || c.OffsetNS < -c.BoundNS {
		t.Errorf("the host against itself: offset %d ± %d, want 0 within the bound", c.OffsetNS, c.BoundNS)
	}
}
