package health

import (
	"strings"
	"testing"
)

// A kernel log as 6.1 writes an oops in a kprobe handler, a warning
// and a soft lockup, after a line from before the weave.
const log = `[   10.000000] BUG: kernel NULL pointer dereference, address: 0000000000000008
[   10.000001] RIP: 0010:old_func+0x1/0x10
[   84.612345] BUG: kernel NULL pointer dereference, address: 0000000000000000
[   84.612350] #PF: supervisor read access in kernel mode
[   84.612360] Oops: 0000 [#1] PREEMPT SMP NOPTI
[   84.612370] CPU: 0 PID: 231 Comm: sync Tainted: G           OE      6.1.0-56-amd64 #1  Debian 6.1.192-2
[   84.612380] RIP: 0010:klasy_h0+0x39/0x5b [klasy_a_nullref]
[   90.000000] WARNING: CPU: 0 PID: 1 at kernel/kprobes.c:1234 __disarm_kprobe+0x10/0x20
[   90.000100] RIP: 0010:__disarm_kprobe+0x10/0x20
[  120.500000] watchdog: BUG: soft lockup - CPU#0 stuck for 22s! [sync:240]
`

func TestEvents(t *testing.T) {
	ev := Events([]byte(log), 50)
	if len(ev) != 3 {
		t.Fatalf("events after 50 s: %+v, want the oops, the warning and the lockup", ev)
	}
	if e := ev[0]; !strings.HasPrefix(e.What, "BUG: kernel NULL pointer") || e.Func != "klasy_h0" || e.Off != 0x39 || e.Module != "klasy_a_nullref" {
		t.Errorf("oops = %+v", e)
	}
	if e := ev[1]; !strings.HasPrefix(e.What, "WARNING: ") || e.Func != "__disarm_kprobe" || e.Module != "" {
		t.Errorf("warning = %+v", e)
	}
	if e := ev[2]; !strings.Contains(e.What, "soft lockup") || e.RIP != "" {
		t.Errorf("lockup = %+v", e)
	}
	if got := LastTime([]byte(log)); got != 120.5 {
		t.Errorf("LastTime = %v, want 120.5", got)
	}
}

func TestLetters(t *testing.T) {
	if got := Letters(1<<7 | 1<<9); got != "D (died: an oops or BUG), W (warned)" {
		t.Errorf("Letters(D|W) = %q", got)
	}
	if _, err := ParseTaint([]byte("x\n")); err == nil {
		t.Error("ParseTaint(x) succeeded")
	}
}
