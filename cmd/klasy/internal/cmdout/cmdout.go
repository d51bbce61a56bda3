// Package cmdout is how a klasy command's output reaches its standard
// output and error: buffered, the first write error kept and reported
// once, diagnostics written in order with the data.
package cmdout

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
)

// Output is the one path a command's data takes to standard output. run
// gives every command one: writes are buffered (a query prints thousands
// of lines), the first write error is kept and makes every later write
// fail, and run flushes it once at the end and turns a lost write into the
// command's error, so no command exits 0 when its output was not written,
// and no command has a flush of its own to forget.
type Output struct {
	w    *bufio.Writer
	err  error
	werr error // Err's value, the same each time
}

// New buffers w.
func New(w io.Writer) *Output { return &Output{w: bufio.NewWriterSize(w, 64<<10)} }

func (o *Output) Write(p []byte) (int, error) {
	if o.err != nil {
		return 0, o.err
	}
	n, err := o.w.Write(p)
	o.err = err
	return n, err
}

// Flush writes what is buffered; a command that streams (a console)
// calls it after each piece so the user sees it at once.
func (o *Output) Flush() error {
	if o.err == nil {
		o.err = o.w.Flush()
	}
	return o.err
}

// Err is the first write error, as "writing output: CAUSE": the same
// error each time, so that a command's error that wraps it (saying
// what was not written) is told from others.
func (o *Output) Err() error {
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

// Diagnostics is standard error W for a command whose standard output is
// Out: it flushes Out before each write, so on a terminal data and
// diagnostics appear in the order the command wrote them.
type Diagnostics struct {
	Out *Output
	W   io.Writer
}

func (d Diagnostics) Write(p []byte) (int, error) {
	d.Out.Flush() // an error stays in out, for run to report
	return d.W.Write(p)
}
