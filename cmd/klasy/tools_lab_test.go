package main

// The classic tracing tools of examples/tools/, woven into Debian's own
// kernel through the commands a user types, each checked against what
// the test's own program did.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/klasy/klasy/lab"
	"github.com/klasy/klasy/lab/labboot"
)

func TestToolsInDebianLab(t *testing.T) {
	if testing.Short() {
		t.Skip("boots a lab")
	}
	const prog = "/tmp/klasy_prog"
	l := labboot.Boot(t, lab.Config{Name: labboot.Name("tools"), Kernel: lab.Debian})
	labboot.Install(t, l, prog, labboot.StaticProgram(t, "../../weaver/testdata/prog/klasy_prog.c"))
	klasy := func(args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		if err := run(&stdio{In: strings.NewReader(""), Out: &out, Err: &errb}, args); err != nil {
			t.Fatalf("klasy %s: %v\n%s", strings.Join(args, " "), err, errb.String())
		}
		return out.String()
	}
	guest := func(args ...string) string {
		t.Helper()
		return klasy(append([]string{"lab", "exec", l.Name(), "--"}, args...)...)
	}
	before := guest("sh", "-c", labboot.KernelState)

	t.Run("execsnoop", func(t *testing.T) {
		out := klasy("weave", "--lab", l.Name(), "-v", "../../examples/tools/execsnoop.klasy")
		t.Log(out)
		if !strings.Contains(out, "1 join point (ftrace-ops 0, ftrace 0, jump 0, int3 0, kretprobe 0, tracepoint 1)") {
			t.Errorf("weave's report does not count the tracepoint:\n%s", out)
		}
		// Each run is an execve the agent makes: klasy_prog's pid, the
		// same before the exec, and its argument count.
		runs := [][]string{{"getppid", "1"}, {"cat", "/proc/self/stat"}, {"sleep", "1", "1"}}
		var pids []int
		for _, args := range runs {
			out := guest(append([]string{prog}, args...)...)
			pid, err := strconv.Atoi(strings.TrimPrefix(strings.SplitN(out, "\n", 2)[0], "pid "))
			if err != nil {
				t.Fatalf("klasy_prog printed %q", out)
			}
			pids = append(pids, pid)
		}
		out = klasy("trace", "--lab", l.Name(), "--json")
		klasy("unweave", "--lab", l.Name(), "execsnoop")
		got := map[int][]int64{}
		for _, r := range decodeTrace(t, out) {
			if r.Comm == "klasy_prog" {
				got[r.PID] = r.Values
			}
		}
		for i, pid := range pids {
			want := []int64{int64(pid), int64(pid), int64(len(runs[i]) + 1)}
			if v := got[pid]; len(v) != 3 || v[0] != want[0] || v[1] != want[1] || v[2] != want[2] {
				t.Errorf("exec of klasy_prog pid %d: record %v, want %v (pid, old pid, argc)", pid, v, want)
			}
		}
		if len(got) != len(pids) {
			t.Errorf("execs of klasy_prog traced: %v, the test ran %v", got, pids)
		}
	})
	t.Run("opensnoop", func(t *testing.T) {
		klasy("weave", "--lab", l.Name(), "../../examples/tools/opensnoop.klasy")
		defer klasy("unweave", "--lab", l.Name(), "opensnoop")
		// Paths that do not exist (open-missing opens each n times and
		// checks ENOENT), one longer than the 64 bytes a string keeps.
		short := "/tmp/klasy_opensnoop_a"
		long := "/tmp/" + strings.Repeat("klasy_long_name_", 6)
		guest(prog, "open-missing", short, "2")
		text := klasy("trace", "--lab", l.Name())
		guest(prog, "open-missing", long, "1")
		guest(prog, "open-missing", short, "1")
		js := klasy("trace", "--lab", l.Name(), "--json")

		// trace: the command and the path, quoted.
		if n := strings.Count(text, `"klasy_prog" "`+short+`"`); n != 2 {
			t.Errorf("trace shows %d opens of %s by klasy_prog, the program made 2:\n%s", n, short, text)
		}
		// --json: strings as JSON strings; the long path cut at 64
		// bytes and numbered in truncated.
		var got []string
		sc := bufio.NewScanner(strings.NewReader(js))
		for sc.Scan() {
			var r struct {
				Comm      string `json:"comm"`
				Values    []any  `json:"values"`
				Truncated []int  `json:"truncated"`
			}
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				t.Fatalf("%v: %s", err, sc.Text())
			}
			if r.Comm == "klasy_prog" {
				got = append(got, fmt.Sprintf("%q %v", r.Values, r.Truncated))
			}
		}
		want := []string{
			fmt.Sprintf("%q %v", []any{"klasy_prog", long[:64]}, []int{2}),
			fmt.Sprintf("%q %v", []any{"klasy_prog", short}, []int(nil)),
		}
		if !slices.Equal(got, want) {
			t.Errorf("trace --json of klasy_prog's opens:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})
	if now := guest("sh", "-c", labboot.KernelState); now != before {
		t.Errorf("modules and kprobes after unweave:\n%s\nbefore:\n%s", now, before)
	}
}
