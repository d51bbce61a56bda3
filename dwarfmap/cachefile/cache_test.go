package cachefile

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// Builds killed while writing leave temporary files; the next build
// removes those whose writer is gone and that are over a minute old
// (RemoveStale), and leaves those of writers at work, which hold a lock
// on them.
func TestRemoveStale(t *testing.T) {
	dir := t.TempDir()
	old := time.Now().Add(-2 * staleTmpAge)
	mk := func(name string, mtime time.Time) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("partial index"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
		return p
	}
	stale := mk("0123abcd-100.v8.idx.tmp-111", old)
	staleOther := mk("nobuildid-ff-5.v7.idx.tmp-222", old) // another image's, another format's
	fresh := mk("0123abcd-100.v8.idx.tmp-333", time.Now())
	locked := mk("0123abcd-100.v8.idx.tmp-444", old)
	unrelated := mk("notes.tmp-555", old)
	fifo := filepath.Join(dir, "0123abcd-100.v8.idx.tmp-666")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// A writer at work: it holds the lock Write takes.
	f, err := os.Open(locked)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	removed := RemoveStale(dir)
	for p, gone := range map[string]bool{stale: true, staleOther: true, fresh: false, locked: false, unrelated: false, fifo: false} {
		if _, err := os.Lstat(p); (err != nil) != gone {
			t.Errorf("%s: removed %v, want %v", filepath.Base(p), err != nil, gone)
		}
	}
	if len(removed) != 2 {
		t.Errorf("%d files said removed, want 2: %q", len(removed), removed)
	}
}
