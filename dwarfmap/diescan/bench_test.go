package diescan

import (
	"syscall"
	"testing"
	"time"

	"github.com/klasy/klasy/dwarfmap/elfimage"
	"github.com/klasy/klasy/internal/testenv"
)

// BenchmarkScanDIEs runs the scanner alone over every unit of Debian's
// vmlinux, on one goroutine, as dwarfmap's index build walks them:
// subtrees that cannot hold code are jumped over. cpu-s/op varies less
// than the wall time on a shared machine.
func BenchmarkScanDIEs(b *testing.B) {
	img, err := elfimage.Open(testenv.DebianVmlinux(b))
	if err != nil {
		b.Fatal(err)
	}
	defer img.Close()
	secs := NewSections(img.Section)
	bounds := units(b, secs.Info)
	b.ResetTimer()
	var ru0, ru1 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	var dies int
	for i := 0; i < b.N; i++ {
		cache := Abbrevs{}
		dies = 0
		for _, u := range bounds {
			s, err := NewUnit(secs, u[0], u[1], cache)
			if err != nil {
				b.Fatal(err)
			}
			var e DIE
			if !s.UnitDIE(&e) {
				b.Fatalf("unit at %#x: no unit DIE", u[0])
			}
			dies++
			depth := 0
			if e.Children {
				depth = 1
			}
			for depth > 0 {
				if !s.Next(&e) {
					if s.Err() != nil {
						b.Fatalf("unit at %#x: DIE at %#x: %v", u[0], e.Off, s.Err())
					}
					depth--
					continue
				}
				dies++
				if e.Children {
					if !HoldsCode(e.Tag) && s.SkipChildren(&e) {
						continue
					}
					depth++
				}
			}
		}
	}
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	cpu := time.Duration(ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano())
	b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
	b.ReportMetric(float64(dies), "DIEs")
}
