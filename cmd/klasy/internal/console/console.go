// Package console bridges a terminal to a lab's serial console (QEMU's
// console socket): raw and interactive, Ctrl-] to quit, when standard
// input is a terminal; else the input is sent and the console's answer
// printed until a second of quiet, for scripts.
package console

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"golang.org/x/term"
)

// Attach bridges in and out to conn, the console of what (for
// messages); flush flushes out, which is buffered.
func Attach(ctx context.Context, conn net.Conn, what string, in io.Reader, out, errOut io.Writer, flush func() error) error {
	if f, isFile := in.(*os.File); isFile && term.IsTerminal(int(f.Fd())) {
		old, err := term.MakeRaw(int(f.Fd()))
		if err != nil {
			return fmt.Errorf("putting the terminal in raw mode: %w", err)
		}
		defer term.Restore(int(f.Fd()), old)
		fmt.Fprintf(errOut, "connected to the console of %s; Ctrl-] quits\r\n", what)
		conn.Write([]byte("\n")) // a fresh prompt
		return interactive(conn, f, flushing{out, flush})
	}
	// Not a terminal: send the input, print until a second of quiet.
	done := make(chan struct{})
	go func() {
		io.Copy(conn, in)
		close(done)
	}()
	buf := make([]byte, 4096)
	inputDone := false
	for {
		if inputDone {
			conn.SetReadDeadline(time.Now().Add(time.Second))
		} else {
			conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		}
		n, err := conn.Read(buf)
		out.Write(buf[:n])
		if err := flush(); err != nil {
			return err
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			if inputDone {
				return nil
			}
			select {
			case <-done:
				inputDone = true
			case <-ctx.Done():
				return nil
			default:
			}
			continue
		}
		if err != nil {
			return nil
		}
	}
}

// interactive copies between the terminal and the console until Ctrl-]
// or until QEMU closes the console.
func interactive(conn net.Conn, in *os.File, out io.Writer) error {
	errc := make(chan error, 2)
	go func() {
		_, err := io.Copy(out, conn)
		errc <- err
	}()
	go func() {
		buf := make([]byte, 256)
		for {
			n, err := in.Read(buf)
			if i := strings.IndexByte(string(buf[:n]), 0x1d); i >= 0 {
				conn.Write(buf[:i])
				errc <- nil
				return
			}
			if _, werr := conn.Write(buf[:n]); werr != nil {
				errc <- werr
				return
			}
			if err != nil {
				errc <- nil
				return
			}
		}
	}()
	<-errc
	fmt.Fprint(out, "\r\n")
	return nil
}

// flushing writes to out and flushes it at once: the console is
// interactive.
type flushing struct {
	out   io.Writer
	flush func() error
}

func (f flushing) Write(p []byte) (int, error) {
	n, err := f.out.Write(p)
	if err == nil {
		err = f.flush()
	}
	return n, err
}
