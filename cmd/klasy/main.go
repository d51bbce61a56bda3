// Command klasy weaves aspects into a running Linux kernel.
//
// main is thin: each subcommand lives in its own file (cmd_*.go) and
// registers itself with register() from an init function, so subcommands
// can be added without touching this file. A command's help text is
// help/NAME.txt; the weaver's commands reach their kernel, or every
// domain of --domains FILE, through target.go; what a command prints is
// laid out by a package under internal/ (traceview, flowview, perfetto,
// hist, statsview, statusview, coverview, jpview, queryview, labview),
// its numbers written by internal/human.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/klasy/klasy/aspect/params"

	"github.com/klasy/klasy/cmd/klasy/internal/cmdout"
)

// command is one klasy subcommand.
type command struct {
	Name    string // as typed: "check", "lab"
	Summary string // one line for `klasy --help`
	// Help is the long text for `klasy help NAME` / `klasy NAME --help`:
	// usage line first, then what it does and a short example.
	Help string
	Run  func(io *stdio, args []string) error
}

// stdio carries the streams a command writes to: data to Out,
// diagnostics and progress to Err. run gives each command an Out that
// buffers and checks every write (output.go): a command writes its data
// there and leaves flushing and checking it to run.
type stdio struct {
	In  io.Reader
	Out io.Writer
	Err io.Writer
	// params is what -D replaced in the aspect read: diagnostics of it
	// are put back at the columns as written.
	params *params.Expansion
}

// exitError makes run return a specific exit status without printing
// anything more (the command already printed its diagnostics).
type exitError struct{ Code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.Code) }

// usageError is printed with a hint to the command's help.
type usageError struct {
	Msg string
}

func (e usageError) Error() string { return e.Msg }

var commands = map[string]*command{}

func register(c *command) {
	if _, dup := commands[c.Name]; dup {
		panic("klasy: command registered twice: " + c.Name)
	}
	commands[c.Name] = c
}

var overview = helpText("overview")

func usage(w io.Writer) {
	fmt.Fprint(w, overview)
	fmt.Fprintf(w, "\nUsage: klasy COMMAND [ARGS...]\n\nCommands:\n")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-12s %s\n", n, commands[n].Summary)
	}
	fmt.Fprintf(w, "  %-12s %s\n", "help", "show help for a command: klasy help COMMAND")
	fmt.Fprintf(w, "\nRun 'klasy help COMMAND' or 'klasy COMMAND --help' for details. Every command\n"+
		"takes its flags anywhere before --, as --flag value or --flag=value.\n")
}

// run is main without os.Exit, for tests. It gives the command the one
// output path and reports a write to it that failed as the command's
// error: no command exits 0 when its output was not written.
func run(s *stdio, args []string) error {
	out := cmdout.New(s.Out)
	err := dispatch(&stdio{In: s.In, Out: out, Err: cmdout.Diagnostics{Out: out, W: s.Err}}, args)
	if out.Flush() != nil {
		// A command's error that says what its lost output was (trace:
		// the records not written) says it better.
		if err != nil && errors.Is(err, out.Err()) {
			return err
		}
		return out.Err()
	}
	return err
}

// dispatch runs the command args name.
func dispatch(s *stdio, args []string) error {
	if len(args) == 0 {
		usage(s.Err)
		return exitError{2}
	}
	name, rest := args[0], args[1:]
	switch name {
	case "-h", "--help", "-help":
		usage(s.Out)
		return nil
	case "help":
		if len(rest) == 0 {
			usage(s.Out)
			return nil
		}
		c, ok := commands[rest[0]]
		if !ok {
			return fmt.Errorf("unknown command %q (run 'klasy --help' for the list)", rest[0])
		}
		fmt.Fprint(s.Out, strings.TrimLeft(c.Help, "\n"))
		return nil
	}
	c, ok := commands[name]
	if !ok {
		return fmt.Errorf("unknown command %q (run 'klasy --help' for the list)", name)
	}
	for _, a := range rest {
		if a == "--" {
			break
		}
		if a == "-h" || a == "--help" || a == "-help" {
			fmt.Fprint(s.Out, strings.TrimLeft(c.Help, "\n"))
			return nil
		}
	}
	err := c.Run(s, rest)
	var ue usageError
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %s (run 'klasy help %s' for usage)", c.Name, ue.Msg, c.Name)
	}
	return err
}

func main() {
	err := run(&stdio{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}, os.Args[1:])
	if err == nil {
		return
	}
	var ee exitError
	if errors.As(err, &ee) {
		os.Exit(ee.Code)
	}
	fmt.Fprintf(os.Stderr, "klasy: %v\n", err)
	os.Exit(1)
}
