package boundedread

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"testing/iotest"
	"time"
)

// zeros is an endless input, as /dev/zero or `yes` on a pipe.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

func TestReader(t *testing.T) {
	const limit = 1 << 10
	for _, c := range []struct {
		name string
		in   io.Reader
		want string // error text, "" for success
		n    int
	}{
		{"empty", strings.NewReader(""), "", 0},
		{"small", strings.NewReader("<aspect/>"), "", 9},
		{"exactly the limit", bytes.NewReader(make([]byte, limit)), "", limit},
		{"one byte over", bytes.NewReader(make([]byte, limit+1)), "<stdin>: larger than the 1 KiB limit for an aspect", 0},
		{"endless", zeros{}, "<stdin>: larger than the 1 KiB limit for an aspect", 0},
		{"one byte at a time", iotest.OneByteReader(strings.NewReader(strings.Repeat("x", 700))), "", 700},
		{"read error", iotest.ErrReader(errors.New("broken")), "broken", 0},
	} {
		b, err := Reader("<stdin>", c.in, limit, "an aspect")
		if c.want == "" {
			if err != nil || len(b) != c.n {
				t.Errorf("%s: %d bytes, %v; want %d bytes", c.name, len(b), err, c.n)
			}
			continue
		}
		if err == nil || err.Error() != c.want {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

func TestFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, n int) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, bytes.Repeat([]byte("x"), n), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const limit = 4 << 10
	for _, c := range []struct {
		path string
		want string // error text, "" for success
	}{
		{write("small.klasy", 100), ""},
		{write("limit.klasy", limit), ""},
		{write("big.klasy", limit+1), "big.klasy: larger than the 4 KiB limit for an aspect"},
		{dir, ": a directory, not a regular file or a pipe"},
		{"/dev/zero", "/dev/zero: a character device, not a regular file or a pipe"},
		{"/dev/urandom", "/dev/urandom: a character device, not a regular file or a pipe"},
		{filepath.Join(dir, "missing"), "open " + filepath.Join(dir, "missing") + ": no such file or directory"},
	} {
		b, err := File(c.path, limit, "an aspect")
		if c.want == "" {
			fi, _ := os.Stat(c.path)
			if err != nil || int64(len(b)) != fi.Size() {
				t.Errorf("%s: %d bytes, %v", c.path, len(b), err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.path, err, c.want)
		}
	}
}

// TestFIFO: a named pipe is read like a file, and an endless writer
// meets the bound.
func TestFIFO(t *testing.T) {
	for _, c := range []struct {
		name   string
		writer func(w io.Writer)
		want   string
	}{
		{"short", func(w io.Writer) { io.WriteString(w, "<aspect/>") }, ""},
		{"endless", func(w io.Writer) { io.Copy(w, zeros{}) }, "larger than the 64 KiB limit for an aspect"},
	} {
		p := filepath.Join(t.TempDir(), "fifo")
		if err := syscall.Mkfifo(p, 0o600); err != nil {
			t.Skipf("mkfifo: %v", err)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			w, err := os.OpenFile(p, os.O_WRONLY, 0)
			if err != nil {
				return
			}
			defer w.Close()
			c.writer(w) // ends with EPIPE once the reader is gone
		}()
		start := time.Now()
		b, err := File(p, 64<<10, "an aspect")
		switch {
		case c.want == "" && (err != nil || string(b) != "<aspect/>"):
			t.Errorf("%s: %q, %v", c.name, b, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("%s: took %v", c.name, d)
		}
		<-done
	}
}

func TestSize(t *testing.T) {
	for n, want := range map[int64]string{1 << 20: "1 MiB", 64 << 10: "64 KiB", 1536: "1536 bytes", 100: "100 bytes", 3 << 20: "3 MiB"} {
		if got := Size(n); got != want {
			t.Errorf("Size(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestOpenRegular: regular files open; everything else is refused by
// name, and a FIFO without a writer does not block the open.
func TestOpenRegular(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "vmlinux")
	if err := os.WriteFile(file, []byte("\x7fELF"), 0o644); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "sock")
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	if err := syscall.Bind(fd, &syscall.SockaddrUnix{Name: sock}); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(file, link); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path string
		want string // error text, "" for success
	}{
		{file, ""},
		{link, ""},
		{fifo, fifo + ": a FIFO, not a regular file"},
		{dir, dir + ": a directory, not a regular file"},
		{"/dev/null", "/dev/null: a character device, not a regular file"},
		{sock, sock + ": a socket, not a regular file"},
		{filepath.Join(dir, "missing"), "open " + filepath.Join(dir, "missing") + ": no such file or directory"},
	} {
		done := make(chan struct{})
		var f *os.File
		var err error
		go func() {
			defer close(done)
			f, _, err = OpenRegular(c.path)
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("OpenRegular(%s) blocks", c.path)
		}
		if c.want == "" {
			if err != nil {
				t.Errorf("OpenRegular(%s): %v", c.path, err)
			} else {
				f.Close()
			}
			continue
		}
		var nf *NotFileError
		if err == nil || err.Error() != c.want {
			t.Errorf("OpenRegular(%s) = %v, want %q", c.path, err, c.want)
		} else if !errors.As(err, &nf) && !errors.Is(err, os.ErrNotExist) {
			t.Errorf("OpenRegular(%s) = %T, want a *NotFileError", c.path, err)
		}
	}
}
