package records

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/klasy/klasy/weaver/runtime"
)

// Status is the runtime's status file: the runtime, its flow tables,
// then each aspect with its hooks.
type Status struct {
	ABI      int
	CPUs     int
	BufferKB int
	// FtraceOps: the runtime puts entry hooks at ftrace sites on an
	// ftrace_ops of their aspect (the kernel has it, and the runtime's
	// ftrace_ops parameter is 1).
	FtraceOps bool
	// Fexit: the runtime puts after hooks at ftrace sites on a direct
	// trampoline (the kernel has DIRECT_CALLS, and the runtime's fexit
	// parameter is 1).
	Fexit bool
	// FexitHeld: unwoven aspects' direct trampolines some call is still
	// inside (a task asleep in a function that had after advice); they
	// keep the runtime loaded until those calls return.
	FexitHeld int
	Unread    uint64   // records in the buffer not read yet
	Lost      []uint64 // records dropped because the buffer was full, per CPU
	Flows     []Flow
	Aspects   []Aspect
	// Disarmed: kprobes are disarmed in the whole kernel (debugfs
	// kprobes/enabled is 0), so no hook runs whatever its mechanism.
	// Session.StatusShown reads it beside the runtime's file.
	Disarmed bool `json:",omitempty"`
}

// Flow is the table of one flow (an xflow of the woven aspects): which
// objects carry which flow ID (weaver/runtime/klasy_flow.h).
type Flow struct {
	Name    string
	Entries uint64 // objects that carry an ID now
	Limit   uint64 // entries the table holds at most (the bound)
	Hits    uint64 // get_flowid calls that found an ID
	Misses  uint64 // get_flowid calls that found none
	// Evictions are entries pushed out by the bound, Freed entries
	// dropped because their object was freed without reaching quit.
	Evictions uint64
	Freed     uint64
	// Ambiguous counts IDs cut to fit a header while another live ID had
	// the same kept bits.
	Ambiguous uint64
	Dropped   uint64 // register_flowid/remove_flowid not done (NMI, no memory)
	// NoID counts xout_move/xout_copy that found no ID in the header:
	// they registered nothing.
	NoID uint64
}

// TotalLost returns the records lost on all CPUs.
func (s *Status) TotalLost() uint64 {
	var n uint64
	for _, l := range s.Lost {
		n += l
	}
	return n
}

// Aspect is one registered aspect.
type Aspect struct {
	ID     uint32
	Name   string
	Module string // the advice module that registered it
	Hooks  []Hook
	// Register is how long registering its hooks took in the kernel.
	Register time.Duration
	// Ops is how many of its hooks are on its ftrace_ops (MechFtraceOps);
	// OpsErr is the kernel's error (negative) when ftrace refused that
	// ops and its entry hooks are kprobes instead, else 0.
	Ops    int
	OpsErr int
	// Fexit is how many of its after hooks are on its direct trampoline
	// (MechFexit); FexitErr is the kernel's error when ftrace refused
	// that and they are kretprobes instead, else 0.
	Fexit    int
	FexitErr int
	// CallMissed counts the per-call variables' accesses (a call's
	// opening or closing, a CALL_SET, a CALL_GET) that found the task's
	// slot held by another CPU, which was taking it over from a task
	// idle for a minute; CallFull, calls opened with no slot free for
	// their task. Either leaves the call's variables unset. CallDropped,
	// calls thrown away before their return: their task's slot taken
	// over that way (the task exited, its returns were missed, or it was
	// blocked in one for over a minute: that return read 0), a reused
	// task_struct's, the oldest past the nesting the runtime keeps.
	CallMissed  uint64
	CallFull    uint64
	CallDropped uint64
}

// Hook kinds and mechanisms as status shows them.
const (
	KindKprobe    = "kprobe"
	KindKretprobe = "kretprobe"
	KindReplace   = "replace" // a <replace>: the function returns at once, on ftrace
	// KindTracepoint is a probe on a static tracepoint, whose mechanism
	// is MechTracepoint once registered.
	KindTracepoint = "tracepoint"

	MechFtrace    = "ftrace"     // an ftrace-based kprobe at a function's entry
	MechFtraceOps = "ftrace-ops" // at a function's entry, on its aspect's ftrace_ops
	MechJump      = "jump"       // a jump-optimized kprobe
	MechInt3      = "int3"       // a breakpoint
	MechKretprobe = "kretprobe"  // the return of a function
	MechFexit     = "fexit"      // the return of a function, on its aspect's direct trampoline
	MechDisabled  = "disabled"
	MechGone      = "gone" // the probed code went away (its module unloaded)
	// MechTracepoint: registered with tracepoint_probe_register.
	MechTracepoint = "tracepoint"
)

