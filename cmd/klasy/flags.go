package main

import (
	"flag"
	"io"
	"strings"
)

// klasy's one command-line convention, the same for every command and
// lab subcommand:
//
//   - flags may come before, between and after the positional arguments
//     (users type `klasy lines vmlinux f --json`, as perf accepts);
//   - a value is given as --x=v or --x v; a boolean flag takes no value,
//     or --x=true / --x=false; -x is the same as --x;
//   - "--" ends the flags: everything after it is positional, even what
//     looks like a flag (klasy lab exec N -- ls -l);
//   - -h, -help or --help anywhere before "--" prints the command's help
//     (run does that before the command sees its arguments).
//
// A command declares its flags on a flagSet and calls its Parse; nothing
// else parses arguments.

// flagSet is a command's flags: flag.FlagSet's declarations (Bool,
// StringVar, Duration...) with Parse, Args, NArg and Arg following the
// convention above.
type flagSet struct {
	*flag.FlagSet
	cmd string   // "lines", "lab exec"
	pos []string // positional arguments, after Parse
}

func newFlagSet(cmd string) *flagSet {
	fs := flag.NewFlagSet("klasy "+cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are returned, help is the command's
	return &flagSet{FlagSet: fs, cmd: cmd}
}

// testHookParsed, when a test sets it, sees every command's flags and
// positional arguments as parsed; an error it returns ends the command
// there, before it does anything.
var testHookParsed func(cmd string, fs *flag.FlagSet, pos []string) error

// Parse parses args by the convention. Its errors are usageErrors.
func (f *flagSet) Parse(args []string) error {
	f.pos = nil
	for {
		if err := f.FlagSet.Parse(args); err != nil {
			return usageError{Msg: err.Error()}
		}
		rest := f.FlagSet.Args()
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			f.pos = append(f.pos, rest...) // the terminator was consumed
			break
		}
		if len(rest) == 0 {
			break
		}
		f.pos = append(f.pos, rest[0])
		args = rest[1:]
	}
	if testHookParsed != nil {
		return testHookParsed(f.cmd, f.FlagSet, f.pos)
	}
	return nil
}

// Given says whether the command line gave flag name, so that a value
// given explicitly is checked even where the flag's zero value stands
// for its default.
func (f *flagSet) Given(name string) bool {
	given := false
	f.Visit(func(fl *flag.Flag) { given = given || fl.Name == name })
	return given
}

// Args returns the positional arguments.
func (f *flagSet) Args() []string { return f.pos }

// NArg returns the number of positional arguments.
func (f *flagSet) NArg() int { return len(f.pos) }

// Arg returns the i'th positional argument, or "" if there is none.
func (f *flagSet) Arg(i int) string {
	if i < 0 || i >= len(f.pos) {
		return ""
	}
	return f.pos[i]
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

func (l *stringList) Set(v string) error {
	*l = append(*l, v)
	return nil
}
