package weaver_test

import (
	"slices"
)

// writesOnly: issue 23 #6 in a lab. access(file.f_pos, write) hooks only
// where vfs_setpos sets the file position, never where it reads it, and
// each record says it is a write; the positions are those the program
// seeks to, in order.
func writesOnly(g *guest) {
	g.t.Helper()
	rep := g.weave("fpos_write")
	if len(rep.JoinPoints) == 0 {
		g.t.Fatal("access(file.f_pos, write) within vfs_setpos selected nothing")
	}
	for _, jp := range rep.JoinPoints {
		if jp.Access == nil || jp.Access.Mode != "write" || jp.Skipped != "" {
			g.t.Errorf("%s: access %+v, skipped %q; want only woven writes", jp.Where(), jp.Access, jp.Skipped)
		}
	}
	g.run("sh", "-c", "echo 0123456789abcdef > /tmp/klasy_seek")
	pid, _ := g.prog("lseek", "/tmp/klasy_seek", "5", "9", "2")
	var written []int64
	for _, r := range g.recordsOf(pid) {
		if r.Access != "write" || len(r.Values) != 1 {
			g.t.Errorf("record at %s:%d, access %q, values %v; want a write's, one value", r.File, r.Line, r.Access, r.Values)
			continue
		}
		written = append(written, r.Values[0].Int)
	}
	if want := []int64{5, 9, 2}; !slices.Equal(written, want) {
		g.t.Errorf("f_pos after each write: %v, want %v (the offsets sought, no read)", written, want)
	}
	g.unweave("fpos_write")
}
