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

// TraceRecord is one record symbolized: what klasy trace prints.
type TraceRecord struct {
	Aspect    string  `json:"aspect"`
	Advice    int     `json:"advice"`
	TimeNS    uint64  `json:"time_ns"`
	CPU       int     `json:"cpu"`
	PID       int     `json:"pid"`
	Comm      string  `json:"comm"`
	PC        string  `json:"pc"` // the join point's image address, 0x...
	Function  string  `json:"function"`
	InlinedIn string  `json:"inlined_in,omitempty"`
	File      string  `json:"file"`
	Line      int     `json:"line"`
	Values    []int64 `json:"values"`
	// Flow is the flow ID the advice ran for (xflow), 0 for none.
	Flow int32 `json:"flow,omitempty"`
	// Dropped counts values the advice stored past the record's room.
	Dropped int `json:"dropped,omitempty"`
}

// Drain consumes the records in the kernel's buffer and symbolizes them
// with the runtime's status. It returns the status it used (nil when
// the runtime is not loaded, and then no records).
func (s *Session) Drain(ctx context.Context) ([]TraceRecord, *records.Status, error) {
	return s.drain(ctx, nil)
}

// drain is Drain that symbolizes the records of aspects no longer woven
// with prev, a status read while they were.
func (s *Session) drain(ctx context.Context, prev *records.Status) ([]TraceRecord, *records.Status, error) {
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
	if slices.ContainsFunc(raw, func(r records.Record) bool { _, h := findHook(st, r); return h == nil }) {
		if st2, err := s.Status(ctx); err == nil && st2 != nil {
			st = st2
		}
	}
	out := make([]TraceRecord, 0, len(raw))
	for _, r := range raw {
		if _, h := findHook(st, r); h == nil && prev != nil {
			if _, h := findHook(prev, r); h != nil {
				out = append(out, symbolize(prev, r))
				continue
			}
		}
		out = append(out, symbolize(st, r))
	}
	return out, st, nil
}

func findHook(st *records.Status, r records.Record) (*records.Aspect, *records.Hook) {
	for i := range st.Aspects {
		a := &st.Aspects[i]
		if a.ID == r.Aspect {
			if int(r.Hook) < len(a.Hooks) {
				return a, &a.Hooks[r.Hook]
			}
			return a, nil
		}
	}
	return nil, nil
}

func symbolize(st *records.Status, r records.Record) TraceRecord {
	tr := TraceRecord{Advice: int(r.Advice), TimeNS: r.TimeNS, CPU: int(r.CPU), PID: int(r.PID), Comm: r.Comm, Flow: r.Flow, Dropped: int(r.Dropped)}
	tr.Values = make([]int64, len(r.Values))
	for i, v := range r.Values {
		tr.Values[i] = int64(v)
	}
	a, h := findHook(st, r)
	switch {
	case h != nil:
		tr.Aspect = a.Name
		tr.PC = fmt.Sprintf("%#x", h.Image)
		tr.Function, tr.InlinedIn, tr.File, tr.Line = h.Function, h.InlinedIn, h.File, h.Line
	case a != nil:
		tr.Aspect = a.Name
		tr.Function = fmt.Sprintf("(hook %d)", r.Hook)
	default:
		tr.Aspect = fmt.Sprintf("(aspect %d, unwoven)", r.Aspect)
		tr.Function = fmt.Sprintf("(hook %d)", r.Hook)
	}
	return tr
}

// savedPath holds records drained at unweave and not printed yet.
func (s *Session) savedPath() string { return filepath.Join(s.stateDir(), "saved.jsonl") }

// SaveRecords keeps drained records on the host for klasy trace.
func (s *Session) SaveRecords(rs []TraceRecord) error {
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
func (s *Session) TakeSaved() (rs []TraceRecord, done func() error, err error) {
	b, err := os.ReadFile(s.savedPath())
	if os.IsNotExist(err) {
		return nil, func() error { return nil }, nil
	}
	if err != nil {
		return nil, nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	for {
		var r TraceRecord
		if err := dec.Decode(&r); err == io.EOF {
			break
		} else if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", s.savedPath(), err)
		}
		rs = append(rs, r)
	}
	return rs, func() error { return os.Remove(s.savedPath()) }, nil
}