// Hook is one hook of an aspect.
type Hook struct {
	Aspect    uint32
	Index     int
	Kind      string // KindKprobe, KindKretprobe or KindReplace
	Addr      uint64 // in the running kernel
	Image     uint64 // in the image (vmlinux), before KASLR
	Mech      string // one of the Mech constants, read when status was
	Hits      uint64
	Missed    uint64 // handlers not run (a hook hit inside a handler, or refused by ftrace's recursion lock)
	Advice    []int  // advice numbers in call order
	Function  string
	InlinedIn string // "" unless the hook is in an inlined copy
	File      string
	Line      int
	// Module is the module whose code holds the hook ("" for the
	// kernel); Image is then an address of its .ko as klasy lays it out.
	Module string
	// Access is the kind of member access of an access join point's hook
	// (read, write, rw, addr; "a/b" for several), "" for other hooks.
	Access string
}

// ParseStatus parses the status file's text. It refuses a runtime of
// another ABI than runtime.ABIVersion, and any line or key it does not
// know.
func ParseStatus(text []byte) (*Status, error) {
	lines := strings.Split(strings.TrimSuffix(string(text), "\n"), "\n")
	if len(lines) == 0 || lines[0] == "" {
		return nil, fmt.Errorf("status: empty")
	}
	var s Status
	var cur *Aspect
	nhooks := 0
	closeAspect := func(n int) error {
		if cur != nil && len(cur.Hooks) != nhooks {
			return fmt.Errorf("status line %d: aspect %d has %d hook lines, its line says hooks=%d", n, cur.ID, len(cur.Hooks), nhooks)
		}
		return nil
	}
	for i, line := range lines {
		n := i + 1
		kind, rest, _ := strings.Cut(line, " ")
		if (i == 0) != (kind == "runtime") {
			return nil, fmt.Errorf("status line %d: %q: want the runtime line first, and only there", n, kind)
		}
		kv, err := parseKV(rest)
		if err != nil {
			return nil, fmt.Errorf("status line %d: %v", n, err)
		}
		switch kind {
		case "runtime":
			err = s.parseRuntime(kv)
		case "flow":
			var f Flow
			f, err = parseFlow(kv)
			switch {
			case err != nil:
			case len(s.Aspects) > 0:
				err = fmt.Errorf("flow line after an aspect")
			default:
				for _, g := range s.Flows {
					if g.Name == f.Name {
						err = fmt.Errorf("flow %s twice", f.Name)
					}
				}
			}
			s.Flows = append(s.Flows, f)
		case "aspect":
			if err = closeAspect(n); err != nil {
				return nil, err
			}
			var a Aspect
			a, nhooks, err = parseAspect(kv)
			if err == nil {
				for _, b := range s.Aspects {
					if b.ID == a.ID {
						err = fmt.Errorf("aspect id %d twice", a.ID)
					}
				}
			}
			s.Aspects = append(s.Aspects, a)
			cur = &s.Aspects[len(s.Aspects)-1]
		case "hook":
			var h Hook
			h, err = parseHook(kv)
			switch {
			case err != nil:
			case cur == nil || h.Aspect != cur.ID:
				err = fmt.Errorf("hook of aspect %d outside that aspect", h.Aspect)
			case h.Index != len(cur.Hooks):
				err = fmt.Errorf("hook index %d, want %d", h.Index, len(cur.Hooks))
			default:
				cur.Hooks = append(cur.Hooks, h)
			}
		default:
			err = fmt.Errorf("unknown line kind %q", kind)
		}
		if err != nil {
			return nil, fmt.Errorf("status line %d: %v", n, err)
		}
		if err := kv.unused(); err != nil {
			return nil, fmt.Errorf("status line %d: %v", n, err)
		}
	}
	if err := closeAspect(len(lines)); err != nil {
		return nil, err
	}
	return &s, nil
}

