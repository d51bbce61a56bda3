// Package interrupt turns Ctrl-C and SIGTERM into contexts: the first
// signal cancels the context a command runs under, and a second one,
// which Again reports, tells work that cannot stop at once (a module
// the kernel is still loading, waited for so that it can be unwound)
// to stop waiting and say what it leaves behind.
package interrupt

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

type againKey struct{}

// Context is cancelled by the first Ctrl-C or SIGTERM; Again(ctx) is
// closed by the second. cancel releases the signals.
func Context() (ctx context.Context, cancel context.CancelFunc) {
	c := make(chan os.Signal, 2)
	signal.Notify(c, os.Interrupt, syscall.SIGTERM)
	again := make(chan struct{})
	ctx, cancelCtx := context.WithCancel(context.WithValue(context.Background(), againKey{}, (<-chan struct{})(again)))
	done := make(chan struct{})
	go func() {
		for n := 0; n < 2; n++ {
			select {
			case <-c:
			case <-done:
				return
			}
			if n == 0 {
				cancelCtx()
			} else {
				close(again)
			}
		}
	}()
	return ctx, func() {
		signal.Stop(c)
		close(done)
		cancelCtx()
	}
}

// Again is closed by the second signal of ctx's Context; never for a
// context that did not come from Context.
func Again(ctx context.Context) <-chan struct{} {
	if c, ok := ctx.Value(againKey{}).(<-chan struct{}); ok {
		return c
	}
	return nil
}

// CatchSIGPIPE makes a write to a closed pipe on standard output fail
// with EPIPE instead of killing the process, until stop is called.
func CatchSIGPIPE() (stop func()) {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGPIPE)
	return func() { signal.Stop(c) }
}
