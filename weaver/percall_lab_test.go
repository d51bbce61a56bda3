package weaver_test

import (
	"fmt"
	"strings"
	"time"

	"github.com/klasy/klasy/weaver/records"
)

// percallSteps: issue 23 #3 in the lab. vfs_read's before advice keeps
// the count it was called with and its entry time with CALL_SET, its
// after advice reads them back; seq_read_iter, called inside vfs_read
// for a /proc file, keeps its own count and sees no entry time, and its
// value does not leak into vfs_read's.
func percallSteps(g *guest, step func(string, func(*guest))) {
	step("percall/before and after advice of one call share its variables", func(g *guest) {
		const n = 5
		g.weave("percall")
		pid, out := g.prog("pread", "/proc/self/stat", "7", "0", "5")
		if !strings.Contains(out, "fd ") {
			g.t.Fatalf("klasy_prog pread printed %q", out)
		}
		rs := g.recordsOf(pid)
		var outer, inner int
		var lastInner uint64
		prev := uint64(0)
		var lats []int64
		for _, r := range rs {
			switch r.Advice {
			case 3: // seq_read_iter's return, inside vfs_read
				inner++
				lastInner = r.TimeNS
				if len(r.Values) != 2 || r.Ints()[0] != 99 || r.Ints()[1] != 0 {
					g.t.Errorf("seq_read_iter's return read %v, want [99 0]: its own count, no entry time (that was vfs_read's)", r.Values)
				}
			case 4: // vfs_read's return
				outer++
				if len(r.Values) != 4 {
					g.t.Fatalf("vfs_read's return stored %v, want 4 values", r.Values)
				}
				if r.Ints()[0] != 7 || r.Ints()[1] != 7 || r.Ints()[2] != 7 {
					g.t.Errorf("vfs_read's return read count %d (CALL_GET), %d (argument at entry), returned %d; want 7, 7, 7 (pread's count)", r.Ints()[0], r.Ints()[1], r.Ints()[2])
				}
				// The entry time, this record's time less the latency, is
				// after the last call's return and before the nested
				// seq_read_iter returned.
				lat := uint64(r.Ints()[3])
				entry := r.TimeNS - lat
				if r.Ints()[3] <= 0 || entry < prev || entry > lastInner {
					g.t.Errorf("vfs_read latency %d ns: entry at %d, want after the previous return (%d) and before the nested seq_read_iter's return (%d)", r.Ints()[3], entry, prev, lastInner)
				}
				prev = r.TimeNS
				lats = append(lats, r.Ints()[3])
			}
		}
		if outer != n || inner != n {
			g.t.Errorf("%d returns of vfs_read and %d of seq_read_iter from pid %d, want %d each: %+v", outer, inner, pid, n, rs)
		}
		g.t.Logf("vfs_read of 7 bytes of /proc/self/stat, latency per call (ns): %v", lats)
		g.unweave("percall")
	})

	step("percall/a return the kretprobe missed leaves no state behind", func(g *guest) {
		const k, n = 16, 3
		// Misses need a kretprobe: on the direct trampoline none is missed.
		defer g.kretprobesOnly()()
		g.weave("percall_sleep")
		missed := sleepersReadOwnCalls(g, k, n)
		if missed == 0 {
			g.t.Fatalf("no return of hrtimer_nanosleep missed with %d sleepers: the test did not make the case", k)
		}
		g.unweave("percall_sleep")
	})
}

// sleepersReadOwnCalls runs klasy_prog sleepers (k children in
// hrtimer_nanosleep at once, then n short sleeps each, one task at a
// time) with percall_sleep woven, and checks that each return read its
// own call's request and entry time and that every short sleep's return
// was read; it returns the returns the kretprobe missed.
func sleepersReadOwnCalls(g *guest, k, n int) (missed uint64) {
	g.t.Helper()
	_, out := g.prog("sleepers", fmt.Sprint(k), "2000", fmt.Sprint(n), "20")
	if c := strings.Count(out, "child "); c != k {
		g.t.Fatalf("klasy_prog sleepers printed %q, want %d children", out, k)
	}
	for _, h := range g.hooksOf("percall_sleep") {
		if h.Kind == records.KindKretprobe {
			missed = h.Missed
		}
	}
	rs, _, err := g.sess.Drain(g.ctx)
	if err != nil {
		g.t.Fatal(err)
	}
	short := 0
	for _, r := range rs {
		if r.Comm != "klasy_prog" || r.Advice != 2 {
			continue
		}
		req, lat := r.Ints()[0], r.Ints()[1]
		// Each return reads its own call's request and entry time:
		// never 0 (another call's frame or none) nor a latency below
		// the request or a whole long sleep above it (a stale entry
		// time).
		if req <= 0 || lat < req || lat > req+int64(time.Second) {
			g.t.Errorf("pid %d: return read request %d ns, latency %d ns; want its own call's", r.PID, req, lat)
		}
		if req == int64(20*time.Millisecond) {
			short++
		}
	}
	if short != k*n {
		g.t.Errorf("%d returns of 20 ms sleeps read, want %d (%d sleepers, %d each, after %d missed returns)", short, k*n, k, n, missed)
	}
	g.t.Logf("%d sleepers, %d returns missed, then %d short sleeps each: %d returns read their own call", k, missed, n, short)
	return missed
}
