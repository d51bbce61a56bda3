package weaver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

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
	return out, st, nil
}

// savedPath holds records drained at unweave and not printed yet.
func (s *Session) savedPath() string { return filepath.Join(s.stateDir(), "saved.jsonl") }

// SaveRecords keeps drained records on the host for klasy trace.
func (s *Session) SaveRecords(rs []records.TraceRecord) error {
	if len(rs) == 0 {
		return nil
	}
	if err := os.MkdirAll(s.stateDir(), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(s.savedPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
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

// TakeSaved returns the records saved at unweave; done removes them once
// the caller has printed them.
func (s *Session) TakeSaved() (rs []records.TraceRecord, done func() error, err error) {
	b, err := os.ReadFile(s.savedPath())
	if os.IsNotExist(err) {
		return nil, func() error { return nil }, nil
	}
	if err != nil {
		return nil, nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	for {
		var r records.TraceRecord
		if err := dec.Decode(&r); err == io.EOF {
			break
		} else if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", s.savedPath(), err)
		}
		rs = append(rs, r)
	}
	return rs, func() error { return os.Remove(s.savedPath()) }, nil
}
