package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/klasy/klasy/aspect"
	"github.com/klasy/klasy/timeline"
	"github.com/klasy/klasy/weaver"
	"github.com/klasy/klasy/weaver/joinpoint"
	"github.com/klasy/klasy/weaver/records"
	"github.com/klasy/klasy/weaver/resolve"
	"github.com/klasy/klasy/weaver/target"
)

const targetHelp = `Target (the running kernel to weave into):
  --lab NAME        a lab started with 'klasy lab up' (its image and
                    headers are known); otherwise this machine's kernel,
                    as root, with
  --vmlinux IMAGE   the running kernel's vmlinux with DWARF (default
                    /usr/lib/debug/boot/vmlinux-$(uname -r))
  --headers DIR     its kbuild tree (default /lib/modules/$(uname -r)/build)

An image that is not the running kernel's build is refused (the
build-id in /sys/kernel/notes is compared with the image's).
  --module PATH.ko  also weave into this module (repeatable): its access
                    and execution join points; one built
                    with the klasy plugin and loaded in the target
                    kernel, as the same build (its build-id in
                    /sys/module/NAME/notes is compared with the file's)
`

func init() {
	register(&command{
		Name:    "weave",
		Summary: "weave an aspect into a running kernel (hooks go live)",
		Help: `usage: klasy weave [--lab NAME] [--module PATH.ko]... [--buffer-kb N] [--json] [-v] FILE
       klasy weave --domains FILE [--buffer-kb N] [--json] [-v] ASPECT

Weaves the aspect in FILE into the running kernel: resolves its pointcuts
to join points in the kernel image, generates and builds an advice module
against the kernel's headers, loads it with the klasy runtime module, and
registers one kprobe (before) or kretprobe (after) per join point, all or
nothing. Advice that does not compile is reported at the aspect's
FILE:LINE:COL and nothing reaches the kernel.

execution(f) selects the entry of every out-of-line body named f (static
ones too) and of every inlined copy; within_file(F) picks the bodies
defined in F, within_function(G) the copies inlined into G. A join point
that cannot be woven (a variable optimized out there, a function the
kernel refuses) is skipped with a warning that says why.

<replace> advice is the function's new body: its value returns to the
caller and the original body does not run, until the unweave. It is
woven as function error injection hooks a function: an ftrace-based
kprobe at f's entry, armed with ftrace's IPMODIFY (one user at a time
may change a function's return path), whose handler sets the return
value and resumes at a stub that only returns. So f must have one
out-of-line body (within_file picks among static ones), no inlined copy
(those calls would keep the original), an ftrace call site and a return
type that comes back in a register; klasy refuses, with the reason, a
function another aspect or a livepatch already replaces, or with
another kprobe at its entry (probes woven after a replacement run
before it). Before advice of the same aspect at f runs first; after
advice sees the replacement's value.

access(S.M) (% wildcards in S and M) selects every place the kernel
reads or writes member M of struct S, from the records the klasy GCC
plugin wrote into a kernel (or --module) built with it, in every
out-of-line body and inlined copy of the function holding it. The hook
is on the accessing instruction itself where exactly one instruction of
the line accesses the member ("exact": before it for before advice,
right after it for after advice), else on the line (its first
instruction for before, past its code for after). within_function(G)
selects accesses written in G or in code inlined into G; within_file(F)
likewise for files; local_var(v, x) only where v is in scope, giving &v;
target(x) gives the accessed struct's address itself. A pointcut of
access(...) that selects nothing is a warning.

line(FILE:LINE) selects a source line's code in every body and inlined
copy holding it (hooks placed as access's line-level ones); block(F) the
entry of every basic block of F's out-of-line bodies ('klasy help check'
says what goes with them; 'klasy cover' counts blocks for you).

The report gives, per aspect, the join points woven by ftrace, jump
(optimized kprobe), int3 or kretprobe, those skipped, and the time spent
resolving, generating, building, loading and registering, and for
access join points how many are exact and line-level. -v lists every
join point; --json prints one object per join point:
  aspect advice function inlined_in file line pc mechanism skipped
  module access exact
(advice is 1-based in FILE, pc the image address as 'klasy lines' prints
it (for a module, of its .ko as klasy lays it out), skipped absent when
woven; module, access ("sk_buff.len read") and exact only for access
join points).

--buffer-kb N sizes the trace buffer: N KiB per CPU (8..65536; default
1024), given to the runtime when this weave loads it. A runtime already
loaded with another size is refused: the size is fixed until the last
aspect is unwoven. 'klasy trace' always prints how many records were
lost because the buffer was full.

Join points in the kernel's kprobe blacklist (NOKPROBE_SYMBOL, entry
and noinstr code) are skipped before anything is loaded; with
KLASY_WEAVE_NO_PRECHECK=1 they are handed to the kernel, which refuses
them: the weave then fails and rolls back, showing the kernel's error.

Examples:
  klasy weave --lab demo examples/setattr_exec.klasy
  klasy trace --lab demo
  klasy unweave --lab demo setattr_exec

` + targetHelp + domainsHelp,
		Run: runWeave,
	})
	register(&command{
		Name:    "list",
		Summary: "list the join points an aspect selects, without touching a kernel",
		Help: `usage: klasy list [--lab NAME | --vmlinux IMAGE] [--module PATH.ko]... [--json] FILE
       klasy list --domains FILE [--json] ASPECT

Resolves the aspect's pointcuts in the kernel image and prints the join
points a weave would hook, and those it would skip with the reason, as
'klasy weave -v' does, without loading anything (like perf probe -L or
stap -l). With --lab, the lab's kernel image; with --vmlinux, any image;
with --module, also the access join points of a module built with
the klasy plugin (addresses of its .ko as klasy lays it out). For access
join points the summary counts exact and line-level ones and the source
lines they cover, and each line says which tier it got. --json prints
one object per join point, as 'klasy weave --json' does.

Examples:
  klasy list --vmlinux vmlinux examples/setattr_exec.klasy
  klasy list --lab built --json examples/net_trace.klasy | jq -r 'select(.exact)|.pc'
` + domainsHelp,
		Run: runList,
	})
	register(&command{
		Name:    "unweave",
		Summary: "remove woven aspects: the kernel is back to what it was",
		Help: `usage: klasy unweave [--lab NAME | --domains FILE] FILE|NAME... | --all

Removes exactly what weaving the named aspects added: their hooks and
their advice module. Unread records are saved on the host first, so
'klasy trace' still prints them. When the last aspect goes, the klasy
runtime goes too: no kprobe and no module of klasy stays in the kernel.
--all removes every aspect and the runtime, also after a klasy that was
killed in the middle of a weave. With --domains, from every domain of
the file where the aspect is woven.

` + targetHelp + domainsHelp,
		Run: runUnweave,
	})
	register(&command{
		Name:    "status",
		Summary: "show woven aspects, their hooks, hits, misses and lost records",
		Help: `usage: klasy status [--lab NAME | --domains FILE] [--json]

Reads from the kernel what klasy has woven into it: each aspect, each
hook with its address, mechanism (ftrace, jump, int3, kretprobe; "ftrace
replace" for a <replace>, kind "replace" in --json), hits and misses (a
hook hit while a handler ran: for a replacement, a call that ran the
original body), and the records waiting and
lost per CPU because the trace buffer was full. Being read from the
kernel, it is right even after a klasy that was killed.

Each flow table (an xflow of the woven aspects) shows its entries (the
objects that carry a flow ID now) and their limit, hits and misses of
get_flowid, evictions (entries pushed out at the limit), freed (entries
of objects freed without reaching quit), ambiguous (IDs cut to fit a
header while another live ID had the same kept bits), dropped
(registrations not done: NMI context, no memory) and without ID (xout_*
that found no flow ID in the header they read, and registered nothing).

--json prints one object: target runtime abi cpus buffer_kb unread
lost_per_cpu flows (each: name entries limit hits misses evictions freed
ambiguous dropped noid) aspects (each: id name module register_us hooks; each
hook: kind mechanism addr pc hits missed advice function inlined_in file
line module, addr the running kernel's address, pc the image's, module
only for a hook in a module, whose pc is then its .ko's).

With --domains, the same for every domain of the file, each under a
line naming the domain; --json prints {"domains": [...]}, each the
object above with "domain" added.

` + targetHelp + domainsHelp,
		Run: runStatus,
	})
	register(&command{
		Name:    "trace",
		Summary: "print what woven advice recorded, symbolized",
		Help: `usage: klasy trace [--lab NAME] [--follow] [--aspect NAME] [--json]
         [--group-by N [--group-gap D] | --hist N | --lhist N,MIN,MAX,STEP]
         [--perfetto FILE]
       klasy trace --domains FILE [--flow] [--aspect NAME] [--json] [--perfetto FILE]

Consumes the records woven advice stored (STORE_DATA...) and prints each
with the time since boot, CPU, pid, command, aspect and advice, the
function (for an inlined copy, also the function it is inlined into),
the join point's file:line and image address, the values, and flow=ID
when the advice ran for an object of a flow (xflow). Records saved by 'klasy unweave' come first. --follow keeps reading until
Ctrl-C. --aspect prints only one aspect's records (the others are still
consumed). A non-zero count of records lost because the buffer was full
is always printed.

--json prints one object per record:
  aspect advice time_ns cpu pid comm pc function inlined_in file line values
  flow (when not 0)
with pc the image address and values an array of integers (signed
64-bit), and at the end {"lost": N, "lost_per_cpu": [...]} if any were
lost.

Views: instead of one line per record, the records grouped by a value
or a histogram of a value. N is the 1-based index of the value, in the
order the advice stored them. A view prints once the trace ends (with
--follow, at Ctrl-C), as bpftrace prints its maps at exit. Records with
fewer than N values are left out, with one warning per aspect#advice.

  --group-by N    one block per distinct value N of an aspect, in the
                  order the values first appear: the path that value
                  took, as the dissertation's Table 6.3 shows a packet's.
                  Each record is a row, in time order: the µs since the
                  block's first record, CPU, pid, command, advice,
                  function, file:line, and the other values.
  --group-gap D   a value seen again more than D after its block's latest
                  record starts a new block (an sk_buff freed and
                  allocated again); default 1s, 0 never starts one.
  --hist N        a histogram of value N per aspect#advice, under a line
                  @ASPECT#ADVICE:, drawn as bpftrace's hist() draws it:
                  power-of-two buckets from the first that counts a value
                  to the last, a row each: [4K, 8K)  123 |@@@@@@@   |
                  below 0 is (..., 0); 0 and 1 are [0] and [1].
  --lhist N,MIN,MAX,STEP
                  linear buckets of STEP from MIN to MAX, as bpftrace's
                  lhist(); (..., MIN) and [MAX, ...) count the rest.
                  MAX-MIN must be a multiple of STEP, in 1000 buckets at
                  most.

With --json, a view prints one object per block:
  aspect value_index value time_ns duration_ns records
(records as above, each with elapsed_ns), or one per histogram:
  aspect advice value_index type count buckets lhist
(type hist or lhist; lhist {min max step} for lhist; each bucket
{min max count}, bounds inclusive, min absent below the first bucket and
max above the last, as bpftrace's JSON).

--perfetto FILE also writes the records, as printed, to FILE in the
Chrome trace-event JSON format that ui.perfetto.dev and chrome://tracing
open: a track per CPU, a slice per record named by its function (its
file:line, pc, task and values in the slice's arguments), and with
--group-by, flow arrows linking each group's records across CPUs.

--domains FILE reads every domain (kernel) of a domains file and merges
their records into one timeline in the host's time. Each guest's
CLOCK_MONOTONIC (the records' clock) is read over its agent 16 times,
each between two readings of the host's; the exchange with the
shortest round trip gives the offset (the guest's reading less the
midpoint of the host's two) and its bound, half that round trip: a
record's host time is right to within its domain's bound. A header
line per domain says its records, offset and bound; each record's line
starts with its host time and domain. --flow prints instead each flow
(records with the same flow ID, unique across the domains of one weave)
as Table 6.8 does: the µs since the flow's first record, domain, file,
line, function. --json prints first {"domains": [{name offset_ns
bound_ns rtt_ns samples records}]}, then one object per record (the
fields above with domain and host_ns; time_ns stays the domain's own),
or with --flow one per flow: flow host_ns duration_ns domains events
(each a record with elapsed_ns). --perfetto writes a process per
domain, a track per CPU, and an arrow from each record of a flow to
the next, across tracks and domains. --follow and the views are not
supported with --domains.

Examples:
  klasy trace --lab demo --follow
  klasy trace --lab demo --aspect net_trace --group-by 1   # per sk_buff
  klasy trace --lab demo --group-by 1 --perfetto net.json  # for ui.perfetto.dev
  klasy trace --lab demo --group-by 2 --group-gap 10ms
  klasy trace --lab demo --follow --hist 1                 # Ctrl-C draws it
  klasy trace --lab demo --lhist 1,0,14000000,2000000  # 2 ms buckets
  klasy trace --domains xen.yaml --flow                    # each flow's path
  klasy trace --domains xen.yaml --perfetto flows.json

` + targetHelp,
		Run: runTrace,
	})
}

