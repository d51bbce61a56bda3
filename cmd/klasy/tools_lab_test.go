package main

// The classic tracing tools of examples/tools/, woven into Debian's own
// kernel through the commands a user types, each checked against what
// the test's own program did.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/klasy/klasy/cmd/klasy/internal/statsview"
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
	t.Run("syscount", func(t *testing.T) {
		klasy("weave", "--lab", l.Name(), "--comm", "klasy_prog", "../../examples/tools/syscount.klasy")
		guest(prog, "getppid", "50")
		guest(prog, "mkdir", "/tmp/klasy_syscount", "20")
		out := klasy("stats", "--lab", l.Name(), "--aspect", "syscount", "--json")
		klasy("unweave", "--lab", l.Name(), "syscount")
		var m statsview.MapJSON
		if err := json.Unmarshal([]byte(out), &m); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		counts := map[int64]uint64{}
		for _, k := range m.Keys {
			counts[k.Key] = k.Count
		}
		// x86-64's numbers: getppid 110, mkdir 83.
		if counts[110] != 50 || counts[83] != 20 {
			t.Errorf("@syscalls of klasy_prog: getppid %d, mkdir %d; want 50 and 20 (all: %v)", counts[110], counts[83], counts)
		}
	})

	t.Run("killsnoop", func(t *testing.T) {
		klasy("weave", "--lab", l.Name(), "../../examples/tools/killsnoop.klasy")
		// A sleeper killed with SIGTERM, then a signal 0 to a pid that
		// does not exist: two kill(2) calls of two busybox processes.
		out := guest("sh", "-c", "sleep 30 & p=$!; busybox kill -TERM $p; busybox kill -0 99999; echo $p")
		sleeper, err := strconv.Atoi(strings.TrimSpace(out))
		if err != nil {
			t.Fatalf("the guest printed %q", out)
		}
		out = klasy("trace", "--lab", l.Name(), "--json")
		klasy("unweave", "--lab", l.Name(), "killsnoop")
		byPID := map[int][][]int64{}
		for _, r := range decodeTrace(t, out) {
			if r.Comm == "busybox" {
				byPID[r.PID] = append(byPID[r.PID], r.Values)
			}
		}
		var got []string
		for _, rs := range byPID {
			got = append(got, fmt.Sprint(rs))
		}
		slices.Sort(got)
		want := []string{fmt.Sprintf("[[%d 15] [0]]", sleeper), "[[99999 0] [-3]]"}
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("kill(2) calls of busybox, [tpid sig] then [result] by caller: %v, want %v", got, want)
		}
	})
	if now := guest("sh", "-c", labboot.KernelState); now != before {
		t.Errorf("modules and kprobes after unweave:\n%s\nbefore:\n%s", now, before)
	}
}