// kvs is one line's key=value pairs; get marks a key as used.
type kvs map[string]*kv

type kv struct {
	val  string
	used bool
}

func parseKV(s string) (kvs, error) {
	m := kvs{}
	for _, f := range strings.Split(s, " ") {
		k, v, ok := strings.Cut(f, "=")
		if !ok || k == "" || v == "" {
			return nil, fmt.Errorf("%q is not key=value", f)
		}
		if m[k] != nil {
			return nil, fmt.Errorf("%s twice", k)
		}
		m[k] = &kv{val: v}
	}
	return m, nil
}

// unused fails for a key no parser asked for: a format this package
// does not know, although the ABI version matched.
func (m kvs) unused() error {
	for k, e := range m {
		if !e.used {
			return fmt.Errorf("unknown key %s", k)
		}
	}
	return nil
}

func (m kvs) str(k string) (string, error) {
	e := m[k]
	if e == nil {
		return "", fmt.Errorf("no %s=", k)
	}
	e.used = true
	return e.val, nil
}

// name is a string the runtime prints as "-" when empty.
func (m kvs) name(k string) (string, error) {
	v, err := m.str(k)
	if v == "-" {
		v = ""
	}
	return v, err
}

func (m kvs) uint(k string, bits int) (uint64, error) {
	v, err := m.str(k)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseUint(v, 10, bits)
	if err != nil {
		return 0, fmt.Errorf("%s=%s: not a %d-bit decimal", k, v, bits)
	}
	return n, nil
}

func (m kvs) int(k string) (int, error) {
	n, err := m.uint(k, 31)
	return int(n), err
}

func (m kvs) hex(k string) (uint64, error) {
	v, err := m.str(k)
	if err != nil {
		return 0, err
	}
	h, ok := strings.CutPrefix(v, "0x")
	n, perr := strconv.ParseUint(h, 16, 64)
	if !ok || perr != nil {
		return 0, fmt.Errorf("%s=%s: not 0x and hex digits", k, v)
	}
	return n, nil
}

// list parses "-" or comma-separated decimals.
func (m kvs) list(k string, bits int) ([]uint64, error) {
	v, err := m.str(k)
	if err != nil || v == "-" {
		return nil, err
	}
	var ns []uint64
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.ParseUint(f, 10, bits)
		if err != nil {
			return nil, fmt.Errorf("%s=%s: %q is not a %d-bit decimal", k, v, f, bits)
		}
		ns = append(ns, n)
	}
	return ns, nil
}

func (s *Status) parseRuntime(m kvs) error {
	abi, err := m.int("abi")
	if err != nil {
		return err
	}
	if abi != runtime.ABIVersion {
		return fmt.Errorf("runtime ABI %d, this klasy reads ABI %d: load the runtime of this klasy", abi, runtime.ABIVersion)
	}
	s.ABI = abi
	if s.CPUs, err = m.int("cpus"); err != nil {
		return err
	}
	if s.BufferKB, err = m.int("buffer_kb"); err != nil {
		return err
	}
	ops, err := m.uint("ftrace_ops", 1)
	if err != nil {
		return err
	}
	s.FtraceOps = ops == 1
	fexit, err := m.uint("fexit", 1)
	if err != nil {
		return err
	}
	s.Fexit = fexit == 1
	if s.FexitHeld, err = m.int("fexit_held"); err != nil {
		return err
	}
	if s.Unread, err = m.uint("unread", 64); err != nil {
		return err
	}
	if s.Lost, err = m.list("lost", 64); err != nil {
		return err
	}
	if len(s.Lost) != s.CPUs {
		return fmt.Errorf("lost= has %d counts for %d CPUs", len(s.Lost), s.CPUs)
	}
	return nil
}

