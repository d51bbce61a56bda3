package agent

import (
	"context"
	"errors"
	"net"
	"syscall"
	"time"

	"github.com/klasy/klasy/internal/human"
)

// The accept loops (ServeTLS's and Mux's) outlive errors that pass:
// "accept4: too many open files" when idle peers hold every descriptor,
// a connection reset before it was accepted. As net/http's Server does,
// they wait and try again, from acceptRetryMin doubling to
// acceptRetryMax, until a connection is accepted again.
const (
	acceptRetryMin = 5 * time.Millisecond
	acceptRetryMax = time.Second
)

// acceptRetry is the back-off of one accept loop.
type acceptRetry struct {
	delay  time.Duration // 0: the last Accept succeeded
	failed int           // errors since then
	logf   func(format string, a ...any)
	what   string // "connections", "clients"
}

// retryable says whether an accept error passes: descriptors or memory
// run out, a peer gave up before it was accepted, or the error says it
// is temporary or a timeout.
func retryable(err error) bool {
	for _, e := range []error{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED, syscall.ECONNRESET, syscall.EAGAIN, syscall.EINTR} {
		if errors.Is(err, e) {
			return true
		}
	}
	var t interface{ Temporary() bool }
	if errors.As(err, &t) && t.Temporary() {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// wait handles an error of Accept: one that passes is logged (the first
// of a run) and waited out, and wait returns true to try again; any
// other, or ctx done meanwhile, returns false.
func (r *acceptRetry) wait(ctx context.Context, err error) bool {
	if ctx.Err() != nil || !retryable(err) {
		return false
	}
	if r.delay == 0 {
		r.delay = acceptRetryMin
		r.logf("accepting %s: %v; trying again, every %v at most", r.what, err, acceptRetryMax)
	} else {
		r.delay = min(2*r.delay, acceptRetryMax)
	}
	r.failed++
	t := time.NewTimer(r.delay)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// ok notes a connection accepted, and that a run of errors is over.
func (r *acceptRetry) ok() {
	if r.failed > 0 {
		r.logf("accepting %s again, after %s", r.what, human.Plural(r.failed, "failed accept"))
	}
	r.delay, r.failed = 0, 0
}
