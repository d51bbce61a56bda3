package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
)

// cmdSample is a valid invocation of one command for TestFlagConvention:
// its positional arguments and a value for every flag it declares.
type cmdSample struct {
	pos   []string
	flags []flagSample
}

// flagSample is a flag and the value to give it; "" for a boolean flag,
// which is then set to true. want is the flag's value once parsed, when
// it prints otherwise than given.
type flagSample struct{ name, value, want string }

// cmdSamples has an entry for every command and lab subcommand:
// TestFlagConvention fails for a command without one, or with a flag the
// entry does not give.
var cmdSamples = map[string]cmdSample{
	"check":     {pos: []string{"a.klasy", "-"}, flags: []flagSample{{name: "json"}, {name: "D", value: "PID=42"}}},
	"translate": {pos: []string{"a.klasy"}, flags: []flagSample{{name: "D", value: "PID=42"}}},
	"lines": {pos: []string{"vmlinux", "tcp_sendmsg"}, flags: []flagSample{
		{name: "json"}, {name: "inlined"}, {name: "rebuild"}, {name: "no-cache"}, {name: "vmlinux", value: "vm"}, {name: "lab", value: "demo"}}},
	"vars": {pos: []string{"vmlinux", "f:12"}, flags: []flagSample{
		{name: "json"}, {name: "rebuild"}, {name: "no-cache"}, {name: "vmlinux", value: "vm"}, {name: "lab", value: "demo"}}},
	"struct": {pos: []string{"vmlinux", "sk_buff"}, flags: []flagSample{
		{name: "json"}, {name: "rebuild"}, {name: "no-cache"}, {name: "vmlinux", value: "vm"}, {name: "lab", value: "demo"}}},
	"funcs": {pos: []string{"vmlinux", "tcp_*"}, flags: []flagSample{
		{name: "json"}, {name: "inlined"}, {name: "rebuild"}, {name: "no-cache"}, {name: "vmlinux", value: "vm"}, {name: "lab", value: "demo"}}},
	"tracepoints": {pos: []string{"vmlinux", "sched:*"}, flags: []flagSample{
		{name: "json"}, {name: "rebuild"}, {name: "no-cache"}, {name: "vmlinux", value: "vm"}, {name: "lab", value: "demo"}}},
	"accesses": {pos: []string{"a.o", "sk_buff.%"}, flags: []flagSample{{name: "json"}, {name: "lab", value: "demo"}}},
	"agent": {flags: []flagSample{{name: "device", value: "/dev/vport0p1"}, {name: "allow-run"},
		{name: "listen", value: "127.0.0.1:7070"}, {name: "tls-ca", value: "ca.crt"}, {name: "tls-cert", value: "a.crt"},
		{name: "tls-key", value: "a.key"}, {name: "log", value: "refused.log"}}},
	"lab up": {pos: []string{"a"}, flags: []flagSample{
		{name: "name", value: "a"}, {name: "kernel", value: "built"}, {name: "mem", value: "256"},
		{name: "cpus", value: "2"}, {name: "lan"}, {name: "timeout", value: "90s", want: "1m30s"},
		{name: "xen"}, {name: "system"}, {name: "domus", value: "2"}, {name: "plugin", value: "klasy.so"}}},
	"lab exec": {pos: []string{"a", "true"}, flags: []flagSample{{name: "timeout", value: "5s"}, {name: "stdin"},
		{name: "domain", value: "domU1"}}},
	"lab status": {pos: []string{"a"}, flags: []flagSample{{name: "json"}}},
	"lab down":   {pos: []string{"a"}},
	"weave": {pos: []string{"a.klasy"}, flags: []flagSample{{name: "lab", value: "demo"}, {name: "vmlinux", value: "vm"},
		{name: "headers", value: "h"}, {name: "json"}, {name: "v"}, {name: "module", value: "m.ko"}, {name: "domains", value: "d.yaml"}, {name: "buffer-kb", value: "2048"},
		{name: "max-join-points", value: "30000"}, {name: "max-c-mb", value: "128"}, {name: "max-build-time", value: "30m0s"}, {name: "D", value: "PID=42"},
		{name: "pid", value: "42"}, {name: "comm", value: "dd"}, {name: "include-self"}}},
	"list": {pos: []string{"a.klasy"}, flags: []flagSample{{name: "lab", value: "demo"}, {name: "vmlinux", value: "vm"},
		{name: "headers", value: "h"}, {name: "json"}, {name: "module", value: "m.ko"}, {name: "domains", value: "d.yaml"},
		{name: "D", value: "PID=42"}}},
	"unweave": {pos: []string{"a.klasy", "b"}, flags: []flagSample{{name: "lab", value: "demo"}, {name: "vmlinux", value: "vm"},
		{name: "headers", value: "h"}, {name: "all"}, {name: "domains", value: "d.yaml"}}},
	"status": {flags: []flagSample{{name: "lab", value: "demo"}, {name: "vmlinux", value: "vm"},
		{name: "headers", value: "h"}, {name: "json"}, {name: "domains", value: "d.yaml"}}},
	"trace": {flags: []flagSample{{name: "lab", value: "demo"}, {name: "vmlinux", value: "vm"},
		{name: "headers", value: "h"}, {name: "json"}, {name: "follow"}, {name: "aspect", value: "a"},
		{name: "group-by", value: "2"}, {name: "group-gap", value: "10ms"}, {name: "hist", value: "1"}, {name: "lhist", value: "1,0,100,10"},
		{name: "perfetto", value: "t.json"}, {name: "domains", value: "d.yaml"}, {name: "flow"},
		{name: "otlp", value: "http://localhost:4318"}}},
	"lab console": {pos: []string{"a"}},
	"stats": {flags: []flagSample{{name: "lab", value: "demo"}, {name: "vmlinux", value: "vm"},
		{name: "headers", value: "h"}, {name: "json"}, {name: "folded"}, {name: "aspect", value: "a"}, {name: "interval", value: "2s"}}},
	"cover": {pos: []string{"do_mkdirat", "mkdir"}, flags: []flagSample{{name: "lab", value: "demo"}, {name: "vmlinux", value: "vm"},
		{name: "headers", value: "h"}, {name: "json"}, {name: "module", value: "m.ko"}, {name: "for", value: "1s"},
		{name: "source", value: "src"}}},
}

