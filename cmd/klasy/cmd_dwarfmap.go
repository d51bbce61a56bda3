package main

// klasy lines / vars / struct / funcs: source-level queries against a
// kernel image's debug info, answered from dwarfmap's build-id keyed
// index (built on first use, then loaded in milliseconds).
//
// Each command arms its goroutine (mmapfile.Catch): an image or index
// file truncated while it is read ends in "FILE changed while it was
// read", not in a crash.

import (
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/klasy/klasy/cmd/klasy/internal/queryview"
	"github.com/klasy/klasy/dwarfmap"
	"github.com/klasy/klasy/dwarfmap/elfimage"
	"github.com/klasy/klasy/internal/mmapfile"
	"github.com/klasy/klasy/pattern"
)

const imageHelp = `IMAGE is a vmlinux with DWARF (Debian: /usr/lib/debug/boot/vmlinux-<abi>
from linux-image-<abi>-dbg; a built kernel: CONFIG_DEBUG_INFO_DWARF5=y) or a
.ko with debug info, a regular file. The first query on an image indexes it
(a few seconds for a 600 MB vmlinux) and saves the index under
$KLASY_CACHE/dwarfmap keyed by the image's build-id and size; later queries
load it in milliseconds. Copies of functions whose code never runs, such as
__weak definitions that the linker overrode, are left out of every answer.

Common options:
  --json            one JSON object per line, for scripts
  --vmlinux FILE    with a .ko IMAGE: refuse a module built for another kernel
  --rebuild         ignore a saved index and build it again
  --no-cache        neither read nor write the saved index
`

func init() {
	register(&command{
		Name:    "lines",
		Summary: "list source lines with code and their addresses (like perf probe -L)",
		Help: `usage: klasy lines [--json] [--inlined] IMAGE FUNC|FILE[:LINE]

Lists the source lines of a function or a file that have code, each with
the link-time addresses of that code. FILE matches by path suffix
(skbuff.c, net/core/skbuff.c); FUNC:LINE and FILE:LINE take absolute source
line numbers. When a line has no code of its own (the compiler merged it),
the nearest lines before and after it in the same basic block stand in for
it and are marked "fallback".

For FUNC, the lines are the function's own body, as perf probe -L shows
it: a call of an inlined function is listed at its call line, not under
the callee's lines. With --inlined, the lines of the callees inlined into
FUNC follow, each marked "inlined CALLEE". FUNC:LINE on a line of an
inlined callee finds it without --inlined.

JSON fields: function, file, line, addrs (hex strings), stmt,
fallback_for/fallback for stand-in lines, and inlined (the callee) for
lines of inlined code.

Examples:
  klasy lines vmlinux tcp_sendmsg
  klasy lines --inlined vmlinux setattr_prepare
  klasy lines --json vmlinux net/core/skbuff.c
  klasy lines vmlinux net/ipv4/tcp.c:1494

` + imageHelp,
		Run: runLines,
	})
	register(&command{
		Name:    "vars",
		Summary: "list variables visible at a line or address and where they live (like perf probe -V)",
		Help: `usage: klasy vars [--json] IMAGE FUNC:LINE|ADDR

Lists the parameters and local variables in scope at each address of
source line LINE of function FUNC (LINE is the file's line number), or at
ADDR (0xffffffff81234567, or FUNC+0x10 within FUNC's code), with how to
read each one there: a register, a stack slot (CFA-relative, and
rsp-relative at that address from .debug_frame), memory, a constant, or
"optimized out".
Values that DWARF describes only as "the value a register had at function
entry" (DW_OP_entry_value) are shown but marked unavailable: a probe in the
middle of the function cannot read them.

If LINE has no code of its own, the variables are read where the line
before it runs when both lie in one basic block (KLASY's nearest-line
rule), and the output says so.

JSON fields: addr, function, name, kind (param/local), type, location,
expr (the DWARF expression), scope, depth, decl_line, available, and for
FUNC:LINE line (and fallback_for when another line stood in).

Examples:
  klasy vars vmlinux tcp_sendmsg:1494
  klasy vars --json vmlinux tcp_sendmsg_locked+0x40

` + imageHelp,
		Run: runVars,
	})
	register(&command{
		Name:    "struct",
		Summary: "print a struct or union layout with member offsets and sizes",
		Help: `usage: klasy struct [--json] IMAGE NAME

Prints the layout of struct or union NAME (sk_buff, "struct sk_buff",
"union bpf_attr") as pahole does: each member's type, offset and size in
bytes, bitfields as OFFSET:BIT, members of anonymous structs and unions
indented under them with offsets from the start of NAME.

Example:
  klasy struct vmlinux sk_buff

` + imageHelp,
		Run: runStruct,
	})
	register(&command{
		Name:    "funcs",
		Summary: "list functions matching a pattern (% or * wildcards)",
		Help: `usage: klasy funcs [--json] IMAGE PATTERN

Lists the functions whose names match PATTERN, where % (as in KLASY
pointcuts) or * (as in perf probe -F) matches any characters: address
ranges (all of them, .cold parts included), declaring file and line,
global or static, and how many inlined copies exist. Functions that exist only inlined are listed
with "inline only".

JSON fields: name, file, line, external, ranges ([["0x..","0x.."]]),
inlined, inline_only.

With --inlined, lists every inlined copy of the matching functions
instead: the function it was inlined into, the call's file:line and the
copy's address ranges (JSON: name, caller, call_file, call_line, ranges).

Examples:
  klasy funcs vmlinux 'tcp_%'
  klasy funcs --inlined vmlinux skb_put

` + imageHelp,
		Run: runFuncs,
	})
}