// weaveFlags are the options the weaver's commands share.
type weaveFlags struct {
	target.TargetOptions
	json, verbose, follow, all bool
	aspect                     string
	domains                    string         // --domains FILE: every domain of a domains file
	views                      traceViewFlags // trace's
	perfetto                   string         // trace's --perfetto FILE
	flow                       bool           // trace's --flow
	bufferKB                   int            // weave's --buffer-kb N
}

func parseWeaveFlags(name string, args []string, f *weaveFlags) ([]string, error) {
	fs := newFlagSet(name)
	fs.StringVar(&f.Lab, "lab", "", "")
	fs.StringVar(&f.Vmlinux, "vmlinux", "", "")
	fs.StringVar(&f.Headers, "headers", "", "")
	if name != "unweave" {
		fs.BoolVar(&f.json, "json", false, "")
	}
	if name == "weave" || name == "list" {
		fs.Var((*stringList)(&f.Modules), "module", "")
	}
	if name == "weave" || name == "list" || name == "unweave" || name == "status" || name == "trace" {
		fs.StringVar(&f.domains, "domains", "", "")
	}
	switch name {
	case "weave":
		fs.BoolVar(&f.verbose, "v", false, "")
		fs.IntVar(&f.bufferKB, "buffer-kb", 0, "")
	case "trace":
		fs.BoolVar(&f.follow, "follow", false, "")
		fs.StringVar(&f.aspect, "aspect", "", "")
		f.views.declare(fs)
		fs.StringVar(&f.perfetto, "perfetto", "", "")
		fs.BoolVar(&f.flow, "flow", false, "")
	case "unweave":
		fs.BoolVar(&f.all, "all", false, "")
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	return fs.Args(), nil
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

func (l *stringList) Set(v string) error {
	*l = append(*l, v)
	return nil
}

// signalContext is cancelled by Ctrl-C or SIGTERM, so that a weave in
// progress rolls back and a trace --follow ends.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// aspectFile reads the aspect a weaver command is given. Its name is
// the aspect's: standard input has none.
func aspectFile(s *stdio, arg string) ([]byte, error) {
	if arg == "-" {
		return nil, usageError{Msg: "the aspect's name comes from its file name: give a FILE, not -"}
	}
	_, src, err := readAspect(s, arg)
	return src, err
}

func runWeave(s *stdio, args []string) error {
	var f weaveFlags
	pos, err := parseWeaveFlags("weave", args, &f)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError{Msg: fmt.Sprintf("want one aspect FILE, got %d arguments", len(pos))}
	}
	if f.bufferKB != 0 && (f.bufferKB < 8 || f.bufferKB > 64*1024) {
		return usageError{Msg: fmt.Sprintf("--buffer-kb %d: want 8..65536 KiB per CPU", f.bufferKB)}
	}
	src, err := aspectFile(s, pos[0])
	if err != nil {
		return err
	}
	if f.domains != "" {
		return runWeaveDomains(s, &f, pos[0], src)
	}
	// A bad aspect fails here, before any kernel is looked at.
	if _, diags := aspect.Load(pos[0], src); len(diags) > 0 {
		return weaveError(s, &resolve.DiagnosticsError{Diags: diags})
	}
	ctx, cancel := signalContext()
	defer cancel()
	sess, err := weaver.OpenSession(ctx, weaver.SessionOptions{TargetOptions: f.TargetOptions, Log: s.Err})
	if err != nil {
		return err
	}
	defer sess.Close()
	sess.BufferKB = f.bufferKB
	asp, err := weaver.LoadAspect(pos[0], src)
	if err != nil {
		return weaveError(s, err)
	}
	rep, err := weaver.Weave(ctx, sess, asp)
	if rep != nil {
		if err == nil {
			// A weave that fails for want of join points says why in
			// its error.
			printWarnings(s, rep)
		}
		printSkipped(s, rep)
	}
	if err != nil {
		return weaveError(s, err)
	}
	if f.json {
		return printJoinPointsJSON(s, rep)
	}
	printWeaveReport(s, rep, f.verbose)
	return nil
}

// weaveError prints aspect diagnostics as FILE:LINE:COL lines.
func weaveError(s *stdio, err error) error {
	var de *resolve.DiagnosticsError
	if errors.As(err, &de) {
		for _, d := range de.Diags {
			fmt.Fprintln(s.Err, d.String())
		}
		return exitError{1}
	}
	return err
}

// printWarnings prints what resolving noticed, at the aspect's
// FILE:LINE:COL.
func printWarnings(s *stdio, rep *weaver.Report) {
	for _, w := range rep.Warnings {
		fmt.Fprintf(s.Err, "klasy: warning: %s\n", w)
	}
}

// maxSkippedShown: up to this many skipped join points are warned about
// one by one; beyond, the first few and a count per reason, as a weave
// of thousands of access join points would otherwise bury the report.
const maxSkippedShown = 10

func printSkipped(s *stdio, rep *weaver.Report) {
	var skipped []*joinpoint.JoinPoint
	for _, jp := range rep.JoinPoints {
		if jp.Skipped != "" {
			skipped = append(skipped, jp)
		}
	}
	shown := skipped
	if len(skipped) > maxSkippedShown {
		shown = skipped[:3]
	}
	for _, jp := range shown {
		fmt.Fprintf(s.Err, "klasy: warning: %s: advice %d %s %s skipped: %s\n", rep.Aspect, jp.Advice, jp.Timing, jp.Where(), jp.Skipped)
	}
	if len(shown) == len(skipped) {
		return
	}
	byReason := map[string]int{}
	for _, jp := range skipped {
		byReason[joinpoint.SkipClass(jp.Skipped)]++
	}
	reasons := make([]string, 0, len(byReason))
	for r := range byReason {
		reasons = append(reasons, r)
	}
	slices.SortFunc(reasons, func(a, b string) int { return cmp.Or(cmp.Compare(byReason[b], byReason[a]), cmp.Compare(a, b)) })
	var parts []string
	for _, r := range reasons {
		parts = append(parts, fmt.Sprintf("%s %d", r, byReason[r]))
	}
	fmt.Fprintf(s.Err, "klasy: warning: %s: %d more join points skipped (%s); klasy list or weave -v lists each with its reason\n",
		rep.Aspect, len(skipped)-len(shown), strings.Join(parts, ", "))
}

type joinPointJSON struct {
	Domain    string `json:"domain,omitempty"` // weave --domains
	Aspect    string `json:"aspect"`
	Advice    int    `json:"advice"`
	Function  string `json:"function"`
	InlinedIn string `json:"inlined_in,omitempty"`
	File      string `json:"file"`
	Line      int    `json:"line"`
	PC        string `json:"pc"`
	Mechanism string `json:"mechanism,omitempty"`
	Skipped   string `json:"skipped,omitempty"`
	// Access join points only.
	Module string `json:"module,omitempty"`
	Access string `json:"access,omitempty"` // "sk_buff.len read"
	Exact  *bool  `json:"exact,omitempty"`
}

func printJoinPointsJSON(s *stdio, rep *weaver.Report) error {
	return printDomainJoinPointsJSON(s, "", rep)
}

// printDomainJoinPointsJSON is printJoinPointsJSON with each object
// naming domain (weave and list --domains).
func printDomainJoinPointsJSON(s *stdio, domain string, rep *weaver.Report) error {
	enc := json.NewEncoder(s.Out)
	for _, jp := range rep.JoinPoints {
		j := joinPointJSON{Domain: domain, Aspect: rep.Aspect, Advice: jp.Advice, Function: jp.Function, InlinedIn: jp.InlinedIn,
			File: jp.File, Line: jp.Line, PC: fmt.Sprintf("%#x", jp.Addr), Mechanism: jp.Mechanism, Skipped: jp.Skipped, Module: jp.Module}
		if jp.Access != nil {
			exact := jp.Exact
			j.Exact, j.Access = &exact, accessLabel(jp)
		}
		if err := enc.Encode(j); err != nil {
			return err
		}
	}
	return nil
}

// accessLabel is "sk_buff.len read", with how a hook off the access's
// own line was placed.
func accessLabel(jp *joinpoint.JoinPoint) string {
	a := jp.Access
	l := a.Struct + "." + a.Member + " " + a.Mode
	if a.Via != "" {
		l += " (" + a.Via + ")"
	}
	return l
}

func printJoinPoints(w io.Writer, rep *weaver.Report) {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	access := slices.ContainsFunc(rep.JoinPoints, func(jp *joinpoint.JoinPoint) bool { return jp.Access != nil })
	if access {
		fmt.Fprintln(tw, "  ADVICE\tFUNCTION\tFILE:LINE\tPC\tACCESS\tTIER\tHOOK")
	} else {
		fmt.Fprintln(tw, "  ADVICE\tFUNCTION\tFILE:LINE\tPC\tHOOK")
	}
	for _, jp := range rep.JoinPoints {
		fn := jp.Function
		if jp.InlinedIn != "" {
			fn += " (in " + jp.InlinedIn + ")"
		}
		if jp.Module != "" {
			fn += " [" + jp.Module + "]"
		}
		how := jp.Mechanism
		if how == "" {
			how = jp.Kind.String()
		}
		if jp.Skipped != "" {
			how = "skipped: " + jp.Skipped
		}
		acc := ""
		if access {
			acc, tier := "-\t-\t", "line"
			if jp.Access != nil {
				if jp.Exact {
					tier = "exact"
				}
				if jp.Skipped != "" {
					tier = "-"
				}
				acc = accessLabel(jp) + "\t" + tier + "\t"
			}
			fmt.Fprintf(tw, "  %d %s\t%s\t%s:%d\t%#x\t%s%s\n", jp.Advice, jp.Timing, fn, jp.File, jp.Line, jp.Addr, acc, how)
			continue
		}
		fmt.Fprintf(tw, "  %d %s\t%s\t%s:%d\t%#x\t%s%s\n", jp.Advice, jp.Timing, fn, jp.File, jp.Line, jp.Addr, acc, how)
	}
	tw.Flush()
}

// printCoverage prints the access join points' tiers and lines.
func printCoverage(w io.Writer, rep *weaver.Report) {
	c := joinpoint.Coverage(rep.JoinPoints)
	if c.JoinPoints == 0 {
		return
	}
	fmt.Fprintf(w, "  access: %s exact, %s line-level; %d of %d source lines have a join point\n",
		plural(c.Exact, "join point"), plural(c.LineLevel, "join point"), c.LinesHooked, c.Lines)
}

func printWeaveReport(s *stdio, rep *weaver.Report, verbose bool) {
	mech := map[string]int{}
	for _, jp := range rep.JoinPoints {
		if jp.Skipped == "" {
			mech[jp.Mechanism]++
		}
	}
	skipped := len(rep.JoinPoints) - rep.Woven()
	fmt.Fprintf(s.Out, "%s: woven into %s: %s (ftrace %d, jump %d, int3 %d, kretprobe %d), %d skipped\n",
		rep.Aspect, rep.Target, plural(rep.Woven(), "join point"), mech["ftrace"], mech["jump"], mech["int3"], mech["kretprobe"], skipped)
	t := rep.Times
	fmt.Fprintf(s.Out, "  resolve %s, generate %s, build %s, load %s, register %s\n",
		dur(t.Resolve), dur(t.Generate), dur(t.Build), dur(t.Load), dur(t.Register))
	printCoverage(s.Out, rep)
	if verbose {
		printJoinPoints(s.Out, rep)
	}
}

// plural says "1 hook", "2 hooks".
func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func dur(d time.Duration) string {
	if d < time.Second {
		return fmt.Sprintf("%d ms", d.Milliseconds())
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}

func runList(s *stdio, args []string) error {
	var f weaveFlags
	pos, err := parseWeaveFlags("list", args, &f)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError{Msg: fmt.Sprintf("want one aspect FILE, got %d arguments", len(pos))}
	}
	src, err := aspectFile(s, pos[0])
	if err != nil {
		return err
	}
	if f.domains != "" {
		return runListDomains(s, &f, pos[0], src)
	}
	sess, err := weaver.OpenImage(f.TargetOptions, s.Err)
	if err != nil {
		return err
	}
	defer sess.Close()
	asp, err := weaver.LoadAspect(pos[0], src)
	if err != nil {
		return weaveError(s, err)
	}
	_, rep, err := weaver.Plan(sess, asp)
	if err != nil {
		return weaveError(s, err)
	}
	printWarnings(s, rep)
	if f.json {
		return printJoinPointsJSON(s, rep)
	}
	fmt.Fprintf(s.Out, "%s: %s in %s, %d would be skipped\n", rep.Aspect, plural(len(rep.JoinPoints), "join point"), sess.T.Image(), len(rep.JoinPoints)-rep.Woven())
	printCoverage(s.Out, rep)
	printJoinPoints(s.Out, rep)
	return nil
}

func runUnweave(s *stdio, args []string) error {
	var f weaveFlags
	pos, err := parseWeaveFlags("unweave", args, &f)
	if err != nil {
		return err
	}
	if f.all == (len(pos) > 0) {
		return usageError{Msg: "name the aspects to unweave (FILE or NAME), or give --all"}
	}
	if f.domains != "" {
		return runUnweaveDomains(s, &f, pos)
	}
	ctx, cancel := signalContext()
	defer cancel()
	sess, err := weaver.OpenSession(ctx, weaver.SessionOptions{TargetOptions: f.TargetOptions, Log: s.Err, SkipIndex: true})
	if err != nil {
		return err
	}
	defer sess.Close()
	rep, err := weaver.Unweave(ctx, sess, pos, f.all)
	if rep != nil {
		for _, a := range rep.Aspects {
			fmt.Fprintf(s.Out, "%s: unwoven from %s\n", a, sess.T.Name())
		}
		if rep.Saved > 0 {
			fmt.Fprintf(s.Out, "%d unread records saved: 'klasy trace' prints them\n", rep.Saved)
		}
		if rep.RuntimeRemoved {
			fmt.Fprintf(s.Out, "no aspect left: the klasy runtime is removed from %s\n", sess.T.Name())
		} else if f.all && len(rep.Aspects) == 0 && err == nil {
			fmt.Fprintf(s.Out, "nothing of klasy is woven into %s\n", sess.T.Name())
		}
	}
	return err
}

func runStatus(s *stdio, args []string) error {
	var f weaveFlags
	pos, err := parseWeaveFlags("status", args, &f)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usageError{Msg: fmt.Sprintf("takes no arguments, got %q", pos)}
	}
	if f.domains != "" {
		return runStatusDomains(s, &f)
	}
	ctx, cancel := signalContext()
	defer cancel()
	sess, err := weaver.OpenSession(ctx, weaver.SessionOptions{TargetOptions: f.TargetOptions, Log: s.Err, SkipIndex: true})
	if err != nil {
		return err
	}
	defer sess.Close()
	st, err := sess.Status(ctx)
	if err != nil {
		return err
	}
	if f.json {
		return json.NewEncoder(s.Out).Encode(statusView(sess.T.Name(), st))
	}
	writeStatus(s.Out, sess.T.Name(), st)
	return nil
}

