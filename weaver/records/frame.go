package records

import "fmt"

// Frame is one frame of a kernel stack, symbolized (weaver/kstack),
// innermost first.
type Frame struct {
	Addr   uint64 `json:"addr"`             // running address
	Func   string `json:"func,omitempty"`   // "" when no function of the image holds it
	Offset uint64 `json:"offset,omitempty"` // from Func's entry, for an out-of-line frame
	File   string `json:"file,omitempty"`
	Line   int    `json:"line,omitempty"`
	// Inlined: Func's code is inlined at this address into the next
	// frame's function (same Addr).
	Inlined bool `json:"inlined,omitempty"`
}

// Name is the frame as bpftrace names it: "func+off", "func" for an
// inlined one, the address in hex when no function holds it.
func (f Frame) Name() string {
	switch {
	case f.Func == "":
		return fmt.Sprintf("0x%x", f.Addr)
	case f.Inlined:
		return f.Func
	}
	return fmt.Sprintf("%s+%d", f.Func, f.Offset)
}

// Where is the frame's source line, "" when unknown.
func (f Frame) Where() string {
	if f.File == "" {
		return ""
	}
	return fmt.Sprintf("%s:%d", f.File, f.Line)
}
