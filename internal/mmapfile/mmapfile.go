// Package mmapfile maps regular files read-only, as klasy reads kernel
// images and its index cache, and turns the fault that reading a mapping
// raises once its file was truncated in place (a vmlinux rebuilt or
// copied over during a query) into an error instead of a crash.
//
// Touching a page of a shared mapping past the file's new end raises
// SIGBUS, which the Go runtime turns into a fatal error with a stack
// trace. With runtime/debug.SetPanicOnFault set on the goroutine, it is a
// panic instead, which Catch recovers into a *ChangedError when the
// faulting address lies in a mapping this package made. The setting is
// per goroutine: every goroutine that touches a mapping arms it,
//
//	defer mmapfile.Catch(&err, debug.SetPanicOnFault(true))
//
// and code that recovers panics for its own reasons passes faults on
// (IsFault) to that Catch. Reading through pread instead would cost a
// copy of every section read (hundreds of MB for a vmlinux), and a
// private mapping faults the same way.
//
// A file overwritten in place without shrinking raises no fault: Changed
// compares the file's size and times with those at Open, so that a
// reader can refuse what it read from a file that changed under it.
package mmapfile

import (
	"fmt"
	"os"
	"runtime/debug"
	"slices"
	"sync"
	"syscall"
	"unsafe"

	"github.com/klasy/klasy/internal/boundedread"
)

// File is a read-only shared mapping of a whole regular file.
type File struct {
	Name string // as given to Open, for errors
	Data []byte // nil for an empty file
	f    *os.File
	at   stamp
}

// stamp is what says that a file changed: its size, modification and
// status-change times.
type stamp struct {
	size, mtime, ctime int64 // times in ns
}

func stampOf(fi os.FileInfo) stamp {
	s := stamp{size: fi.Size(), mtime: fi.ModTime().UnixNano()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		s.ctime = st.Ctim.Nano()
	}
	return s
}

// live are the mappings open now, for Catch to name the file a fault
// is in.
var live struct {
	sync.Mutex
	files []*File
}

// Open maps the regular file name (boundedread.OpenRegular: anything else
// is refused, a FIFO without blocking).
func Open(name string) (*File, error) {
	f, fi, err := boundedread.OpenRegular(name)
	if err != nil {
		return nil, err
	}
	m := &File{Name: name, f: f, at: stampOf(fi)}
	if fi.Size() > 0 {
		if int64(int(fi.Size())) != fi.Size() {
			f.Close()
			return nil, fmt.Errorf("mapping %s: %d bytes is too large", name, fi.Size())
		}
		m.Data, err = syscall.Mmap(int(f.Fd()), 0, int(fi.Size()), syscall.PROT_READ, syscall.MAP_SHARED)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("mapping %s: %w", name, err)
		}
	}
	live.Lock()
	live.files = append(live.files, m)
	live.Unlock()
	return m, nil
}

// Size is the file's size at Open.
func (m *File) Size() int64 { return m.at.size }

// Close unmaps the file. Data must not be used afterwards.
func (m *File) Close() error {
	live.Lock()
	live.files = slices.DeleteFunc(live.files, func(f *File) bool { return f == m })
	live.Unlock()
	var err error
	if m.Data != nil {
		err = syscall.Munmap(m.Data)
		m.Data = nil
	}
	if cerr := m.f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Changed returns a *ChangedError if the file's size or times differ
// from those at Open (it was truncated, extended or written to since),
// else nil.
func (m *File) Changed() error {
	fi, err := m.f.Stat()
	if err != nil || stampOf(fi) != m.at {
		return &ChangedError{Name: m.Name}
	}
	return nil
}

// ChangedError is a file changed in place while klasy read it.
type ChangedError struct {
	Name string
}

func (e *ChangedError) Error() string { return e.Name + " changed while it was read" }

// FaultError returns the *ChangedError for r, a value recovered from a
// panic, if it is a fault in a live mapping, else nil.
func FaultError(r any) error {
	f, ok := r.(interface{ Addr() uintptr })
	if !ok {
		return nil
	}
	a := f.Addr()
	live.Lock()
	defer live.Unlock()
	for _, m := range live.files {
		if len(m.Data) == 0 {
			continue
		}
		lo := uintptr(unsafe.Pointer(unsafe.SliceData(m.Data)))
		if a >= lo && a-lo < uintptr(len(m.Data)) {
			return &ChangedError{Name: m.Name}
		}
	}
	return nil
}

// IsFault reports whether r, a value recovered from a panic, is a fault
// in a live mapping: code that recovers panics of its own passes these on
// (panic(r)) to the Catch of its goroutine.
func IsFault(r any) bool { return FaultError(r) != nil }

// Catch ends a guarded call: deferred with the previous setting of
// debug.SetPanicOnFault (see the package doc), it restores the setting
// and turns a fault in a mapping into *errp = *ChangedError. Other
// panics go on.
func Catch(errp *error, panicOnFault bool) {
	debug.SetPanicOnFault(panicOnFault)
	r := recover()
	if r == nil {
		return
	}
	if err := FaultError(r); err != nil {
		*errp = err
		return
	}
	panic(r)
}