// writeStatus prints klasy status as text.
func writeStatus(w io.Writer, target string, st *records.Status) {
	if st == nil {
		fmt.Fprintf(w, "%s: nothing of klasy is woven (no klasy runtime)\n", target)
		return
	}
	var lost []string
	for i, l := range st.Lost {
		lost = append(lost, fmt.Sprintf("cpu%d %d", i, l))
	}
	fmt.Fprintf(w, "%s: klasy runtime (abi %d), %s, %d KiB buffer per CPU, %s unread, %d lost (%s)\n",
		target, st.ABI, plural(st.CPUs, "CPU"), st.BufferKB, plural(int(st.Unread), "record"), st.TotalLost(), strings.Join(lost, ", "))
	for _, f := range st.Flows {
		fmt.Fprintf(w, "flow %s: %d of %d entries, %d hits, %d misses, %d evictions, %d freed, %d ambiguous, %d dropped, %d without ID\n",
			f.Name, f.Entries, f.Limit, f.Hits, f.Misses, f.Evictions, f.Freed, f.Ambiguous, f.Dropped, f.NoID)
	}
	for _, a := range st.Aspects {
		fmt.Fprintf(w, "aspect %s (module %s): %s\n", a.Name, a.Module, plural(len(a.Hooks), "hook"))
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

// statusJSON is klasy status --json: addresses as hex strings, as
// klasy lines prints them, so that scripts in any language read them
// exactly.
type statusJSON struct {
	Target   string       `json:"target"`
	Runtime  bool         `json:"runtime"` // false: nothing of klasy is woven
	ABI      int          `json:"abi,omitempty"`
	CPUs     int          `json:"cpus,omitempty"`
	BufferKB int          `json:"buffer_kb,omitempty"`
	Unread   uint64       `json:"unread"`
	Lost     []uint64     `json:"lost_per_cpu"`
	Flows    []flowJSON   `json:"flows"`
	Aspects  []aspectJSON `json:"aspects"`
}

type flowJSON struct {
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
	ID         uint32     `json:"id"`
	Name       string     `json:"name"`
	Module     string     `json:"module"`
	RegisterUS int64      `json:"register_us"`
	Hooks      []hookJSON `json:"hooks"`
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
}

func statusView(target string, st *records.Status) statusJSON {
	v := statusJSON{Target: target, Lost: []uint64{}, Flows: []flowJSON{}, Aspects: []aspectJSON{}}
	if st == nil {
		return v
	}
	v.Runtime, v.ABI, v.CPUs, v.BufferKB, v.Unread, v.Lost = true, st.ABI, st.CPUs, st.BufferKB, st.Unread, st.Lost
	for _, f := range st.Flows {
		v.Flows = append(v.Flows, flowJSON(f))
	}
	for _, a := range st.Aspects {
		aj := aspectJSON{ID: a.ID, Name: a.Name, Module: a.Module, RegisterUS: a.Register.Microseconds(), Hooks: []hookJSON{}}
		for _, h := range a.Hooks {
			aj.Hooks = append(aj.Hooks, hookJSON{Kind: h.Kind, Mechanism: h.Mech, Addr: fmt.Sprintf("%#x", h.Addr), PC: fmt.Sprintf("%#x", h.Image),
				Hits: h.Hits, Missed: h.Missed, Advice: h.Advice, Function: h.Function, InlinedIn: h.InlinedIn, File: h.File, Line: h.Line, Module: h.Module})
		}
		v.Aspects = append(v.Aspects, aj)
	}
	return v
}

// traceSource is where klasy trace reads records: a session on the
// target.
type traceSource interface {
	Name() string
	TakeSaved() (rs []records.TraceRecord, done func() error, err error)
	Drain(ctx context.Context) ([]records.TraceRecord, *records.Status, error)
	Close() error
}

type sessionSource struct{ *weaver.Session }

func (s sessionSource) Name() string { return s.T.Name() }

// openTraceSource opens klasy trace's target; a test gives its own
// records instead.
var openTraceSource = func(ctx context.Context, s *stdio, opt target.TargetOptions) (traceSource, error) {
	sess, err := weaver.OpenSession(ctx, weaver.SessionOptions{TargetOptions: opt, Log: s.Err, SkipIndex: true})
	if err != nil {
		return nil, err
	}
	return sessionSource{sess}, nil
}

// tracePoll is how often trace --follow reads the buffer (a test
// shortens it).
var tracePoll = 200 * time.Millisecond

func runTrace(s *stdio, args []string) error {
	var f weaveFlags
	pos, err := parseWeaveFlags("trace", args, &f)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usageError{Msg: fmt.Sprintf("takes no arguments, got %q", pos)}
	}
	if f.domains != "" {
		return runTraceDomains(s, f)
	}
	if f.flow {
		return usageError{Msg: "--flow follows flows across kernels: give --domains FILE"}
	}
	view, err := f.views.view(s.Err)
	if err != nil {
		return err
	}
	ctx, cancel := signalContext()
	defer cancel()
	src, err := openTraceSource(ctx, s, f.TargetOptions)
	if err != nil {
		return err
	}
	defer src.Close()
	p := &tracePrinter{s: s, json: f.json, aspect: f.aspect, view: view}
	if f.perfetto != "" {
		p.export = &perfettoExport{path: f.perfetto, target: src.Name()}
	}
	saved, done, err := src.TakeSaved()
	if err != nil {
		return err
	}
	if err := p.print(saved); err != nil {
		return err
	}
	if err := done(); err != nil {
		return err
	}
	var lost uint64
	var perCPU []uint64
	for {
		rs, st, err := src.Drain(ctx)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			// What was read before is printed all the same.
			if perr := p.finish(); perr != nil {
				return perr
			}
			return err
		}
		if err := p.print(rs); err != nil {
			return err
		}
		if st != nil {
			lost, perCPU = st.TotalLost(), st.Lost
		}
		if !f.follow {
			if st == nil && len(saved) == 0 {
				fmt.Fprintf(s.Err, "klasy: nothing is woven into %s and no records are saved\n", src.Name())
			}
			break
		}
		// Records as they come, not when 64 KiB of them are buffered.
		if err := s.flush(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
		case <-time.After(tracePoll):
			continue
		}
		break
	}
	if err := p.finish(); err != nil {
		return err
	}
	if lost > 0 {
		var parts []string
		for i, l := range perCPU {
			parts = append(parts, fmt.Sprintf("cpu%d %d", i, l))
		}
		fmt.Fprintf(s.Err, "klasy: %d records lost because the trace buffer was full (%s)\n", lost, strings.Join(parts, ", "))
		if f.json {
			return json.NewEncoder(s.Out).Encode(map[string]any{"lost": lost, "lost_per_cpu": perCPU})
		}
	}
	return nil
}

