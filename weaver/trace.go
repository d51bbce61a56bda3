package weaver

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/klasy/klasy/weaver/records"
	"github.com/klasy/klasy/weaver/runtime"
)

// Drain consumes the records in the kernel's buffer and symbolizes them
// with the runtime's status. It returns the status it used (nil when
// the runtime is not loaded, and then no records).
func (s *Session) Drain(ctx context.Context) ([]records.TraceRecord, *records.Status, error) {
	return s.drain(ctx, nil)
}

// drain is Drain that symbolizes the records of aspects no longer woven
// with prev, a status read while they were.
func (s *Session) drain(ctx context.Context, prev *records.Status) ([]records.TraceRecord, *records.Status, error) {
	st, err := s.Status(ctx)
	if err != nil || st == nil {
		return nil, st, err
	}
	var raw []records.Record
	err = s.T.Stream(ctx, runtime.RecordsPath, func(chunk []byte) error {
		rs, err := records.Decode(chunk)
		raw = append(raw, rs...)
		return err
	})
	if err != nil {
		return nil, st, fmt.Errorf("reading records from %s: %w", s.T.Name(), err)
	}
	// An aspect woven since the status was read: read it again.
	if slices.ContainsFunc(raw, func(r records.Record) bool { _, h := records.FindHook(st, r); return h == nil }) {
		if st2, err := s.Status(ctx); err == nil && st2 != nil {
			st = st2
		}
	}
	out := make([]records.TraceRecord, 0, len(raw))
	for _, r := range raw {
		if _, h := records.FindHook(st, r); h == nil && prev != nil {
			if _, h := records.FindHook(prev, r); h != nil {
				out = append(out, records.Symbolize(prev, r))
				continue
			}
		}
		out = append(out, records.Symbolize(st, r))
	}
	if err := s.fillStacks(ctx, out); err != nil {
		return nil, st, err
	}
	return out, st, nil
}

// savedPath holds records drained at unweave and not printed yet.
func (s *Session) savedPath() string { return filepath.Join(s.stateDir(), "saved.jsonl") }

// SaveRecords keeps drained records on the host for klasy trace,
// after those saved before. It appends under an exclusive flock(2) on
// the file, to the file at savedPath once it holds the lock: a reader
// that took the file meanwhile (TakeSaved renames it) reads it under
// the same lock, so a record is written before the file is read or to
// the next file, never to one already read.
func (s *Session) SaveRecords(rs []records.TraceRecord) error {
	if len(rs) == 0 {
		return nil
	}
	if err := os.MkdirAll(s.stateDir(), 0o755); err != nil {
		return err
	}
	var f *os.File
	for {
		var err error
		f, err = os.OpenFile(s.savedPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
			f.Close()
			return err
		}
		// Still the file at savedPath, not one a reader took?
		fi, err1 := f.Stat()
		pi, err2 := os.Stat(s.savedPath())
		if err1 == nil && err2 == nil && os.SameFile(fi, pi) {
			break
		}
		f.Close()
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	for _, r := range rs {
		if err := enc.Encode(r); err != nil {
			f.Close()
			return err
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// takeSeq numbers the files TakeSaved takes in this process.
var takeSeq atomic.Uint64

// TakeSaved takes the records saved at unweave, for one reader: it
// renames the file to a name of its own (saved.jsonl.PID.N.taken)
// before reading it, so that of readers taking them at once one gets
// each record and the others none, and none fails. done removes them
// once the caller has written them out; until then they stay on disk,
// and a reader whose process is gone before done (killed) leaves them
// to the next TakeSaved, which returns them first.
func (s *Session) TakeSaved() (rs []records.TraceRecord, done func() error, err error) {
	dir := s.stateDir()
	var taken []string
	take := func(from string) error {
		to := filepath.Join(dir, fmt.Sprintf("saved.jsonl.%d.%d.taken", os.Getpid(), takeSeq.Add(1)))
		err := os.Rename(from, to)
		if os.IsNotExist(err) { // another reader took it first
			return nil
		}
		if err == nil {
			taken = append(taken, to)
		}
		return err
	}
	done = func() error {
		var errs []error
		for _, p := range taken {
			if err := os.Remove(p); err != nil {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	}
	orphans, _ := filepath.Glob(filepath.Join(dir, "saved.jsonl.*.*.taken"))
	slices.SortFunc(orphans, func(a, b string) int { return cmp.Compare(modTime(a), modTime(b)) })
	for _, p := range orphans {
		if pid := takenPID(p); pid > 0 && pid != os.Getpid() && !processAlive(pid) {
			if err := take(p); err != nil {
				return nil, nil, err
			}
		}
	}
	if err := take(s.savedPath()); err != nil {
		return nil, nil, err
	}
	for _, p := range taken {
		b, err := readLocked(p)
		if err != nil {
			return nil, nil, err
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		for {
			var r records.TraceRecord
			if err := dec.Decode(&r); err == io.EOF {
				break
			} else if err != nil {
				return nil, nil, fmt.Errorf("%s: %w", p, err)
			}
			r.MarkTruncated()
			rs = append(rs, r)
		}
	}
	return rs, done, nil
}

// readLocked reads a saved-records file under SaveRecords' lock: once a
// writer that opened it before it was taken is done.
func readLocked(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH); err != nil {
		return nil, err
	}
	return io.ReadAll(f)
}

// takenPID reads the process ID in a taken file's name,
// saved.jsonl.PID.N.taken (0 when it is not one).
func takenPID(p string) int {
	f := strings.Split(strings.TrimSuffix(strings.TrimPrefix(filepath.Base(p), "saved.jsonl."), ".taken"), ".")
	if len(f) != 2 {
		return 0
	}
	n, _ := strconv.Atoi(f[0])
	return n
}

// modTime is when p was last written (its records saved), in ns.
func modTime(p string) int64 {
	fi, err := os.Stat(p)
	if err != nil {
		return 0
	}
	return fi.ModTime().UnixNano()
}

// processAlive says whether a process pid runs on this machine.
func processAlive(pid int) bool {
	err := unix.Kill(pid, 0)
	return err == nil || errors.Is(err, unix.EPERM)
}