// queryFlags are the options every dwarfmap command takes.
type queryFlags struct {
	json, rebuild, noCache bool
	inlined                bool
	vmlinux                string
}

// parseQuery parses a dwarfmap command's flags and its npos positional
// arguments.
func parseQuery(name string, args []string, npos int) (*queryFlags, []string, error) {
	q := &queryFlags{}
	fs := newFlagSet(name)
	if name == "funcs" || name == "lines" {
		fs.BoolVar(&q.inlined, "inlined", false, "")
	}
	fs.BoolVar(&q.json, "json", false, "")
	fs.BoolVar(&q.rebuild, "rebuild", false, "")
	fs.BoolVar(&q.noCache, "no-cache", false, "")
	fs.StringVar(&q.vmlinux, "vmlinux", "", "")
	if err := fs.Parse(args); err != nil {
		return nil, nil, err
	}
	if fs.NArg() != npos {
		return nil, nil, usageError{Msg: fmt.Sprintf("want %d arguments, got %d", npos, fs.NArg())}
	}
	return q, fs.Args(), nil
}

// openIndex loads the index of image, printing progress of a build to
// s.Err.
func openIndex(s *stdio, q *queryFlags, image string) (*dwarfmap.Index, error) {
	if q.vmlinux != "" {
		mod, err := elfimage.Open(image)
		if err != nil {
			return nil, err
		}
		defer mod.Close()
		vm, err := elfimage.Open(q.vmlinux)
		if err != nil && !errors.Is(err, elfimage.ErrNoDebugInfo) {
			return nil, err
		}
		if vm != nil {
			defer vm.Close()
			if err := elfimage.CheckModuleMatches(mod, vm); err != nil {
				return nil, err
			}
		}
	}
	x, info, err := dwarfmap.Load(image, dwarfmap.Options{
		NoCache: q.noCache,
		Rebuild: q.rebuild,
		Log:     func(f string, a ...any) { fmt.Fprintf(s.Err, "klasy: "+f+"\n", a...) },
	})
	if err != nil {
		return nil, err
	}
	if !info.FromCache {
		st := x.Stats()
		fmt.Fprintf(s.Err, "klasy: indexed %s in %.1fs: %d units, %d line rows, %d functions, %d inlined copies, %d structs\n",
			image, info.Built.Seconds(), st.Units, st.Rows, st.Funcs, st.Inlines, st.Structs)
	}
	return x, nil
}

func runLines(s *stdio, args []string) (err error) {
	defer mmapfile.Catch(&err, debug.SetPanicOnFault(true))
	q, pos, err := parseQuery("lines", args, 2)
	if err != nil {
		return err
	}
	sp, err := dwarfmap.ParseLineSpec(pos[1])
	if err != nil {
		return usageError{Msg: err.Error()}
	}
	if q.inlined && sp.Func == "" {
		return usageError{Msg: "--inlined applies to the lines of a function, not of a file"}
	}
	sp.Inlined = q.inlined
	x, err := openIndex(s, q, pos[0])
	if err != nil {
		return err
	}
	defer x.Close()
	lines, err := x.Lines(sp)
	if err != nil {
		return err
	}
	return queryview.Lines(s.Out, lines, q.json)
}

func runVars(s *stdio, args []string) (err error) {
	defer mmapfile.Catch(&err, debug.SetPanicOnFault(true))
	q, pos, err := parseQuery("vars", args, 2)
	if err != nil {
		return err
	}
	spec := pos[1]
	x, err := openIndex(s, q, pos[0])
	if err != nil {
		return err
	}
	defer x.Close()
	var vars []dwarfmap.Var
	if i := strings.LastIndexByte(spec, ':'); i > 0 && !strings.HasPrefix(spec, "0x") {
		sp, err := dwarfmap.ParseLineSpec(spec)
		if err != nil || sp.Func == "" || sp.Line == 0 {
			return usageError{Msg: fmt.Sprintf("%q is not FUNC:LINE or an address", spec)}
		}
		vars, err = x.VarsAtLine(sp.Func, sp.Line)
		if err != nil {
			return err
		}
	} else {
		addr, err := x.ParseAddr(spec)
		if err != nil {
			return err
		}
		if vars, err = x.VarsAt(addr); err != nil {
			return err
		}
	}
	return queryview.Vars(s.Out, x, vars, q.json)
}

func runStruct(s *stdio, args []string) (err error) {
	defer mmapfile.Catch(&err, debug.SetPanicOnFault(true))
	q, pos, err := parseQuery("struct", args, 2)
	if err != nil {
		return err
	}
	x, err := openIndex(s, q, pos[0])
	if err != nil {
		return err
	}
	defer x.Close()
	l, err := x.Struct(pos[1])
	if err != nil {
		return err
	}
	if q.json {
		return json.NewEncoder(s.Out).Encode(l)
	}
	l.Print(s.Out)
	return nil
}

func runFuncs(s *stdio, args []string) (err error) {
	defer mmapfile.Catch(&err, debug.SetPanicOnFault(true))
	q, pos, err := parseQuery("funcs", args, 2)
	if err != nil {
		return err
	}
	p, err := pattern.Compile(pos[1], pattern.CommandLine)
	if err != nil {
		return usageError{Msg: err.Error()}
	}
	x, err := openIndex(s, q, pos[0])
	if err != nil {
		return err
	}
	defer x.Close()
	fs := x.MatchFuncs(p)
	if err := x.Err(); err != nil {
		return err
	}
	if len(fs) == 0 {
		return fmt.Errorf("no function matches %q", pos[1])
	}
	if q.inlined {
		return queryview.Inlines(s.Out, x, fs, pos[1], q.json)
	}
	return queryview.Funcs(s.Out, fs, q.json)
}
