package mmapfile

import (
	"errors"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"syscall"
	"testing"
	"unsafe"

	"github.com/klasy/klasy/internal/boundedread"
)

// mapped writes n bytes to a new file and maps it.
func mapped(t *testing.T, n int) (*File, string) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "vmlinux")
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m, p
}

// sum reads every byte of b under a guard.
func sum(b []byte) (s byte, err error) {
	defer Catch(&err, debug.SetPanicOnFault(true))
	for _, c := range b {
		s += c
	}
	return s, nil
}

// A file truncated under its mapping: reading the lost pages, in any
// goroutine that arms the guard, is an error naming the file, not a
// crash; the goroutine's setting is restored.
func TestTruncatedUnderMapping(t *testing.T) {
	const n = 1 << 20
	m, p := mapped(t, n)
	if _, err := sum(m.Data); err != nil {
		t.Fatalf("intact file: %v", err)
	}
	if err := m.Changed(); err != nil {
		t.Fatalf("intact file: %v", err)
	}
	if err := os.Truncate(p, 4096); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = sum(m.Data[4096*(i+1):])
		}()
	}
	wg.Wait()
	for i, err := range errs {
		var ce *ChangedError
		if !errors.As(err, &ce) || err.Error() != p+" changed while it was read" {
			t.Errorf("goroutine %d: %v, want %q", i, err, p+" changed while it was read")
		}
	}
	if _, err := sum(m.Data[:4096]); err != nil {
		t.Errorf("the page left: %v", err)
	}
	if debug.SetPanicOnFault(false) {
		t.Error("Catch left the goroutine's SetPanicOnFault set")
	}
	if err := m.Changed(); err == nil {
		t.Error("Changed: nil after a truncation")
	}
}

// A file written in place, same size, raises no fault: Changed sees it.
func TestChangedInPlace(t *testing.T) {
	m, p := mapped(t, 8192)
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("rebuilt"), 100); err != nil {
		t.Fatal(err)
	}
	f.Close()
	var ce *ChangedError
	if err := m.Changed(); !errors.As(err, &ce) || ce.Name != p {
		t.Errorf("Changed after a write in place: %v", err)
	}
}

// Catch passes on panics that are not faults in its mappings: a fault in
// a mapping made elsewhere, and any other panic.
func TestCatchPassesOthersOn(t *testing.T) {
	p := filepath.Join(t.TempDir(), "other")
	if err := os.WriteFile(p, make([]byte, 1<<16), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	data, err := syscall.Mmap(int(f.Fd()), 0, 1<<16, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(data)
	if err := os.Truncate(p, 0); err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]func(){
		"foreign mapping": func() { sum(data) },
		"other panic": func() {
			var err error
			defer Catch(&err, debug.SetPanicOnFault(true))
			panic("not a fault")
		},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: Catch swallowed the panic", name)
				}
			}()
			f()
		}()
	}
}

func TestOpen(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := Open(empty)
	if err != nil || m.Data != nil || m.Size() != 0 {
		t.Fatalf("empty file: %v, %d bytes", err, len(m.Data))
	}
	m.Close()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	var nf *boundedread.NotFileError
	if _, err := Open(fifo); !errors.As(err, &nf) {
		t.Errorf("Open(FIFO) = %v, want a *boundedread.NotFileError", err)
	}
	// A closed mapping is no longer one of ours.
	m, _ = mapped(t, 4096)
	addr := fault(uintptr(unsafe.Pointer(&m.Data[10])))
	if FaultError(addr) == nil {
		t.Error("a fault in a live mapping is not named as one of ours")
	}
	m.Close()
	if FaultError(addr) != nil {
		t.Error("a fault in a closed mapping is named as one of ours")
	}
}

// fault is what a fault recovered under SetPanicOnFault offers.
type fault uintptr

func (f fault) Addr() uintptr { return uintptr(f) }