func parseFlow(m kvs) (Flow, error) {
	var f Flow
	var err error
	if f.Name, err = m.str("name"); err != nil {
		return f, err
	}
	for _, c := range []struct {
		key string
		v   *uint64
	}{
		{"entries", &f.Entries}, {"limit", &f.Limit}, {"hits", &f.Hits}, {"misses", &f.Misses},
		{"evictions", &f.Evictions}, {"freed", &f.Freed}, {"ambiguous", &f.Ambiguous}, {"dropped", &f.Dropped},
		{"noid", &f.NoID},
	} {
		if *c.v, err = m.uint(c.key, 64); err != nil {
			return f, err
		}
	}
	if f.Entries > f.Limit {
		return f, fmt.Errorf("entries=%d above limit=%d", f.Entries, f.Limit)
	}
	return f, nil
}

func parseAspect(m kvs) (Aspect, int, error) {
	var a Aspect
	id, err := m.uint("id", 32)
	if err != nil {
		return a, 0, err
	}
	a.ID = uint32(id)
	if a.Name, err = m.name("name"); err != nil {
		return a, 0, err
	}
	if a.Module, err = m.name("module"); err != nil {
		return a, 0, err
	}
	n, err := m.int("hooks")
	if err != nil {
		return a, 0, err
	}
	us, err := m.uint("register_us", 64)
	a.Register = time.Duration(us) * time.Microsecond
	if err != nil {
		return a, n, err
	}
	if a.Ops, err = m.int("ops"); err != nil {
		return a, n, err
	}
	if a.Ops > n {
		return a, n, fmt.Errorf("ops=%d above hooks=%d", a.Ops, n)
	}
	if a.OpsErr, err = m.errno("ops_err"); err != nil {
		return a, n, err
	}
	if a.Fexit, err = m.int("fexit"); err != nil {
		return a, n, err
	}
	if a.Ops+a.Fexit > n {
		return a, n, fmt.Errorf("ops=%d and fexit=%d above hooks=%d", a.Ops, a.Fexit, n)
	}
	if a.FexitErr, err = m.errno("fexit_err"); err != nil {
		return a, n, err
	}
	if a.CallMissed, err = m.uint("call_missed", 64); err != nil {
		return a, n, err
	}
	if a.CallFull, err = m.uint("call_full", 64); err != nil {
		return a, n, err
	}
	a.CallDropped, err = m.uint("call_dropped", 64)
	return a, n, err
}

// errno parses 0 or a negative kernel error number.
func (m kvs) errno(k string) (int, error) {
	v, err := m.str(k)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil || n > 0 {
		return 0, fmt.Errorf("%s=%s: not 0 or a negative error number", k, v)
	}
	return int(n), nil
}

func parseHook(m kvs) (Hook, error) {
	var h Hook
	var err error
	fail := func(e error) bool {
		if err == nil {
			err = e
		}
		return err != nil
	}
	id, e := m.uint("aspect", 32)
	h.Aspect = uint32(id)
	if fail(e) {
		return h, err
	}
	h.Index, e = m.int("index")
	fail(e)
	h.Kind, e = m.str("kind")
	if !fail(e) && h.Kind != KindKprobe && h.Kind != KindKretprobe && h.Kind != KindReplace && h.Kind != KindTracepoint {
		fail(fmt.Errorf("kind=%s: want %s, %s, %s or %s", h.Kind, KindKprobe, KindKretprobe, KindReplace, KindTracepoint))
	}
	h.Addr, e = m.hex("addr")
	fail(e)
	h.Image, e = m.hex("image")
	fail(e)
	h.Mech, e = m.str("mech")
	if !fail(e) {
		switch h.Mech {
		case MechFtrace, MechFtraceOps, MechJump, MechInt3, MechKretprobe, MechFexit, MechDisabled, MechGone, MechTracepoint:
		default:
			fail(fmt.Errorf("unknown mech=%s", h.Mech))
		}
	}
	h.Hits, e = m.uint("hits", 64)
	fail(e)
	h.Missed, e = m.uint("missed", 64)
	fail(e)
	adv, e := m.list("advice", 16)
	fail(e)
	for _, a := range adv {
		h.Advice = append(h.Advice, int(a))
	}
	h.Function, e = m.name("function")
	fail(e)
	h.InlinedIn, e = m.name("inlined_in")
	fail(e)
	h.File, e = m.name("file")
	fail(e)
	h.Line, e = m.int("line")
	fail(e)
	h.Module, e = m.name("module")
	fail(e)
	h.Access, e = m.name("access")
	fail(e)
	return h, err
}
