// Package statusview prints what klasy status reads from a kernel:
// the klasy runtime and its trace buffer, each flow table, each woven
// aspect with its hooks, their hits and misses; as text or as JSON.
package statusview

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/klasy/klasy/internal/human"
	"github.com/klasy/klasy/weaver/records"
)

// Write prints klasy status of target as text; st nil: no runtime.
func Write(w io.Writer, target string, st *records.Status) {
	if st == nil {
		fmt.Fprintf(w, "%s: nothing of klasy is woven (no klasy runtime)\n", target)
		return
	}
	var lost []string
	for i, l := range st.Lost {
		lost = append(lost, fmt.Sprintf("cpu%d %d", i, l))
	}
	fmt.Fprintf(w, "%s: klasy runtime (abi %d), %s, %d KiB buffer per CPU, %s unread, %d lost (%s)\n",
		target, st.ABI, human.Plural(st.CPUs, "CPU"), st.BufferKB, human.Plural(int(st.Unread), "record"), st.TotalLost(), strings.Join(lost, ", "))
	if st.Disarmed {
		fmt.Fprintf(w, "%s: kprobes are disarmed in this kernel (/sys/kernel/debug/kprobes/enabled is 0): %s\n", target, disarmed(st))
	}
	if st.FexitHeld > 0 {
		fmt.Fprintf(w, "%s: %s of unwoven aspects keep the runtime loaded: tasks are still inside functions that had after advice (none runs now); the next unweave removes it once they return\n",
			target, human.Plural(st.FexitHeld, "direct trampoline"))
	}
	for _, f := range st.Flows {
		fmt.Fprintf(w, "flow %s: %d of %d entries, %d hits, %d misses, %d evictions, %d freed, %d ambiguous, %d dropped, %d without ID\n",
			f.Name, f.Entries, f.Limit, f.Hits, f.Misses, f.Evictions, f.Freed, f.Ambiguous, f.Dropped, f.NoID)
	}
	for _, a := range st.Aspects {
		ops := ""
		if a.Ops > 0 {
			ops = fmt.Sprintf(", %d on its ftrace_ops", a.Ops)
		}
		if a.OpsErr != 0 {
			ops += fmt.Sprintf(", entry hooks are kprobes: ftrace refused the ftrace_ops (error %d, %v)", a.OpsErr, syscall.Errno(-a.OpsErr))
		}
		if a.Fexit > 0 {
			ops += fmt.Sprintf(", %d after on its direct trampoline (fexit)", a.Fexit)
		}
		if a.FexitErr != 0 {
			ops += fmt.Sprintf(", after hooks are kretprobes: ftrace refused the direct ops (error %d, %v)", a.FexitErr, syscall.Errno(-a.FexitErr))
		}
		var calls []string
		if a.CallMissed > 0 {
			calls = append(calls, fmt.Sprintf("%d missed (the task's slot was being taken over)", a.CallMissed))
		}
		if a.CallFull > 0 {
			calls = append(calls, human.Plural(int(a.CallFull), "call")+" without a slot")
		}
		if a.CallDropped > 0 {
			calls = append(calls, fmt.Sprintf("%d dropped before their return (the task's slot taken over after a minute, the task gone, or nested too deep): a return after that reads them as 0", a.CallDropped))
		}
		if len(calls) > 0 {
			ops += ", per-call variables: " + strings.Join(calls, ", ")
		}
		fmt.Fprintf(w, "aspect %s (module %s): %s%s\n", a.Name, a.Module, human.Plural(len(a.Hooks), "hook"), ops)
		tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "  HITS\tMISSED\tHOOK\tADVICE\tFUNCTION\tFILE:LINE\tPC")
		for _, h := range a.Hooks {
			fn := h.Function
			if h.InlinedIn != "" {
				fn += " (in " + h.InlinedIn + ")"
			}
			if h.Module != "" {
				fn += " [" + h.Module + "]"
			}
			var adv []string
			for _, n := range h.Advice {
				adv = append(adv, fmt.Sprint(n))
			}
			how := h.Mech
			if h.Kind == records.KindReplace {
				how += " replace" // the function returns at once
			}
			fmt.Fprintf(tw, "  %d\t%d\t%s\t%s\t%s\t%s:%d\t%#x\n", h.Hits, h.Missed, how, strings.Join(adv, ","), fn, h.File, h.Line, h.Image)
		}
		tw.Flush()
	}
}

// disarmed says which hooks of st kprobes' global switch stops: kprobes
// (ftrace-based, jump, int3) and kretprobes; hooks on an aspect's
// ftrace_ops or direct trampoline and tracepoint probes are not kprobes
// and run on.
func disarmed(st *records.Status) string {
	var stopped, running int
	var mechs []string
	for _, a := range st.Aspects {
		for _, h := range a.Hooks {
			switch h.Mech {
			case records.MechFtraceOps, records.MechFexit, records.MechTracepoint:
				running++
				if !slices.Contains(mechs, h.Mech) {
					mechs = append(mechs, h.Mech)
				}
			case records.MechGone, records.MechDisabled:
			default:
				stopped++
			}
		}
	}
	verb := func(n int, one, more string) string {
		if n == 1 {
			return one
		}
		return more
	}
	var b strings.Builder
	if stopped > 0 {
		fmt.Fprintf(&b, "%s below %s until they are armed again (echo 1 > it)", human.Plural(stopped, "kprobe hook"), verb(stopped, "does not run", "do not run"))
	} else {
		b.WriteString("no hook below is a kprobe")
	}
	if running > 0 {
		fmt.Fprintf(&b, "; %s on %s %s (not kprobes)", human.Plural(running, "hook"), strings.Join(mechs, ", "), verb(running, "runs", "run"))
	}
	return b.String()
}

