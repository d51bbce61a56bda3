package weaver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/klasy/klasy/weaver/gen"
	"github.com/klasy/klasy/weaver/target"
)

// A pointcut such as execution(%) selects hundreds of thousands of join
// points: hundreds of megabytes of C that gcc may not build in hours,
// and a load that registers hooks for longer still. A weave is bounded
// by default; the bounds say so before anything is built, and a flag
// raises them.
const (
	// DefaultMaxJoinPoints is about 15 minutes of registration in a lab
	// under QEMU (access(sk_buff.%), 11,000 join points, takes 100 s).
	DefaultMaxJoinPoints = 20000
	// DefaultMaxCMiB bounds the generated C: about 1 KiB a hook.
	DefaultMaxCMiB = 64
	// DefaultMaxBuild bounds the advice module's build: gcc's time grows
	// faster than the advice's size (an aspect of 939 KiB, under the
	// aspect file's bound, was still compiling after 400 s).
	DefaultMaxBuild = 20 * time.Minute
	// progressHooks is the size of a weave whose load reports progress.
	progressHooks = 1000
)

// progressEvery is how often a large load reports (a test shortens it).
var progressEvery = 10 * time.Second

// BoundError is a weave refused by a bound: the refusal is all there is
// to say of it.
type BoundError struct{ Msg string }

func (e *BoundError) Error() string { return e.Msg }

// checkJoinPoints refuses more join points than the session allows.
func (s *Session) checkJoinPoints(n int) error {
	limit := s.MaxJoinPoints
	if limit <= 0 {
		limit = DefaultMaxJoinPoints
	}
	if n > limit {
		return &BoundError{fmt.Sprintf("the aspect selects %d join points in %s, more than the %d a weave may have (each is a kprobe the kernel registers one at a time: about 10 ms each under QEMU): narrow its pointcuts (klasy list shows them), or raise the bound with --max-join-points", n, s.T.Name(), limit)}
	}
	return nil
}

// buildBounded gives the advice module's build the time the session
// allows, and turns running out of it into a BoundError.
func (s *Session) buildBounded(ctx context.Context, m *gen.Module, build func(context.Context) error) error {
	limit := s.MaxBuild
	if limit <= 0 {
		limit = DefaultMaxBuild
	}
	bctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	err := build(bctx)
	if err != nil && ctx.Err() == nil && errors.Is(bctx.Err(), context.DeadlineExceeded) {
		return &BoundError{fmt.Sprintf("building the advice module %s took more than the %v a weave may build for, and was stopped (gcc's time grows with the advice's size and the join points): shorten the advice or narrow the pointcuts, or raise the bound with --max-build-time", m.Name, limit)}
	}
	return err
}

// checkCSize refuses generated C larger than the session allows.
func (s *Session) checkCSize(m *gen.Module) error {
	limit := s.MaxCMiB
	if limit <= 0 {
		limit = DefaultMaxCMiB
	}
	var n int
	for _, b := range m.Files {
		n += len(b)
	}
	if n > limit<<20 {
		return &BoundError{fmt.Sprintf("the advice module %s is %.1f MiB of C, more than the %d MiB a weave may generate (gcc's time and memory grow with it): narrow the pointcuts or shorten the advice, or raise the bound with --max-c-mb", m.Name, float64(n)/(1<<20), limit)}
	}
	return nil
}

// loadProgress reports, every progressEvery until stop is called, how
// many of a large module's hooks the kernel has registered: the count
// of kprobes over the count before the load.
func (s *Session) loadProgress(ctx context.Context, m *gen.Module) (stop func()) {
	if len(m.Hooks) < progressHooks {
		return func() {}
	}
	count := func() int {
		b, err := s.T.ReadFile(ctx, target.KprobesList)
		if err != nil {
			return -1
		}
		return bytes.Count(b, []byte("\n"))
	}
	before := count()
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		start := time.Now()
		tick := time.NewTicker(progressEvery)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if n := count(); n >= 0 && before >= 0 {
				fmt.Fprintf(s.log, "klasy: %s: %d of %d hooks registered in %s after %.0f s\n", m.Name, min(max(n-before, 0), len(m.Hooks)), len(m.Hooks), s.T.Name(), time.Since(start).Seconds())
			}
		}
	}()
	return func() { close(done); <-finished }
}