type tracePrinter struct {
	s      *stdio
	json   bool
	aspect string
	view   traceView // nil: one line per record
	enc    *json.Encoder
	export *perfettoExport // --perfetto, written at the end
}

func (p *tracePrinter) print(rs []records.TraceRecord) error {
	if p.enc == nil {
		p.enc = json.NewEncoder(p.s.Out)
	}
	for _, r := range rs {
		if p.aspect != "" && r.Aspect != p.aspect {
			continue
		}
		if p.export != nil {
			p.export.add(r)
		}
		if p.view != nil {
			p.view.add(r)
			continue
		}
		if p.json {
			if err := p.enc.Encode(r); err != nil {
				return err
			}
			continue
		}
		fmt.Fprintf(p.s.Out, "[%5d.%06d] %s\n", r.TimeNS/1e9, r.TimeNS%1e9/1e3, recordLine(r))
	}
	return nil
}

// recordLine prints a record as klasy trace does after its time: cpu
// pid comm aspect#advice function file:line pc values.
func recordLine(r records.TraceRecord) string {
	vals := make([]string, len(r.Values))
	for i, v := range r.Values {
		vals[i] = formatValue(v)
	}
	extra := ""
	if r.Flow != 0 {
		extra = fmt.Sprintf(" flow=%d", r.Flow)
	}
	if r.Dropped > 0 {
		extra += fmt.Sprintf(" (+%d values dropped: at most 16 per hit)", r.Dropped)
	}
	return fmt.Sprintf("cpu%d %d %s %s#%d %s %s:%d %s %s%s",
		r.CPU, r.PID, r.Comm, r.Aspect, r.Advice, timeline.Function(r), r.File, r.Line, r.PC, strings.Join(vals, " "), extra)
}

// finish prints the view and writes the export, once the trace has
// ended.
func (p *tracePrinter) finish() error {
	if p.export != nil {
		var groups []*traceGroup
		index := 0
		if g, ok := p.view.(*groupView); ok {
			groups, index = g.groups, g.pick.index
		}
		err := p.export.write(groups, index)
		p.export = nil
		if err != nil {
			return err
		}
	}
	if p.view == nil {
		return nil
	}
	err := p.view.print(p.s.Out, p.json)
	p.view = nil
	return err
}

// formatValue prints a stored value as a person reads it: small negative
// numbers (errnos) signed, kernel addresses in hex, the rest in decimal.
func formatValue(v int64) string {
	switch {
	case v < 0 && v >= -4095:
		return fmt.Sprint(v)
	case uint64(v) >= 0xffff800000000000:
		return fmt.Sprintf("%#x", uint64(v))
	case v < 0:
		return fmt.Sprint(uint64(v))
	}
	return fmt.Sprint(v)
}