// JSON is klasy status --json: addresses as hex strings, as klasy lines
// prints them, so that scripts in any language read them exactly.
type JSON struct {
	Target   string `json:"target"`
	Runtime  bool   `json:"runtime"` // false: nothing of klasy is woven
	ABI      int    `json:"abi,omitempty"`
	CPUs     int    `json:"cpus,omitempty"`
	BufferKB int    `json:"buffer_kb,omitempty"`
	Unread   uint64 `json:"unread"`
	// Disarmed: kprobes are disarmed in the whole kernel; no hook runs.
	Disarmed bool `json:"disarmed,omitempty"`
	// FexitHeld: unwoven aspects' direct trampolines that tasks are
	// still inside, keeping the runtime loaded.
	FexitHeld int          `json:"fexit_held,omitempty"`
	Lost      []uint64     `json:"lost_per_cpu"`
	Flows     []FlowJSON   `json:"flows"`
	Aspects   []aspectJSON `json:"aspects"`
}

// DomainJSON is one domain of klasy status --domains --json.
type DomainJSON struct {
	Domain string `json:"domain"`
	JSON
}

// FlowJSON is one flow table in JSON.
type FlowJSON struct {
	Name      string `json:"name"`
	Entries   uint64 `json:"entries"`
	Limit     uint64 `json:"limit"`
	Hits      uint64 `json:"hits"`
	Misses    uint64 `json:"misses"`
	Evictions uint64 `json:"evictions"`
	Freed     uint64 `json:"freed"`
	Ambiguous uint64 `json:"ambiguous"`
	Dropped   uint64 `json:"dropped"`
	NoID      uint64 `json:"noid"`
}

type aspectJSON struct {
	ID         uint32 `json:"id"`
	Name       string `json:"name"`
	Module     string `json:"module"`
	RegisterUS int64  `json:"register_us"`
	FtraceOps  int    `json:"ftrace_ops"`        // hooks on the aspect's ftrace_ops
	OpsErr     int    `json:"ops_err,omitempty"` // ftrace refused them: the kernel's error
	Fexit      int    `json:"fexit"`             // after hooks on its direct trampoline
	FexitErr   int    `json:"fexit_err,omitempty"`
	CallMissed uint64 `json:"call_missed,omitempty"` // per-call variable accesses that found the slot busy
	CallFull   uint64 `json:"call_full,omitempty"`   // calls opened without a slot
	// calls dropped before their return: a return after that read 0
	CallDropped uint64     `json:"call_dropped,omitempty"`
	Hooks       []hookJSON `json:"hooks"`
}

type hookJSON struct {
	Kind      string `json:"kind"`
	Mechanism string `json:"mechanism"`
	Addr      string `json:"addr"`
	PC        string `json:"pc"`
	Hits      uint64 `json:"hits"`
	Missed    uint64 `json:"missed"`
	Advice    []int  `json:"advice"`
	Function  string `json:"function"`
	InlinedIn string `json:"inlined_in,omitempty"`
	File      string `json:"file"`
	Line      int    `json:"line"`
	Module    string `json:"module,omitempty"`
	Access    string `json:"access,omitempty"` // an access join point's member access kind
}

// View is klasy status of target as JSON; st nil: no runtime.
func View(target string, st *records.Status) JSON {
	v := JSON{Target: target, Lost: []uint64{}, Flows: []FlowJSON{}, Aspects: []aspectJSON{}}
	if st == nil {
		return v
	}
	v.Runtime, v.ABI, v.CPUs, v.BufferKB, v.Unread, v.Lost = true, st.ABI, st.CPUs, st.BufferKB, st.Unread, st.Lost
	v.Disarmed = st.Disarmed
	v.FexitHeld = st.FexitHeld
	for _, f := range st.Flows {
		v.Flows = append(v.Flows, FlowJSON(f))
	}
	for _, a := range st.Aspects {
		aj := aspectJSON{ID: a.ID, Name: a.Name, Module: a.Module, RegisterUS: a.Register.Microseconds(), FtraceOps: a.Ops, OpsErr: a.OpsErr, Fexit: a.Fexit, FexitErr: a.FexitErr, CallMissed: a.CallMissed, CallFull: a.CallFull, CallDropped: a.CallDropped, Hooks: []hookJSON{}}
		for _, h := range a.Hooks {
			aj.Hooks = append(aj.Hooks, hookJSON{Kind: h.Kind, Mechanism: h.Mech, Addr: fmt.Sprintf("%#x", h.Addr), PC: fmt.Sprintf("%#x", h.Image),
				Hits: h.Hits, Missed: h.Missed, Advice: h.Advice, Function: h.Function, InlinedIn: h.InlinedIn, File: h.File, Line: h.Line, Module: h.Module, Access: h.Access})
		}
		v.Aspects = append(v.Aspects, aj)
	}
	return v
}
