// Package traceview prints the records klasy trace reads from one
// kernel: a line or a JSON object per record, or instead a view of
// them printed once the trace ends (grouped by a stored value, the path
// one sk_buff took as the dissertation's Table 6.3 shows it, or a
// histogram of a stored value per aspect#advice as bpftrace's hist()
// and lhist() draw theirs, Table 6.4) that its Options choose, and
// hands them to a Perfetto export.
package traceview

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/klasy/klasy/cmd/klasy/internal/perfetto"
	"github.com/klasy/klasy/internal/human"
	"github.com/klasy/klasy/timeline"
	"github.com/klasy/klasy/weaver/kstack"
	"github.com/klasy/klasy/weaver/records"
)

// View collects records and prints them when the trace ends.
type View interface {
	Add(r records.TraceRecord)
	Print(w io.Writer, asJSON bool) error
}

// Printer prints records as klasy trace reads them.
type Printer struct {
	Out    io.Writer
	JSON   bool
	Aspect string           // only this aspect's records; "": all
	View   View             // nil: one line per record
	Export *perfetto.Export // --perfetto, written at the end
	enc    *json.Encoder
}

// Print prints rs, or adds them to the view and the export.
func (p *Printer) Print(rs []records.TraceRecord) error {
	if p.enc == nil {
		p.enc = json.NewEncoder(p.Out)
	}
	for _, r := range rs {
		if p.Aspect != "" && r.Aspect != p.Aspect {
			continue
		}
		if p.Export != nil {
			p.Export.Add(r)
		}
		if p.View != nil {
			p.View.Add(r)
			continue
		}
		if p.JSON {
			if err := p.enc.Encode(r); err != nil {
				return err
			}
			continue
		}
		fmt.Fprintf(p.Out, "[%5d.%06d] %s\n", r.TimeNS/1e9, r.TimeNS%1e9/1e3, Line(r))
		printStacks(p.Out, r)
	}
	return nil
}

// printStacks prints the frames of r's kernel stacks (STORE_STACK)
// under its line, as bpftrace prints a kstack: one per line, indented.
func printStacks(w io.Writer, r records.TraceRecord) {
	for _, v := range r.Values {
		switch {
		case v.Kind != records.KindKStack:
		case v.Unkept:
			fmt.Fprintf(w, "\t[stack %#x not kept: the stack table was full]\n", v.KStack)
		default:
			io.WriteString(w, kstack.Lines(v.Frames, "\t"))
		}
	}
}

// Finish prints the view and writes the export, once the trace has
// ended.
func (p *Printer) Finish() error {
	if p.Export != nil {
		var groups []perfetto.Group
		if g, ok := p.View.(*GroupView); ok {
			groups = g.Groups()
		}
		err := p.Export.Write(groups)
		p.Export = nil
		if err != nil {
			return err
		}
	}
	if p.View == nil {
		return nil
	}
	err := p.View.Print(p.Out, p.JSON)
	p.View = nil
	return err
}

// Line prints a record as klasy trace does after its time: cpu pid comm
// aspect#advice function file:line (access kind) pc values.
func Line(r records.TraceRecord) string {
	vals := make([]string, len(r.Values))
	for i, v := range r.Values {
		vals[i] = v.String()
	}
	extra := ""
	if r.Flow != 0 {
		extra = fmt.Sprintf(" flow=%d", r.Flow)
	}
	if r.Dropped > 0 {
		extra += fmt.Sprintf(" (+%d values dropped: at most 16 per hit)", r.Dropped)
	}
	where := fmt.Sprintf("%s:%d", r.File, r.Line)
	if r.Access != "" { // the member access's kind at an access join point
		where += " (" + r.Access + ")"
	}
	return fmt.Sprintf("cpu%d %d %s %s#%d %s %s %s %s%s",
		r.CPU, r.PID, r.Comm, r.Aspect, r.Advice, timeline.Function(r), where, r.PC, strings.Join(vals, " "), extra)
}

type aspectAdvice struct {
	aspect string
	advice int
}

func (a aspectAdvice) String() string { return fmt.Sprintf("%s#%d", a.aspect, a.advice) }

// valuePicker takes the index'th value of a record, and says once per
// aspect#advice that a record had too few.
type valuePicker struct {
	opt    string // "--hist 3", for the warning
	index  int    // 1-based
	errw   io.Writer
	warned map[aspectAdvice]bool
}

func newValuePicker(opt string, index int, errw io.Writer) valuePicker {
	return valuePicker{opt: fmt.Sprintf("%s %d", opt, index), index: index, errw: errw, warned: map[aspectAdvice]bool{}}
}

func (p *valuePicker) value(r records.TraceRecord) (int64, bool) {
	v, ok := p.pick(r, false)
	return v.Int, ok
}

// key is the index'th value of r as a key: an integer or a string (a
// string in the kernel or user memory, or unreadable: "(unreadable)"),
// which bpftrace groups by as it groups by a str().
func (p *valuePicker) key(r records.TraceRecord) (records.Value, bool) {
	return p.pick(r, true)
}

func (p *valuePicker) pick(r records.TraceRecord, strs bool) (records.Value, bool) {
	k := aspectAdvice{r.Aspect, r.Advice}
	if p.index <= len(r.Values) {
		v := r.Values[p.index-1]
		if v.Kind == 0 || strs && v.IsString() {
			return v, true
		}
		if !p.warned[k] {
			p.warned[k] = true
			what := "an integer"
			if strs {
				what = "an integer or a string"
			}
			fmt.Fprintf(p.errw, "klasy: warning: %s: value %d of %s is not %s; its records are left out\n", p.opt, p.index, k, what)
		}
		return records.Value{}, false
	}
	if !p.warned[k] {
		p.warned[k] = true
		fmt.Fprintf(p.errw, "klasy: warning: %s: a record of %s has %s; its records with fewer than %d are left out\n",
			p.opt, k, human.Plural(len(r.Values), "value"), p.index)
	}
	return records.Value{}, false
}
