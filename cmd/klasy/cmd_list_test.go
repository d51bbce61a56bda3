package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/klasy/klasy/internal/testenv"
	"github.com/klasy/klasy/lab"
)

// TestListShowsMergedAccesses: __skb_clone's n->cloned = 1, n->nohdr = 0
// and n->peeked = 0 (net/core/skbuff.c:1189-1191) are bitfields the
// compiler stores with one instruction, so one hook stands for the three
// accesses the plugin recorded; klasy list --json names all three, where
// it printed only the first.
func TestListShowsMergedAccesses(t *testing.T) {
	k, err := lab.FindKernel(lab.Built)
	testenv.Need(t, "lab-kernel", err)
	asp := filepath.Join(t.TempDir(), "clone.klasy")
	src := "<aspect><advice><pointcut>access(sk_buff.%) AND within_function(__skb_clone)</pointcut><before>STORE_DATA(1);</before></advice></aspect>\n"
	if err := os.WriteFile(asp, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, err := runKlasy(t, "list", "--json", "--vmlinux", k.Vmlinux, asp)
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	var merged []string
	for _, jp := range jsonLines(t, out) {
		if acc, _ := jp["access"].(string); strings.HasPrefix(acc, "sk_buff.cloned write") {
			ms, _ := jp["merged"].([]any)
			for _, m := range ms {
				merged = append(merged, m.(string))
			}
		}
	}
	for _, want := range []string{"sk_buff.nohdr write", "sk_buff.peeked write"} {
		if !slices.ContainsFunc(merged, func(m string) bool { return strings.HasPrefix(m, want) }) {
			t.Errorf("the hook on n->cloned's store stands for %q, want %s too", merged, want)
		}
	}
}

// TestListSyscallNames: klasy list takes a syscall by the name every
// tracer gives it, __x64_sys_getppid, an ELF alias of __do_sys_getppid
// that the DWARF does not know, and says which function that is; a
// misspelt name gets the nearest names.
func TestListSyscallNames(t *testing.T) {
	vmlinux := testenv.DebianVmlinux(t)
	testenv.Need(t, "debian-kernel", nil)
	dir := t.TempDir()
	aspect := func(pc string) string {
		p := filepath.Join(dir, "a.klasy")
		src := "<aspect><advice><pointcut>" + pc + "</pointcut><before>STORE_DATA(1);</before></advice></aspect>\n"
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	out, errOut, err := runKlasy(t, "list", "--vmlinux", vmlinux, aspect("execution(__x64_sys_getppid)"))
	if err != nil || !strings.Contains(out, "__do_sys_getppid") ||
		!strings.Contains(errOut, "klasy: warning: ") || !strings.Contains(errOut, "execution(__x64_sys_getppid): __x64_sys_getppid is __do_sys_getppid") {
		t.Errorf("list execution(__x64_sys_getppid): %v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
	_, errOut, err = runKlasy(t, "list", "--vmlinux", vmlinux, aspect("execution(vfs_raed)"))
	if want := "execution(vfs_raed): no function is called vfs_raed in " + vmlinux + "; did you mean vfs_read?"; err == nil || !strings.Contains(errOut, want) {
		t.Errorf("list execution(vfs_raed): %v, stderr %q, want %q", err, errOut, want)
	}
}

// TestListTracepoints: klasy list resolves tracepoint(SUBSYS:NAME) by
// the subsystem tracefs gives it (TRACE_SYSTEM, raw_syscalls for
// sys_enter, declared in syscalls.h), and a wrong name or subsystem gets
// the right one.
func TestListTracepoints(t *testing.T) {
	vmlinux := testenv.DebianVmlinux(t)
	testenv.Need(t, "debian-kernel", nil)
	dir := t.TempDir()
	aspect := func(pc, body string) string {
		p := filepath.Join(dir, "a.klasy")
		src := "<aspect><advice><pointcut>" + pc + "</pointcut><before>" + body + "</before></advice></aspect>\n"
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	out, errOut, err := runKlasy(t, "list", "--vmlinux", vmlinux, aspect("tracepoint(raw_syscalls:sys_enter)", "STORE_DATA(id);"))
	if err != nil || !strings.Contains(out, "raw_syscalls:sys_enter") || !strings.Contains(out, "include/trace/events/syscalls.h") || !strings.Contains(out, "tracepoint") {
		t.Errorf("list tracepoint(raw_syscalls:sys_enter): %v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
	for _, c := range []struct{ pc, want string }{
		{"tracepoint(syscalls:sys_enter)", "sys_enter is in subsystem raw_syscalls: write tracepoint(raw_syscalls:sys_enter)"},
		{"tracepoint(sched:sched_swich)", "tracepoint(sched:sched_swich): the kernel has no such tracepoint; did you mean sched:sched_switch"},
	} {
		_, errOut, err := runKlasy(t, "list", "--vmlinux", vmlinux, aspect(c.pc, "STORE_DATA(1);"))
		if err == nil || !strings.Contains(errOut, c.want) {
			t.Errorf("list %s: %v, stderr %q, want %q", c.pc, err, errOut, c.want)
		}
	}
}

// TestTracepointsCommand: klasy tracepoints lists the events a pattern
// matches with the arguments their advice gets, and says when none does.
func TestTracepointsCommand(t *testing.T) {
	vmlinux := testenv.DebianVmlinux(t)
	testenv.Need(t, "debian-kernel", nil)
	out, errOut, err := runKlasy(t, "tracepoints", vmlinux, "sched:sched_sw*")
	want := "sched:sched_switch(bool preempt, struct task_struct *prev, struct task_struct *next, unsigned int prev_state)"
	if err != nil || !strings.Contains(out, want) || !strings.Contains(out, "include/trace/events/sched.h:") || strings.Contains(out, "sched_wak") {
		t.Errorf("tracepoints sched:sched_sw*: %v\nstdout:\n%s\nstderr:\n%s\nwant %s", err, out, errOut, want)
	}
	out, _, err = runKlasy(t, "tracepoints", "--json", vmlinux, "%:sys_enter")
	if err != nil || !strings.Contains(out, `"name":"raw_syscalls:sys_enter"`) || !strings.Contains(out, `"header":"trace/events/syscalls.h"`) {
		t.Errorf("tracepoints --json %%:sys_enter: %v\n%s", err, out)
	}
	_, _, err = runKlasy(t, "tracepoints", vmlinux, "nosuch:%")
	if err == nil || !strings.Contains(err.Error(), `no tracepoint matches "nosuch:%"`) {
		t.Errorf("tracepoints nosuch:%%: %v, want no tracepoint matches", err)
	}
}
