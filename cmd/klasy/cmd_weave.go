package main

import (
	"fmt"

	"github.com/klasy/klasy/cmd/klasy/internal/jpview"
	"github.com/klasy/klasy/weaver"
)

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
}

func runWeave(s *stdio, args []string) error {
	var t targetFlags
	var asJSON, verbose bool
	var bufferKB int
	fs := newFlagSet("weave")
	t.declare(fs, true, true)
	fs.BoolVar(&asJSON, "json", false, "")
	fs.BoolVar(&verbose, "v", false, "")
	fs.IntVar(&bufferKB, "buffer-kb", 0, "")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError{Msg: fmt.Sprintf("want one aspect FILE, got %d arguments", fs.NArg())}
	}
	if bufferKB != 0 && (bufferKB < 8 || bufferKB > 64*1024) {
		return usageError{Msg: fmt.Sprintf("--buffer-kb %d: want 8..65536 KiB per CPU", bufferKB)}
	}
	path := fs.Arg(0)
	src, err := aspectFile(s, path)
	if err != nil {
		return err
	}
	// A bad aspect, or one naming a domain the file lacks, fails here,
	// before any kernel is looked at.
	var reps []weaver.DomainReport
	if t.domains != "" {
		if err := t.needNoTarget(); err != nil {
			return err
		}
		file, _, err := checkDomainsAspect(s, t.domains, path, src)
		if err != nil {
			return err
		}
		ts, err := openTargets(s, &t, true, file)
		if err != nil {
			return err
		}
		defer ts.Close()
		for _, d := range ts.domains {
			d.BufferKB = bufferKB
		}
		reps, err = weaver.WeaveDomains(ts.ctx, ts.domains, path, src)
		if werr := weaveReported(s, reps, err); werr != nil {
			return werr
		}
	} else {
		if err := checkAspect(s, path, src); err != nil {
			return err
		}
		ts, err := openTargets(s, &t, true, nil)
		if err != nil {
			return err
		}
		defer ts.Close()
		ts.one.BufferKB = bufferKB
		rep, err := weaver.Weave(ts.ctx, ts.one, path, src)
		reps = []weaver.DomainReport{{Report: rep}}
		if werr := weaveReported(s, reps, err); werr != nil {
			return werr
		}
	}
	for _, r := range reps {
		switch {
		case r.Report == nil && !asJSON:
			fmt.Fprintf(s.Out, "%s: no advice goes to domain %s\n", weaver.AspectName(path), r.Domain)
		case r.Report == nil:
		case asJSON:
			if err := jpview.JSON(s.Out, r.Domain, r.Report); err != nil {
				return err
			}
		default:
			jpview.Woven(s.Out, r.Report, verbose)
		}
	}
	return nil
}

// weaveReported warns of what the weave of each report noticed and
// skipped, and returns the weave's error, its diagnostics printed. A
// weave that fails for want of join points says why in its error,
// without the warnings.
func weaveReported(s *stdio, reps []weaver.DomainReport, err error) error {
	for _, r := range reps {
		if r.Report != nil {
			if err == nil {
				jpview.Warnings(s.Err, r.Report)
			}
			jpview.Skipped(s.Err, r.Report)
		}
	}
	if err != nil {
		return weaveError(s, err)
	}
	return nil
}
