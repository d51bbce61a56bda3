package main

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/klasy/klasy/aspect"
	"github.com/klasy/klasy/internal/boundedread"
)

const checkHelp = `usage: klasy check [--json] FILE...

Check aspect files without touching the kernel: XML structure, pointcut
syntax and the rules of the aspect language. Prints one line per error,
FILE:LINE:COL: message, at the offending token (FILE: message when it is
about the whole file, such as its encoding), and exits 1 if any file has
errors or cannot be read, 0 if all are valid. A FILE of - is standard
input, named <stdin> in the messages.

Limits: an aspect is UTF-8 text of at most 1 MiB, from a file, a pipe or
standard input (devices and directories are refused); a pointcut is at
most 64 KiB. Larger inputs are refused before they are parsed.

An aspect is C advice tagged with XML:

  <aspect>
    <import>linux/skbuff.h</import>
    <advice>
      <pointcut>access(sk_buff.len) AND within_file(net/core/dev.c)
                AND target(skb)</pointcut>
      <before>
        struct sk_buff *s = skb;
        if (s-&gt;len &gt; 1500) printk("big skb %u\n", s-&gt;len);
      </before>
    </advice>
  </aspect>

Pointcut designators (% is the wildcard, never *):
  execution(FUNC) or execution(FUNC())  function executions
  access(STRUCT.MEMBER)                 reads and writes of a struct member
  within_file(PATH[@DOMAIN])            join points in matching files
  within_function(FUNC[@DOMAIN])        join points in matching functions
  target(VAR)                           VAR = the accessed structure (void *)
  local_var(LOCAL, VAR)                 VAR = &LOCAL at the join point
  argument(PARAM, VAR)                  VAR = &PARAM of an executed function
  xflow(FLOW, VAR[, ID])                only if VAR's data belongs to FLOW
  line(FILE:LINE)                       the code of one source line, in every
                                        body and inlined copy holding it
  block(FUNC)                           the entry of every basic block of FUNC

Combine them with AND and OR (AND binds tighter) and parentheses. Every
AND-group needs an access, an execution, a line or a block, and only one
of these kinds (they select different join points); execution goes with
execution, argument, within_file (which of several static functions of
one name: the file that defines it) and within_function (which inlined
copy: the function it is inlined into; the function itself is its
out-of-line body); target only with access. line goes with
within_function (the copies in that function or inlined into it),
local_var (only where LOCAL is in scope) and argument (the parameter of
the function the line is written in, an inlined copy's own); a line
without code is an error that names the nearest lines with code. block
goes with block, within_file, local_var and argument, in <before> advice
only; it hooks FUNC's out-of-line bodies (its inlined copies are blocks
of the functions they are in), and skips, naming the jump, the blocks
only an indirect jump (a jump table) reaches.
In C code, write < > & as &lt; &gt; &amp; or use <![CDATA[ ... ]]>.

Advice code may use $pc$ (the join point's address in the running kernel)
and, in <after> advice of an execution, $retval$ (the return value), and
STORE_DATA(x) ... STORE_DATA8(...) and DO_RDTSC(v) to record values for
'klasy trace'.

<replace> instead of <before> or <after> gives a function a new body
(DKM's replace): it reads the arguments through argument(...) and
returns the function's value; the original body does not run while the
aspect is woven:

  <advice>
    <pointcut>execution(ksys_lseek) AND argument(offset, offp)</pointcut>
    <replace>return *(off_t *)offp;</replace>
  </advice>

A nullify only returns: <replace>return 0;</replace> for a function that
returns a value, an empty <replace></replace> for a void one.
Its pointcut names one function: one execution(FUNC) without % or OR,
with argument(...) and within_file(...) only. A <replace> that does not
return a value on every path (or returns one from a void function) does
not compile, reported at the aspect's line; 'klasy weave' checks the
rest against the kernel (one out-of-line body, no inlined copy, an
ftrace call site).

Flows (<xflow name="...">) follow data across threads and Xen domains
with <start>, <transit> and <quit> rules; see 'klasy help translate'.

Options:
  --json   one JSON object per diagnostic: {"file","line","col","message"}
`

func init() {
	register(&command{
		Name:    "check",
		Summary: "check aspect files for errors (FILE:LINE:COL: message)",
		Help:    checkHelp,
		Run:     runCheck,
	})
}

func runCheck(s *stdio, args []string) error {
	fs := newFlagSet("check")
	jsonOut := fs.Bool("json", false, "")
	if err := fs.Parse(args); err != nil {
		return err
	}
	files := fs.Args()
	if len(files) == 0 {
		return usageError{Msg: "no aspect file given"}
	}
	failed := false
	for _, arg := range files {
		name, src, err := readAspect(s, arg)
		if err != nil {
			// Like gcc with several files: say so and check the rest.
			fmt.Fprintf(s.Err, "klasy: %v\n", err)
			failed = true
			continue
		}
		_, diags := aspect.Load(name, src)
		if len(diags) > 0 {
			failed = true
		}
		printDiagnostics(s, diags, *jsonOut)
	}
	if failed {
		return exitError{Code: 1}
	}
	return nil
}

// readAspect reads the aspect file arg, or standard input if arg is
// "-", and returns the name diagnostics give it. Either holds at most
// aspect.MaxFileSize bytes; devices and directories are refused.
func readAspect(s *stdio, arg string) (string, []byte, error) {
	if arg == "-" {
		src, err := boundedread.Reader("<stdin>", s.In, aspect.MaxFileSize, "an aspect")
		if err != nil {
			var tl *boundedread.TooLargeError
			if errors.As(err, &tl) {
				return "<stdin>", nil, fmt.Errorf("reading aspect: %w", err)
			}
			return "<stdin>", nil, fmt.Errorf("reading aspect from standard input: %w", err)
		}
		return "<stdin>", src, nil
	}
	src, err := boundedread.File(arg, aspect.MaxFileSize, "an aspect")
	if err != nil {
		return arg, nil, fmt.Errorf("reading aspect: %w", err)
	}
	return arg, src, nil
}

// printDiagnostics writes diagnostics to stderr as text, or to stdout
// as JSON lines for scripts.
func printDiagnostics(s *stdio, diags aspect.Diagnostics, jsonOut bool) {
	for _, d := range diags {
		if !jsonOut {
			fmt.Fprintln(s.Err, d)
			continue
		}
		b, _ := json.Marshal(struct {
			File    string `json:"file"`
			Line    int    `json:"line"`
			Col     int    `json:"col"`
			Message string `json:"message"`
		}{d.Pos.Filename, d.Pos.Line, d.Pos.Col, d.Msg})
		fmt.Fprintf(s.Out, "%s\n", b)
	}
}
