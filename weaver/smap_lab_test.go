package weaver_test

import (
	"slices"
	"strings"

	"github.com/klasy/klasy/weaver/records"
)

// smapSteps: issue 23's shared maps in the lab. vfs_read's advice sets
// two maps keyed by command in one process of klasy_prog; do_mkdirat's
// advice reads them in another, deletes one key, and fills a third map
// past its bound (MAP_SIZE); klasy stats shows the maps' contents and what the
// full one could not keep.
func smapSteps(g *guest, step func(string, func(*guest))) {
	step("smap/a map set in one function's advice is read in another's", func(g *guest) {
		const count, reads, fill, size = 7, 5, 5000, 1000
		g.weave("smap")
		defer g.unweave("smap")
		if _, out := g.prog("pread", "/proc/self/stat", "7", "0", "5"); !strings.Contains(out, "fd ") {
			g.t.Fatalf("klasy_prog pread printed %q", out)
		}
		g.run("rm", "-rf", "/tmp/smap-dir")
		pid, out := g.prog("mkdir", "/tmp/smap-dir", "2")
		if !strings.Contains(out, "made 1") {
			g.t.Fatalf("klasy_prog mkdir printed %q", out)
		}
		var got [][]int64
		for _, r := range g.recordsOf(pid) {
			if r.Advice == 2 {
				got = append(got, r.Ints())
			}
		}
		// First mkdir: asked 7 and 5 reads, deleted, then absent (777);
		// second: absent, not deleted.
		want := [][]int64{{count, reads, 1, 777}, {777, reads, 0, 777}}
		if len(got) != 2 || !slices.Equal(got[0], want[0]) || !slices.Equal(got[1], want[1]) {
			g.t.Errorf("do_mkdirat's advice read %v, want %v", got, want)
		}
		st, err := g.sess.Stats(g.ctx)
		if err != nil {
			g.t.Fatal(err)
		}
		maps := map[string]records.SharedMap{}
		for _, a := range st.Aspects {
			if a.Name == "smap" {
				for _, m := range a.SharedMaps {
					maps[m.Name] = m
				}
			}
		}
		if m := maps["asked"]; len(m.Entries) != 0 || m.Size == 0 {
			g.t.Errorf("@asked after its delete: %+v, want an empty map", m)
		}
		r := maps["reads"]
		if len(r.Entries) != 1 || records.KeyString(r.Entries[0].Key) != "klasy_prog" || r.Entries[0].Value != reads {
			g.t.Errorf("@reads: %+v, want [klasy_prog]: %d", r.Entries, reads)
		}
		f := maps["fill"]
		if f.Size != size || len(f.Entries) > f.Size || len(f.Entries) < f.Size*99/100 || uint64(len(f.Entries))+f.Overflow != fill {
			g.t.Errorf("@fill after %d keys: %d kept, %d overflowed, size %d; want nearly all of its size (%d) kept and the rest counted", fill, len(f.Entries), f.Overflow, f.Size, size)
		}
		for _, e := range f.Entries {
			if len(e.Key) != 2 || e.Key[1].Int != int64(pid) || int64(e.Value) != 3*e.Key[0].Int {
				g.t.Errorf("@fill[%s]: %d, want [i, %d]: 3i", records.KeyString(e.Key), e.Value, pid)
				break
			}
		}
		g.t.Logf("@fill: %d of %d keys kept, %d overflowed", len(f.Entries), fill, f.Overflow)
	})
}
