package atomicfile

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestWriteWholeOrNothing(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := WriteFile(p, []byte("old")); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err := Write(p, func(w io.Writer) error {
		w.Write([]byte("half of the new"))
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Write = %v, want the writer's error", err)
	}
	if b, _ := os.ReadFile(p); string(b) != "old" {
		t.Errorf("after a failed write the file holds %q, want the old content", b)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("a failed write left %d files, want 1 (no temporary file)", len(ents))
	}
	if err := WriteFile(p, []byte("new")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "new" {
		t.Errorf("file holds %q, want new", b)
	}
}

// A path that is not a regular file is written through, never renamed
// over (issue 21, "output files": /dev/full became a regular file).
// The cases use links and FIFOs in a temporary directory: the code
// before renamed over /dev/full itself.
func TestWriteThroughDevicesAndLinks(t *testing.T) {
	dir := t.TempDir()

	// A FIFO: its reader gets the data, and it stays a FIFO.
	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := os.OpenFile(fifo, os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(fifo, []byte("through")); err != nil {
		t.Fatalf("writing a FIFO: %v", err)
	}
	buf := make([]byte, 64)
	n, _ := r.Read(buf)
	r.Close()
	if string(buf[:n]) != "through" {
		t.Errorf("the FIFO's reader got %q, want through", buf[:n])
	}
	if fi, err := os.Lstat(fifo); err != nil || fi.Mode()&fs.ModeNamedPipe == 0 {
		t.Errorf("after the write the FIFO is %v (%v), want still a FIFO", fi.Mode(), err)
	}

	// A link to /dev/full: the device's ENOSPC, and the link stays.
	full := filepath.Join(dir, "full")
	if err := os.Symlink("/dev/full", full); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(full, []byte("x")); !errors.Is(err, unix.ENOSPC) {
		t.Errorf("writing a link to /dev/full: %v, want no space left on device", err)
	}
	if to, err := os.Readlink(full); err != nil || to != "/dev/full" {
		t.Errorf("the link to /dev/full is now %q (%v)", to, err)
	}

	// A link to a regular file, relative: the file is replaced, the link
	// stays.
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(dir, "sub", "target")
	if err := os.WriteFile(target, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink("sub/target", link); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(link, []byte("new")); err != nil {
		t.Fatal(err)
	}
	if to, err := os.Readlink(link); err != nil || to != "sub/target" {
		t.Errorf("the link is now %q (%v), want still a link to sub/target", to, err)
	}
	if b, _ := os.ReadFile(target); string(b) != "new" {
		t.Errorf("the link's target holds %q, want new", b)
	}

	// A directory: an error, and it stays.
	if err := WriteFile(filepath.Join(dir, "sub"), []byte("x")); !errors.Is(err, unix.EISDIR) {
		t.Errorf("writing a directory: %v, want is a directory", err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "sub")); err != nil || !fi.IsDir() {
		t.Errorf("the directory is gone: %v", err)
	}
}

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	dangling := filepath.Join(dir, "dangling")
	if err := os.Symlink("new", dangling); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		path string
		want string // "" no error
	}{
		{file, ""},
		{filepath.Join(dir, "new"), ""},
		{dangling, ""},
		{"/dev/null", ""},
		{dir, "is a directory"},
		{filepath.Join(dir, "missing", "f"), "no such file or directory"},
		{filepath.Join(file, "f"), "not a directory"},
	} {
		err := Check(tt.path)
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("Check(%s) = %v, want %q", tt.path, err, tt.want)
		}
	}
}
