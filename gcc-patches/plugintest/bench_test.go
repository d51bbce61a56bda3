package plugintest_test

import (
	"debug/dwarf"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klasy/klasy/debugklasy"
	"github.com/klasy/klasy/internal/testenv"
)

// cpuTime runs cmd in dir and returns the CPU time (user + system) of gcc
// and its children: on a shared 2-core machine wall time mostly measures
// the neighbours.
func cpuTime(b *testing.B, dir, cmd string) time.Duration {
	b.Helper()
	c := exec.Command("sh", "-c", cmd)
	c.Dir = dir
	if out, err := c.CombinedOutput(); err != nil {
		b.Fatalf("%s: %v\n%s", cmd, err, out)
	}
	return c.ProcessState.UserTime() + c.ProcessState.SystemTime()
}

// lineRows returns the (file, line) pairs with a row in the object's
// .debug_line.
func lineRows(b *testing.B, path string) map[string]map[int]bool {
	b.Helper()
	f, err := elf.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	d, err := f.DWARF()
	if err != nil {
		b.Fatalf("%s: %v", path, err)
	}
	rows := map[string]map[int]bool{}
	r := d.Reader()
	for {
		e, err := r.Next()
		if err != nil {
			b.Fatal(err)
		}
		if e == nil {
			break
		}
		if e.Tag != dwarf.TagCompileUnit {
			r.SkipChildren()
			continue
		}
		lr, err := d.LineReader(e)
		if err != nil || lr == nil {
			continue
		}
		var le dwarf.LineEntry
		for lr.Next(&le) == nil {
			if le.File == nil {
				continue
			}
			name := filepath.Clean(le.File.Name)
			if rows[name] == nil {
				rows[name] = map[int]bool{}
			}
			rows[name][le.Line] = true
		}
		r.SkipChildren()
	}
	return rows
}

// BenchmarkKernelFiles measures, on the three kernel files, the plugin's
// compile-time overhead (goal < 10%), the size of .debug_klasy relative
// to the object (goal < 15%) and the share of records, and of distinct hook
// lines, whose line has a .debug_line row (with the enclosing statement's
// line as a fallback in the last column). Baseline and plugin runs alternate, and
// the fastest of each is kept.
func BenchmarkKernelFiles(b *testing.B) {
	so := plugin(b)
	k := linuxSource(b)
	for _, f := range kernelFiles {
		if _, err := os.Stat(filepath.Join(k.build, filepath.Dir(f.obj), "."+filepath.Base(f.obj)+".cmd")); err != nil {
			k.makeObjects(b, so, f.obj)
		}
	}
	dir := b.TempDir()
	const runs = 5
	fmt.Printf("%-22s %9s %9s %8s %10s %10s %8s %8s %9s %9s %9s\n", "file", "gcc", "+plugin", "overhead", "object", "section", "share", "records", "rec-row", "line-row", "+stmt")
	for _, f := range kernelFiles {
		b.Run(strings.ReplaceAll(f.obj, "/", "_"), func(b *testing.B) {
			base := filepath.Join(dir, strings.ReplaceAll(f.obj, "/", "_"))
			without := k.compileCommand(b, f.obj, base+".without.o")
			with := k.compileCommand(b, f.obj, base+".with.o") + " -fplugin=" + so
			var best [2]time.Duration
			for i := 0; i < b.N*runs; i++ {
				for j, cmd := range []string{without, with} {
					d := cpuTime(b, k.build, cmd)
					if best[j] == 0 || d < best[j] {
						best[j] = d
					}
				}
			}
			overhead := 100 * (best[1].Seconds() - best[0].Seconds()) / best[0].Seconds()

			st, err := os.Stat(base + ".with.o")
			if err != nil {
				b.Fatal(err)
			}
			ef, err := elf.Open(base + ".with.o")
			if err != nil {
				b.Fatal(err)
			}
			secSize := ef.Section(debugklasy.SectionName).Size
			ef.Close()
			share := 100 * float64(secSize) / float64(st.Size())

			tab, err := debugklasy.Open(base + ".with.o")
			if err != nil {
				b.Fatal(err)
			}
			rows := lineRows(b, base+".with.o")
			type fl struct {
				file string
				line int
			}
			lines, hit, hitStmt, recHit := map[fl]bool{}, 0, 0, 0
			for _, a := range tab.Accesses {
				key := fl{a.File, a.Line} // debugklasy cleans paths as lineRows does
				if rows[key.file][a.Line] {
					recHit++
				}
				if lines[key] {
					continue
				}
				lines[key] = true
				if rows[key.file][a.Line] {
					hit++
					hitStmt++
				} else if a.StmtLine != 0 && rows[key.file][a.StmtLine] {
					hitStmt++
				}
			}
			rowShare := 100 * float64(hit) / float64(len(lines))
			recShare := 100 * float64(recHit) / float64(len(tab.Accesses))
			stmtShare := 100 * float64(hitStmt) / float64(len(lines))
			fmt.Printf("%-22s %8.2fs %8.2fs %7.1f%% %9dB %9dB %7.1f%% %8d %8.1f%% %8.1f%% %8.1f%%\n",
				f.obj, best[0].Seconds(), best[1].Seconds(), overhead, st.Size(), secSize, share,
				len(tab.Accesses), recShare, rowShare, stmtShare)
			b.ReportMetric(overhead, "overhead-%")
			b.ReportMetric(share, "section-%")
			b.ReportMetric(recShare, "records-with-row-%")
			b.ReportMetric(rowShare, "lines-with-row-%")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// BenchmarkOpenVmlinux measures what `klasy accesses VMLINUX 'sk_buff.%'`
// spends reading and merging the lab kernel's .debug_klasy, beside the
// baseline of only reading the section's bytes.
func BenchmarkOpenVmlinux(b *testing.B) {
	vmlinux := filepath.Join(cacheDir(), "lab-kernel", "current", "vmlinux")
	if _, err := os.Stat(vmlinux); err != nil {
		testenv.Need(b, "lab", fmt.Errorf("no lab kernel at %s: run scripts/build-lab-kernel.sh", vmlinux))
	}
	p := mustPattern(b, "sk_buff.%")
	b.Run("read-section", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			f, err := elf.Open(vmlinux)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := f.Section(debugklasy.SectionName).Data(); err != nil {
				b.Fatal(err)
			}
			f.Close()
		}
	})
	b.Run("open-and-query", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			tab, err := debugklasy.Open(vmlinux)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(len(tab.Query(p))), "hits")
		}
	})
}
