package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// signalContext is cancelled by Ctrl-C or SIGTERM, so that a weave in
// progress rolls back and a trace --follow ends.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// catchSIGPIPE makes a write to a closed pipe on standard output fail
// with EPIPE instead of killing the process, until stop is called.
func catchSIGPIPE() (stop func()) {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGPIPE)
	return func() { signal.Stop(c) }
}
