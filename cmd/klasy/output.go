package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
)

// output is the one path a command's data takes to standard output. run
// gives every command one: writes are buffered (a query prints thousands
// of lines), the first write error is kept and makes every later write
// fail, and run flushes it once at the end and turns a lost write into the
// command's error, so no command exits 0 when its output was not written,
// and no command has a flush of its own to forget.
type output struct {
	w    *bufio.Writer
	err  error
	werr error // Err's value, the same each time
}

func newOutput(w io.Writer) *output { return &output{w: bufio.NewWriterSize(w, 64<<10)} }

func (o *output) Write(p []byte) (int, error) {
	if o.err != nil {
		return 0, o.err
	}
	n, err := o.w.Write(p)
	o.err = err
	return n, err
}

// Flush writes what is buffered; a command that streams (a console)
// calls it after each piece so the user sees it at once.
func (o *output) Flush() error {
	if o.err == nil {
		o.err = o.w.Flush()
	}
	return o.err
}

// Err is the first write error, as "writing output: CAUSE": the same
// error each time, so that a command's error that wraps it (saying
// what was not written) is told from others.
func (o *output) Err() error {
	if o.err == nil {
		return nil
	}
	if o.werr == nil {
		err := o.err
		var pe *fs.PathError // "write /dev/stdout: ..." says nothing more
		if errors.As(err, &pe) {
			err = pe.Err
		}
		o.werr = fmt.Errorf("writing output: %w", err)
	}
	return o.werr
}

// diagnostics is standard error for a command whose standard output is
// out: it flushes out before each write, so on a terminal data and
// diagnostics appear in the order the command wrote them.
type diagnostics struct {
	out *output
	w   io.Writer
}

func (d diagnostics) Write(p []byte) (int, error) {
	d.out.Flush() // an error stays in out, for run to report
	return d.w.Write(p)
}

// flush writes what s.Out buffers and returns the first write error, as
// run would report it. A command calls it where it must know its output
// was written before it goes on (a summary on standard error, a console
// that echoes at once); run flushes at the end anyway.
func (s *stdio) flush() error {
	if o, ok := s.Out.(*output); ok {
		o.Flush()
		return o.Err()
	}
	return nil
}
