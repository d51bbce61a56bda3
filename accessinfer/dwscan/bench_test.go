package dwscan

import (
	"syscall"
	"testing"
	"time"

	"github.com/klasy/klasy/accessinfer/members"
	"github.com/klasy/klasy/dwarfmap/diescan"
	"github.com/klasy/klasy/dwarfmap/elfimage"
	"github.com/klasy/klasy/internal/testenv"
)

// BenchmarkScan scans every unit of Debian's vmlinux with one Scanner,
// on one goroutine, as an inference worker scans its share of them
// (its types read as the scan asks for them). cpu-s/op varies less than
// the wall time on a shared machine.
func BenchmarkScan(b *testing.B) {
	img, err := elfimage.Open(testenv.DebianVmlinux(b))
	if err != nil {
		b.Fatal(err)
	}
	defer img.Close()
	sec := Sections{Info: img.Section(".debug_info"), Loc: img.Section(".debug_loc"),
		Loclists: img.Section(".debug_loclists"), Addr: img.Section(".debug_addr"),
		Line: img.Section(".debug_line"), Str: img.Section(".debug_str"), LineStr: img.Section(".debug_line_str")}
	cus := Units(sec.Info)
	b.ResetTimer()
	var ru0, ru1 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	funcs := 0
	for i := 0; i < b.N; i++ {
		sec.DIEs = diescan.NewSections(img.Section)
		s := NewScanner(img.DWARF, members.NewTypes(sec.DIEs, cus), sec)
		funcs = 0
		for _, cu := range cus {
			var u Unit
			s.Scan(cu[0], cu[1], &u)
			funcs += len(u.Funcs)
		}
		if s.Err() != nil {
			b.Fatal(s.Err())
		}
	}
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	cpu := time.Duration(ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano())
	b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
	b.ReportMetric(float64(funcs), "funcs")
}
