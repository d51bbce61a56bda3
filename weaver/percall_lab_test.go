package weaver_test

import (
	"strings"
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
				if len(r.Values) != 2 || r.Values[0] != 99 || r.Values[1] != 0 {
					g.t.Errorf("seq_read_iter's return read %v, want [99 0]: its own count, no entry time (that was vfs_read's)", r.Values)
				}
			case 4: // vfs_read's return
				outer++
				if len(r.Values) != 4 {
					g.t.Fatalf("vfs_read's return stored %v, want 4 values", r.Values)
				}
				if r.Values[0] != 7 || r.Values[1] != 7 || r.Values[2] != 7 {
					g.t.Errorf("vfs_read's return read count %d (CALL_GET), %d (argument at entry), returned %d; want 7, 7, 7 (pread's count)", r.Values[0], r.Values[1], r.Values[2])
				}
				// The entry time, this record's time less the latency, is
				// after the last call's return and before the nested
				// seq_read_iter returned.
				lat := uint64(r.Values[3])
				entry := r.TimeNS - lat
				if r.Values[3] <= 0 || entry < prev || entry > lastInner {
					g.t.Errorf("vfs_read latency %d ns: entry at %d, want after the previous return (%d) and before the nested seq_read_iter's return (%d)", r.Values[3], entry, prev, lastInner)
				}
				prev = r.TimeNS
				lats = append(lats, r.Values[3])
			}
		}
		if outer != n || inner != n {
			g.t.Errorf("%d returns of vfs_read and %d of seq_read_iter from pid %d, want %d each: %+v", outer, inner, pid, n, rs)
		}
		g.t.Logf("vfs_read of 7 bytes of /proc/self/stat, latency per call (ns): %v", lats)
		g.unweave("percall")
	})
}
