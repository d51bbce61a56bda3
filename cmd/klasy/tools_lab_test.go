package main

// The classic tracing tools of examples/tools/, woven into Debian's own
// kernel through the commands a user types, each checked against what
// the test's own program did.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
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
	l := labboot.Boot(t, lab.Config{Name: labboot.Name("tools"), Kernel: lab.Debian, CPUs: 2})
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
	t.Run("opensnoop", func(t *testing.T) {
		klasy("weave", "--lab", l.Name(), "../../examples/tools/opensnoop.klasy")
		defer klasy("unweave", "--lab", l.Name(), "opensnoop")
		// Paths that do not exist (open-missing opens each n times and
		// checks ENOENT), one longer than the 64 bytes a string keeps,
		// and a file that does (pread opens it and prints its fd).
		short := "/tmp/klasy_opensnoop_a"
		long := "/tmp/" + strings.Repeat("klasy_long_name_", 6)
		guest(prog, "open-missing", short, "2")
		text := klasy("trace", "--lab", l.Name())
		guest(prog, "open-missing", long, "1")
		out := guest(prog, "pread", "/proc/self/stat", "7", "0", "1")
		var fd int
		if i := strings.Index(out, "fd "); i < 0 {
			t.Fatalf("klasy_prog pread printed %q", out)
		} else if fd, _ = strconv.Atoi(strings.TrimSpace(out[i+3:])); fd <= 0 {
			t.Fatalf("klasy_prog pread printed %q", out)
		}
		guest(prog, "open-missing", short, "1")
		js := klasy("trace", "--lab", l.Name(), "--json")

		for _, line := range strings.Split(text, "\n") {
			if strings.Contains(line, " klasy_prog opensnoop#1 ") {
				t.Log(line)
			}
		}
		// trace: the command and the path, quoted, and -ENOENT.
		if n := strings.Count(text, `"klasy_prog" "`+short+`" -2`); n != 2 {
			t.Errorf("trace shows %d failed opens (-2, ENOENT) of %s by klasy_prog, the program made 2:\n%s", n, short, text)
		}
		// --json: strings as JSON strings, the result a number; the long
		// path cut at 64 bytes and numbered in truncated.
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
				got = append(got, fmt.Sprintf("%v %v", r.Values, r.Truncated))
			}
		}
		want := []string{
			fmt.Sprintf("%v %v", []any{"klasy_prog", long[:64], -2}, []int{2}),
			fmt.Sprintf("%v %v", []any{"klasy_prog", "/proc/self/stat", fd}, []int(nil)),
			fmt.Sprintf("%v %v", []any{"klasy_prog", short, -2}, []int(nil)),
		}
		if !slices.Equal(got, want) {
			t.Errorf("trace --json of klasy_prog's opens (command, path, fd or -errno):\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})
	// STORE_STR and STORE_USTR of what they cannot read never fault: a
	// NULL, a non-canonical address, a user address as a kernel string
	// and a kernel one as a user string each record "unreadable".
	t.Run("unreadable strings", func(t *testing.T) {
		src := filepath.Join(t.TempDir(), "badstr.klasy")
		if err := os.WriteFile(src, []byte(`<aspect><advice>
  <pointcut>execution(do_sys_openat2) AND argument(filename, fp)</pointcut>
  <before>
    STORE_STR(NULL);
    STORE_STR(0xdead000000000000UL);
    STORE_STR(*(const char **)fp);
    STORE_USTR(current->comm);
    STORE_DATA(7);
  </before>
</advice></aspect>
`), 0o644); err != nil {
			t.Fatal(err)
		}
		klasy("weave", "--lab", l.Name(), src)
		defer klasy("unweave", "--lab", l.Name(), "badstr")
		guest(prog, "open-missing", "/tmp/klasy_badstr", "1")
		text := klasy("trace", "--lab", l.Name())
		var got []string
		for _, line := range strings.Split(text, "\n") {
			if strings.Contains(line, " klasy_prog badstr#1 ") {
				got = append(got, line[strings.Index(line, "0x"):])
			}
		}
		if len(got) != 1 || !strings.HasSuffix(got[0], " (unreadable) (unreadable) (unreadable) (unreadable) 7") {
			t.Errorf("klasy_prog's open recorded %q, want four (unreadable) strings, then 7:\n%s", got, text)
		}
	})
	t.Run("readsize_by_comm", func(t *testing.T) {
		klasy("weave", "--lab", l.Name(), "../../examples/tools/readsize_by_comm.klasy")
		defer klasy("unweave", "--lab", l.Name(), "readsize_by_comm")
		// dd reads 37 times 1000 bytes, busybox (dd by another name) 11
		// times 100 bytes: two commands, each its histogram.
		ddPID := strings.TrimSpace(guest("sh", "-c", "dd if=/dev/zero of=/dev/null bs=1000 count=37 2>/dev/null & echo $!; wait"))
		bbPID := strings.TrimSpace(guest("sh", "-c", "busybox dd if=/dev/zero of=/dev/null bs=100 count=11 2>/dev/null & echo $!; wait"))
		js := klasy("stats", "--lab", l.Name(), "--aspect", "readsize_by_comm", "--json")
		text := klasy("stats", "--lab", l.Name(), "--aspect", "readsize_by_comm")
		t.Log(text)
		maps := map[string]statsview.MapJSON{}
		for _, line := range strings.Split(strings.TrimSpace(js), "\n") {
			var m statsview.MapJSON
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				t.Fatalf("%v: %s", err, line)
			}
			maps[m.Map] = m
		}
		key := func(k statsview.TupleKeyJSON) string {
			var parts []string
			for _, v := range k.Key {
				parts = append(parts, v.String())
			}
			return strings.Join(parts, " ")
		}
		hists := map[string]string{}
		for _, k := range maps["read_size"].By {
			var bs []string
			for _, b := range k.Buckets {
				if b.Count > 0 && b.Min != nil {
					bs = append(bs, fmt.Sprintf("[%d]=%d", *b.Min, b.Count))
				}
			}
			hists[key(k)] = strings.Join(bs, " ")
		}
		if got := hists[`"dd"`]; got != "[512]=37" {
			t.Errorf("@read_size[dd]: %q, want dd's 37 reads of 1000 bytes; all: %v", got, hists)
		}
		if got := hists[`"busybox"`]; got != "[64]=11" {
			t.Errorf("@read_size[busybox]: %q, want its 11 reads of 100 bytes; all: %v", got, hists)
		}
		counts := map[string]int64{}
		for _, k := range maps["reads"].By {
			if k.Value != nil {
				counts[key(k)] = *k.Value
			}
		}
		for k, want := range map[string]int64{`"dd" ` + ddPID: 37, `"busybox" ` + bbPID: 11} {
			if counts[k] != want {
				t.Errorf("@reads[%s]: %d, want %d; all: %v", k, counts[k], want, counts)
			}
		}
		// The keyed timer: each read of dd and busybox a start-stop
		// pair under its command, on-CPU within wall time.
		pairs := map[string]string{}
		for _, k := range maps["read_time"].By {
			if k.Wall == nil || k.CPU == nil || k.Wall.TotalNS == 0 || k.CPU.TotalNS > k.Wall.TotalNS {
				t.Errorf("@read_time[%s]: times %+v %+v", key(k), k.Wall, k.CPU)
			}
			pairs[key(k)] = fmt.Sprint(k.Count)
		}
		if pairs[`"dd"`] != "37" || pairs[`"busybox"`] != "11" {
			t.Errorf("@read_time: start-stop pairs %v, want dd's 37 and busybox's 11", pairs)
		}
		for _, want := range []string{"@read_time[dd]: 37 start-stop pairs\n", "@reads[dd, " + ddPID + "]: 37\n", "@reads[busybox, " + bbPID + "]: 11\n", "@read_size[dd]: 37 values\n"} {
			if !strings.Contains(text, want) {
				t.Errorf("klasy stats does not print %q as bpftrace would:\n%s", want, text)
			}
		}
	})
	t.Run("kstack", func(t *testing.T) {
		// COUNT_STACK where openat(2) leads (kstack.klasy), and beside
		// it STORE_STACK there, both for klasy_prog only: the program's
		// opens come through one syscall path, one stack counted as
		// often as it opened, the same frames in trace.
		rec := filepath.Join(t.TempDir(), "kstack_rec.klasy")
		// Its second advice, on a tracepoint, has no probed registers:
		// the stack is unwound from the advice, klasy's frames dropped.
		// Its first advice also counts by command and stack, as
		// bpftrace's @[comm, kstack] = count().
		if err := os.WriteFile(rec, []byte("<aspect><advice><pointcut>execution(do_sys_openat2)</pointcut>"+
			"<before>STORE_STACK(); COUNT_BY(by_comm, KEY_STR(current->comm), KEY_KSTACK());</before></advice>\n<advice><pointcut>tracepoint(sched:sched_process_exec)</pointcut>"+
			"<before>STORE_STACK();</before></advice></aspect>\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		klasy("weave", "--lab", l.Name(), "--comm", "klasy_prog", "-D", "FUNC=do_sys_openat2", "../../examples/tools/kstack.klasy")
		defer klasy("unweave", "--lab", l.Name(), "kstack")
		klasy("weave", "--lab", l.Name(), "--comm", "klasy_prog", rec)
		defer klasy("unweave", "--lab", l.Name(), "kstack_rec")
		const opens = 7
		guest(prog, "open-missing", "/tmp/klasy_kstack_missing", strconv.Itoa(opens))
		stats := klasy("stats", "--lab", l.Name(), "--aspect", "kstack")
		folded := klasy("stats", "--lab", l.Name(), "--aspect", "kstack", "--folded")
		trace := klasy("trace", "--lab", l.Name(), "--aspect", "kstack_rec")
		byComm := klasy("stats", "--lab", l.Name(), "--aspect", "kstack_rec")
		byFolded := klasy("stats", "--lab", l.Name(), "--aspect", "kstack_rec", "--folded")
		t.Logf("stats:\n%s\nfolded:\n%s\ntrace:\n%s\nby comm:\n%s\n%s", stats, folded, trace, byComm, byFolded)

		// stats: one stack, as bpftrace prints @[kstack]: the frames
		// from the function up to the syscall entry, then the count.
		var frames []string
		blocks := strings.Split(stats, "@stacks[\n")[1:]
		if len(blocks) != 1 {
			t.Fatalf("stats show %d stacks, klasy_prog opened through one path", len(blocks))
		}
		block, count, _ := strings.Cut(blocks[0], "]: ")
		if strings.TrimSpace(count) != strconv.Itoa(opens) {
			t.Errorf("the stack is counted %q times, klasy_prog opened %d times", strings.TrimSpace(count), opens)
		}
		for _, f := range strings.Split(strings.TrimSuffix(block, "\n"), "\n") {
			frames = append(frames, strings.TrimPrefix(f, "    "))
		}
		var funcs []string
		for _, f := range frames {
			funcs = append(funcs, strings.SplitN(strings.SplitN(f, "+", 2)[0], " ", 2)[0])
		}
		path := []string{"do_sys_openat2", "__x64_sys_openat", "do_syscall_64", "entry_SYSCALL_64_after_hwframe"}
		at := -1
		for _, p := range path {
			i := slices.Index(funcs, p)
			if i <= at {
				t.Fatalf("stack frames %q: want %q in this order, innermost first", funcs, path)
			}
			at = i
		}
		if funcs[0] != path[0] || funcs[len(funcs)-1] != path[len(path)-1] {
			t.Errorf("stack %q: want it from %s (no klasy frame above it) to %s", funcs, path[0], path[len(path)-1])
		}
		if !strings.Contains(frames[0], "fs/open.c:") {
			t.Errorf("frame %q: want do_sys_openat2's file:line", frames[0])
		}
		// --folded: root first, the same functions, then the count.
		rev := slices.Clone(funcs)
		slices.Reverse(rev)
		if want := strings.Join(rev, ";") + " " + strconv.Itoa(opens) + "\n"; folded != want {
			t.Errorf("stats --folded:\n%s\nwant\n%s", folded, want)
		}
		// The command and the stack as one key: the same frames, the
		// same count, and folded with the command as the root.
		if want := "@by_comm[klasy_prog, \n    " + strings.Join(frames, "\n    ") + "\n]: " + strconv.Itoa(opens) + "\n"; !strings.Contains(byComm, want) {
			t.Errorf("stats of kstack_rec:\n%s\nwant it to hold\n%s", byComm, want)
		}
		if want := "klasy_prog;" + folded; byFolded != want {
			t.Errorf("stats --folded of kstack_rec:\n%s\nwant\n%s", byFolded, want)
		}
		// trace: each open's record, its stack under it, as stats has it.
		var recs int
		lines := strings.Split(strings.TrimSuffix(trace, "\n"), "\n")
		for i := 0; i < len(lines); i++ {
			if !strings.Contains(lines[i], " klasy_prog kstack_rec#1 ") {
				continue
			}
			recs++
			var got []string
			for i+1 < len(lines) && strings.HasPrefix(lines[i+1], "\t") {
				i++
				got = append(got, strings.TrimPrefix(lines[i], "\t"))
			}
			if !slices.Equal(got, frames) {
				t.Errorf("trace's stack under %q:\n%s\nwant the stats' frames:\n%s", lines[i-len(got)], strings.Join(got, "\n"), strings.Join(frames, "\n"))
			}
		}
		if recs != opens {
			t.Errorf("trace has %d records of klasy_prog's opens, it opened %d times", recs, opens)
		}
		// The exec of klasy_prog: from the function that raised the
		// event (no __traceiter_, no klasy frame) to the syscall entry.
		execs := 0
		for i, line := range lines {
			if !strings.Contains(line, " klasy_prog kstack_rec#2 ") {
				continue
			}
			execs++
			var fs []string
			for _, f := range lines[i+1:] {
				if !strings.HasPrefix(f, "\t") {
					break
				}
				fs = append(fs, strings.SplitN(strings.SplitN(strings.TrimPrefix(f, "\t"), "+", 2)[0], " ", 2)[0])
			}
			if len(fs) == 0 || strings.HasPrefix(fs[0], "__traceiter_") || strings.HasPrefix(fs[0], "0x") ||
				!slices.Contains(fs, "__x64_sys_execve") || fs[len(fs)-1] != "entry_SYSCALL_64_after_hwframe" {
				t.Errorf("the exec's stack %q: want it from the exec's code through __x64_sys_execve to entry_SYSCALL_64_after_hwframe", fs)
			}
		}
		if execs != 1 {
			t.Errorf("trace has %d records of klasy_prog's exec, the agent ran it once", execs)
		}
	})
	t.Run("vfsstat", func(t *testing.T) {
		klasy("weave", "--lab", l.Name(), "--comm", "klasy_prog", "../../examples/tools/vfsstat.klasy")
		defer klasy("unweave", "--lab", l.Name(), "vfsstat")
		// One open and five reads of /proc/self/stat, and the line
		// klasy_prog prints: a write.
		guest(prog, "pread", "/proc/self/stat", "7", "0", "5")
		js := klasy("stats", "--lab", l.Name(), "--aspect", "vfsstat", "--json")
		var m statsview.MapJSON
		if err := json.Unmarshal([]byte(js), &m); err != nil {
			t.Fatalf("%v: %s", err, js)
		}
		counts := map[string]uint64{}
		for _, k := range m.By {
			if len(k.Key) == 1 {
				counts[k.Key[0].String()] = k.Count
			}
		}
		if counts[`"vfs_open"`] != 1 || counts[`"vfs_read"`] != 5 || counts[`"vfs_write"`] < 1 || counts[`"vfs_fsync"`] != 0 {
			t.Errorf("@vfs of klasy_prog: %v, want vfs_open 1, vfs_read 5, vfs_write at least 1, no vfs_fsync", counts)
		}
	})
	t.Run("runqlat", func(t *testing.T) {
		klasy("weave", "--lab", l.Name(), "--include-self", "../../examples/tools/runqlat.klasy")
		defer klasy("unweave", "--lab", l.Name(), "runqlat")
		// 20 sleeps of 5 ms: each wakeup is followed by klasy_prog's turn
		// on a CPU, a wait on the run queue of well under a second.
		guest(prog, "sleep", "5", "20")
		js := klasy("stats", "--lab", l.Name(), "--aspect", "runqlat", "--json")
		t.Log(klasy("stats", "--lab", l.Name(), "--aspect", "runqlat"))
		// One object per map: the histogram, then the shared map of
		// wakeup times (pids woken and not run yet).
		var m statsview.MapJSON
		var q statsview.SharedMapJSON
		lines := strings.Split(strings.TrimSpace(js), "\n")
		if len(lines) != 2 || json.Unmarshal([]byte(lines[0]), &m) != nil || json.Unmarshal([]byte(lines[1]), &q) != nil {
			t.Fatalf("stats --json: want @usecs and the shared map @qtime, got %s", js)
		}
		if q.Map != "qtime" || q.Kind != "shared" || q.Overflow != 0 || len(q.Entries) > q.Size {
			t.Errorf("@qtime: %+v, want the shared map of wakeup times, nothing overflowed", q)
		}
		var waits, slow uint64
		for _, k := range m.By {
			if len(k.Key) != 1 || k.Key[0].String() != `"klasy_prog"` {
				continue
			}
			for _, b := range k.Buckets {
				waits += b.Count
				if b.Min != nil && *b.Min >= 1000000 {
					slow += b.Count
				}
			}
		}
		// Its first run after the fork is one more; a preemption may add
		// a few.
		if waits < 20 || waits > 26 || slow > 0 {
			t.Errorf("@usecs[klasy_prog]: %d waits (%d of a second or more), want 20 to 26 (its 20 wakeups), all under a second", waits, slow)
		}
	})
	if now := guest("sh", "-c", labboot.KernelState); now != before {
		t.Errorf("modules and kprobes after unweave:\n%s\nbefore:\n%s", now, before)
	}
}
