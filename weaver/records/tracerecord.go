package records

import (
	"fmt"
)

// TraceRecord is one record symbolized: what klasy trace prints.
type TraceRecord struct {
	Aspect    string `json:"aspect"`
	Advice    int    `json:"advice"`
	TimeNS    uint64 `json:"time_ns"`
	CPU       int    `json:"cpu"`
	PID       int    `json:"pid"`
	Comm      string `json:"comm"`
	PC        string `json:"pc"` // the join point's image address, 0x...
	Function  string `json:"function"`
	InlinedIn string `json:"inlined_in,omitempty"`
	File      string `json:"file"`
	Line      int    `json:"line"`
	// Access is the member access kind of an access join point (read,
	// write, rw, addr), "" for other join points.
	Access string  `json:"access,omitempty"`
	Values []Value `json:"values"`
	// Truncated numbers the string values (from 1) that were longer than
	// the record kept.
	Truncated []int `json:"truncated,omitempty"`
	// Flow is the flow ID the advice ran for (xflow), 0 for none.
	Flow int32 `json:"flow,omitempty"`
	// Dropped counts values the advice stored past the record's room.
	Dropped int `json:"dropped,omitempty"`
}

// FindHook finds the aspect and hook a record names in st (nil hook: the
// aspect has no such hook; nil aspect: no such aspect).
func FindHook(st *Status, r Record) (*Aspect, *Hook) {
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

// Symbolize names a record's hook from the status st: aspect, function,
// file and line.
func Symbolize(st *Status, r Record) TraceRecord {
	tr := TraceRecord{Advice: int(r.Advice), TimeNS: r.TimeNS, CPU: int(r.CPU), PID: int(r.PID), Comm: r.Comm, Flow: r.Flow, Dropped: int(r.Dropped)}
	vals, err := r.Items()
	if err != nil { // Decode refuses such records
		vals = nil
		for _, v := range r.Values {
			vals = append(vals, Value{Int: int64(v)})
		}
	}
	tr.Values = append(make([]Value, 0, len(vals)), vals...)
	for i, v := range vals {
		if v.Truncated {
			tr.Truncated = append(tr.Truncated, i+1)
		}
	}
	a, h := FindHook(st, r)
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
