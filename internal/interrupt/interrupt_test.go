package interrupt

import (
	"syscall"
	"testing"
	"time"
)

// The first signal cancels the context and leaves Again open; the
// second closes Again.
func TestTwoSignals(t *testing.T) {
	ctx, cancel := Context()
	defer cancel()
	syscall.Kill(syscall.Getpid(), syscall.SIGTERM)
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("SIGTERM did not cancel the context")
	}
	select {
	case <-Again(ctx):
		t.Fatal("Again closed by the first signal")
	case <-time.After(100 * time.Millisecond):
	}
	syscall.Kill(syscall.Getpid(), syscall.SIGINT)
	select {
	case <-Again(ctx):
	case <-time.After(5 * time.Second):
		t.Fatal("the second signal did not close Again")
	}
}