// allCommands lists every command as typed: "lines", "lab up".
func allCommands() []string {
	var names []string
	for n := range commands {
		if n == "lab" {
			for sub := range labSubcommands {
				names = append(names, "lab "+sub)
			}
			continue
		}
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// flagArgs writes the flags in one of the accepted forms.
func flagArgs(flags []flagSample, form string) [][]string {
	var out [][]string
	for _, f := range flags {
		switch {
		case form == "eq" && f.value == "":
			out = append(out, []string{"--" + f.name + "=true"})
		case form == "eq":
			out = append(out, []string{"--" + f.name + "=" + f.value})
		case f.value == "":
			out = append(out, []string{form + f.name})
		default:
			out = append(out, []string{form + f.name, f.value})
		}
	}
	return out
}

type parsedArgs struct {
	flags map[string]string
	pos   []string
}

var errParsed = errors.New("parsed")

// parseAs runs klasy with args up to the end of the command's parsing.
func parseAs(t *testing.T, args []string) (parsedArgs, string, error) {
	t.Helper()
	var got *parsedArgs
	testHookParsed = func(cmd string, fs *flag.FlagSet, pos []string) error {
		p := parsedArgs{flags: map[string]string{}, pos: slices.Clone(pos)}
		fs.Visit(func(f *flag.Flag) { p.flags[f.Name] = f.Value.String() })
		got = &p
		return errParsed
	}
	defer func() { testHookParsed = nil }()
	var out bytes.Buffer
	err := run(&stdio{In: strings.NewReader(""), Out: &out, Err: &bytes.Buffer{}}, args)
	if got == nil {
		return parsedArgs{}, out.String(), err
	}
	return *got, out.String(), err
}

// TestFlagConvention runs every command with its flags before, between
// and after its positional arguments, in each form, with "--" ending the
// flags and with -h/--help anywhere before "--", and checks each command
// parses them all alike.
func TestFlagConvention(t *testing.T) {
	for _, name := range allCommands() {
		t.Run(name, func(t *testing.T) {
			sample, ok := cmdSamples[name]
			if !ok {
				t.Fatalf("no entry in cmdSamples for %q: add one with all its flags", name)
			}
			cmd := strings.Fields(name)
			want := parsedArgs{flags: map[string]string{}, pos: sample.pos}
			for _, f := range sample.flags {
				v := f.value
				if v == "" {
					v = "true"
				}
				if f.want != "" {
					v = f.want
				}
				want.flags[f.name] = v
			}
			type variant struct {
				name    string
				args    []string
				wantPos []string
			}
			var vs []variant
			for _, form := range []string{"--", "-", "eq"} {
				fl := flagArgs(sample.flags, form)
				all := slices.Concat(fl...)
				vs = append(vs,
					variant{form + "/before", slices.Concat(all, sample.pos), sample.pos},
					variant{form + "/after", slices.Concat(sample.pos, all), sample.pos},
					variant{form + "/between", slices.Concat(sample.pos[:min(1, len(sample.pos))], all, sample.pos[min(1, len(sample.pos)):]), sample.pos},
					// "--" ends the flags: what follows is positional,
					// a --help and a flag of the command included.
					variant{form + "/before--", slices.Concat(all, []string{"--"}, sample.pos, []string{"--help", "--json"}),
						slices.Concat(sample.pos, []string{"--help", "--json"})},
					variant{form + "/between--", slices.Concat(sample.pos[:min(1, len(sample.pos))], all, []string{"--"}, sample.pos[min(1, len(sample.pos)):], []string{"-h"}),
						slices.Concat(sample.pos, []string{"-h"})},
				)
				// One flag in each gap between the positional arguments.
				var spread []string
				for i := 0; i <= len(sample.pos) || i < len(fl); i++ {
					if i < len(fl) {
						spread = append(spread, fl[i]...)
					}
					if i < len(sample.pos) {
						spread = append(spread, sample.pos[i])
					}
				}
				vs = append(vs, variant{form + "/spread", spread, sample.pos})
			}
			for _, v := range vs {
				got, _, err := parseAs(t, slices.Concat(cmd, v.args))
				if !errors.Is(err, errParsed) {
					t.Errorf("klasy %s %s: %v, want it parsed", name, strings.Join(v.args, " "), err)
					continue
				}
				if fmt.Sprint(got.flags) != fmt.Sprint(want.flags) || !slices.Equal(got.pos, v.wantPos) {
					t.Errorf("%s: klasy %s %s parsed flags %v and arguments %q, want %v and %q",
						v.name, name, strings.Join(v.args, " "), got.flags, got.pos, want.flags, v.wantPos)
				}
			}

			// Every flag the command declares is in its sample.
			var declared []string
			testHookParsed = func(_ string, fs *flag.FlagSet, _ []string) error {
				fs.VisitAll(func(f *flag.Flag) { declared = append(declared, f.Name) })
				return errParsed
			}
			run(&stdio{In: strings.NewReader(""), Out: &bytes.Buffer{}, Err: &bytes.Buffer{}}, slices.Concat(cmd, sample.pos))
			testHookParsed = nil
			for _, d := range declared {
				if _, ok := want.flags[d]; !ok {
					t.Errorf("klasy %s declares --%s, which its cmdSamples entry lacks", name, d)
				}
			}

			// -h and --help anywhere before "--" print the help and
			// run nothing.
			args := slices.Concat(slices.Concat(flagArgs(sample.flags, "--")...), sample.pos)
			for i := 0; i <= len(args); i++ {
				for _, h := range []string{"-h", "--help"} {
					a := slices.Concat(cmd, args[:i], []string{h}, args[i:], []string{"--", "x"})
					got, out, err := parseAs(t, a)
					if err != nil || got.flags != nil || !strings.Contains(out, "usage: klasy "+cmd[0]) {
						t.Errorf("klasy %s: %v, parsed %v, printed %.40q; want the help", strings.Join(a, " "), err, got.flags, out)
					}
				}
			}
		})
	}
}

// The invocations issue 8 names, and what they parse to.
func TestFlagConventionExamples(t *testing.T) {
	tests := []struct {
		args    []string
		flags   string
		wantPos []string
	}{
		{[]string{"check", "--json=true", "x"}, "map[json:true]", []string{"x"}},
		{[]string{"check", "x", "--json"}, "map[json:true]", []string{"x"}},
		{[]string{"lab", "exec", "a", "--timeout", "5s", "--", "true"}, "map[timeout:5s]", []string{"a", "true"}},
		{[]string{"lab", "exec", "a", "--", "sh", "-c", "exit 3"}, "map[]", []string{"a", "sh", "-c", "exit 3"}},
		{[]string{"lab", "exec", "--stdin", "a", "cat"}, "map[stdin:true]", []string{"a", "cat"}},
		{[]string{"lab", "up", "a", "--cpus=2"}, "map[cpus:2]", []string{"a"}},
		{[]string{"lines", "vmlinux", "f", "--json", "--vmlinux=vm"}, "map[json:true vmlinux:vm]", []string{"vmlinux", "f"}},
		{[]string{"lines", "--", "vmlinux", "--json"}, "map[]", []string{"vmlinux", "--json"}},
		{[]string{"translate", "-"}, "map[]", []string{"-"}},
	}
	for _, tt := range tests {
		got, _, err := parseAs(t, tt.args)
		if !errors.Is(err, errParsed) || fmt.Sprint(got.flags) != tt.flags || !slices.Equal(got.pos, tt.wantPos) {
			t.Errorf("klasy %s: parsed %v %q (%v), want %s %q", strings.Join(tt.args, " "), got.flags, got.pos, err, tt.flags, tt.wantPos)
		}
	}
}

// Parse errors are usage errors that point at the command's help.
func TestFlagErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"check", "--frob", "x"}, "check: flag provided but not defined: -frob (run 'klasy help check' for usage)"},
		{[]string{"translate", "--json", "x"}, "translate: flag provided but not defined: -json"},
		{[]string{"lines", "img", "f", "--vmlinux"}, "lines: flag needs an argument: -vmlinux"},
		{[]string{"lab", "up", "--cpus", "two"}, `lab: invalid value "two" for flag -cpus`},
		{[]string{"lab", "exec", "a", "ls", "-l"}, "flag provided but not defined: -l (the command and its flags go after --"},
		{[]string{"lab", "status", "--json=maybe"}, `invalid boolean value "maybe" for -json`},
	}
	for _, tt := range tests {
		_, _, err := parseAs(t, tt.args)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("klasy %s: %v, want %q", strings.Join(tt.args, " "), err, tt.want)
		}
	}
}
