// Package timeline merges the records of several kernels (domains) into
// one timeline in the host's time: it estimates each guest clock's
// offset to the host's from timestamps exchanged over the agent channel
// (Measure, Estimate), orders every domain's records by host time
// (Merge), gathers them into flows by flow ID (Flows) and writes them
// as a Chrome/Perfetto trace-event file (WritePerfetto). It touches no
// kernel: callers hand it the records and a way to read a guest's clock.
package timeline

import (
	"context"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// Sample is one exchange of timestamps with a guest: the host's
// CLOCK_MONOTONIC read before asking, the guest's reading, and the
// host's read after the answer came, all in nanoseconds. The guest read
// its clock at some host moment between Before and After.
type Sample struct {
	Before, Guest, After int64
}

// Clock is a guest clock's offset to the host's: a record stamped g by
// the guest happened at host time g − OffsetNS, give or take BoundNS.
// The bound is half the round trip of the sample the offset comes from,
// the widest the truth can lie from the estimate whatever the delays
// each way were (Cristian's algorithm); it assumes neither clock drifts
// over the round trip.
type Clock struct {
	OffsetNS int64 `json:"offset_ns"` // guest − host
	BoundNS  int64 `json:"bound_ns"`  // |true offset − OffsetNS| ≤ BoundNS
	RTTNS    int64 `json:"rtt_ns"`    // the round trip of the sample used
	Samples  int   `json:"samples"`   // exchanges made
}

// Host maps a guest timestamp to host time.
func (c Clock) Host(guestNS uint64) int64 { return int64(guestNS) - c.OffsetNS }

// Estimate takes the sample with the shortest round trip (the first of
// equals) and returns the offset it gives: the guest's reading less the
// midpoint of the host's two, bounded by half the round trip (rounded
// up, so the bound holds for the midpoint rounded down).
func Estimate(ss []Sample) (Clock, error) {
	if len(ss) == 0 {
		return Clock{}, errors.New("estimating a clock offset: no samples")
	}
	best := -1
	for i, s := range ss {
		if s.After < s.Before {
			return Clock{}, fmt.Errorf("estimating a clock offset: sample %d ends at %d before it starts at %d", i, s.After, s.Before)
		}
		if best < 0 || s.After-s.Before < ss[best].After-ss[best].Before {
			best = i
		}
	}
	s := ss[best]
	rtt := s.After - s.Before
	mid := s.Before + rtt/2
	return Clock{OffsetNS: s.Guest - mid, BoundNS: rtt - rtt/2, RTTNS: rtt, Samples: len(ss)}, nil
}

// DefaultSamples is how many exchanges Measure makes unless told: the
// shortest of 16 round trips over a lab's serial line under emulation
// is a few times shorter than a typical one.
const DefaultSamples = 16

// Measure makes n exchanges (DefaultSamples if n ≤ 0), each reading
// host, then guest, then host, and estimates the offset from them.
func Measure(ctx context.Context, n int, host func() int64, guest func(context.Context) (int64, error)) (Clock, error) {
	if n <= 0 {
		n = DefaultSamples
	}
	ss := make([]Sample, 0, n)
	for i := 0; i < n; i++ {
		before := host()
		g, err := guest(ctx)
		after := host()
		if err != nil {
			return Clock{}, fmt.Errorf("reading the guest's clock: %w", err)
		}
		ss = append(ss, Sample{Before: before, Guest: g, After: after})
	}
	return Estimate(ss)
}

// HostNow reads the host's CLOCK_MONOTONIC in nanoseconds, the clock
// guests' records are mapped onto.
func HostNow() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic(fmt.Sprintf("clock_gettime(CLOCK_MONOTONIC): %v", err)) // cannot fail on Linux
	}
	return ts.Nano()
}
