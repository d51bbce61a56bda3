package score

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/klasy/klasy/accessinfer"
	"github.com/klasy/klasy/debugklasy"
	"github.com/klasy/klasy/dwarfmap"
	"github.com/klasy/klasy/dwarfmap/elfimage"
	"github.com/klasy/klasy/internal/testenv"
	"github.com/klasy/klasy/lab"
)

// kernelStructs are the structs issue 19 asks the table for.
var kernelStructs = []string{"sk_buff", "inode", "file", "task_struct", "sock"}

// builtVmlinux is the lab kernel built with the plugin (make
// lab-kernel): its .debug_klasy is the ground truth.
func builtVmlinux(tb testing.TB) string {
	tb.Helper()
	k, err := lab.FindKernel(lab.Built)
	testenv.Need(tb, "lab-kernel", err)
	return k.Vmlinux
}

// builtSource is the source tree the built kernel was compiled from
// (its kbuild tree's "source" link), "" if not there.
func builtSource() string {
	k, err := lab.FindKernel(lab.Built)
	if err != nil {
		return ""
	}
	d, err := filepath.EvalSymlinks(filepath.Join(k.BuildDir, "source"))
	if err != nil {
		return ""
	}
	return d
}

// kernelRun is one measurement on the built kernel.
type kernelRun struct {
	scores        []Score
	res           *accessinfer.Result
	infer, index  time.Duration
	indexCached   bool
	compare, read time.Duration
	// CPU time of the process (all threads, the collector's too) over
	// the inference and over the index build: on a shared machine the
	// wall times swing with the load, their CPU times much less.
	inferCPU, indexCPU time.Duration
}

// cpuTime is the process's user and system time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func runKernel(tb testing.TB, vmlinux string, fresh bool) kernelRun {
	tb.Helper()
	var kr kernelRun
	start, cpu := time.Now(), cpuTime()
	// The index as klasy builds it (dwarfmap.Build), timed in this run;
	// fresh: not from the cache, so the two times compare.
	x, info, err := dwarfmap.Load(vmlinux, dwarfmap.Options{NoCache: fresh})
	if err != nil {
		tb.Fatal(err)
	}
	defer x.Close()
	kr.index, kr.indexCached, kr.indexCPU = time.Since(start), info.FromCache, cpuTime()-cpu
	if info.Built > 0 {
		kr.index = info.Built
	}
	img, err := elfimage.Open(vmlinux)
	if err != nil {
		tb.Fatal(err)
	}
	defer img.Close()
	start, cpu = time.Now(), cpuTime()
	if kr.res, err = accessinfer.Infer(img, accessinfer.Options{}); err != nil {
		tb.Fatal(err)
	}
	kr.infer, kr.inferCPU = time.Since(start), cpuTime()-cpu
	start = time.Now()
	tab, err := debugklasy.Open(vmlinux)
	if err != nil {
		tb.Fatal(err)
	}
	kr.read = time.Since(start)
	b, err := x.NewBatch()
	if err != nil {
		tb.Fatal(err)
	}
	start = time.Now()
	kr.scores = Compare(b, kr.res, tab, kernelStructs, builtSource())
	kr.compare = time.Since(start)
	return kr
}

func (kr kernelRun) report(tb testing.TB) {
	var b strings.Builder
	PrintScores(&b, kr.scores)
	tb.Logf("\n%s", b.String())
	tb.Logf("inference %v, CPU %v (scan %v, tracking %v; %d functions, %d instructions, %d with a memory operand, %d accesses); dwarfmap index build %v, CPU %v (cached: %v); comparison %v",
		kr.infer.Round(time.Millisecond), kr.inferCPU.Round(time.Millisecond), kr.res.Scan.Round(time.Millisecond), kr.res.Track.Round(time.Millisecond),
		kr.res.Funcs, kr.res.Insns, kr.res.MemInsns, len(kr.res.Accesses), kr.index.Round(time.Millisecond), kr.indexCPU.Round(time.Millisecond), kr.indexCached, kr.compare.Round(time.Millisecond))
	// ACCESSINFER_EXAMPLES=FILE writes examples of disagreements there
	// (a benchmark's log is cut short).
	if p := os.Getenv("ACCESSINFER_EXAMPLES"); p != "" {
		var ex strings.Builder
		for _, s := range kr.scores {
			for _, e := range s.UnconfirmedExamples {
				fmt.Fprintf(&ex, "%s unconfirmed: %s\n", s.Struct, e)
			}
			for _, e := range s.MissedRecordExamples {
				fmt.Fprintf(&ex, "%s missed: %s\n", s.Struct, e)
			}
		}
		if err := os.WriteFile(p, []byte(ex.String()), 0o644); err != nil {
			tb.Error(err)
		}
	}
}

// BenchmarkInferVsPlugin prints the precision/recall table on the built
// kernel, per struct and in total, with the inference time beside
// dwarfmap's index build time of the same image in the same run:
//
//	go test ./accessinfer/score -run '^$' -bench InferVsPlugin -benchtime 1x
//
// Measured 2026-11-27 (the CPU times compare; the wall times swing
// with the machine's load), with x86code sign-extending 32-bit
// displacements (container_of's -0x218(%rdi) was read 4 GiB off) and
// bitpat following a bitfield's store back into the next block and
// through copies of the base:
//
//	struct        inferred confirmed  by-src precision   strict    no-bt   records reachable     found   recall
//	sk_buff           9490      9165     233    99.03%   87.96%   99.03%      4006      3285      2638   80.30%
//	inode             2875      2871       0    99.86%   95.17%   99.86%      2278      1820      1657   91.04%
//	file              1885      1874       0    99.42%   88.01%   99.42%      1440      1225      1136   92.73%
//	task_struct       7562      7528      19    99.80%   95.58%   99.80%      4995      3962      3749   94.62%
//	sock              3684      3660       7    99.54%   96.17%   99.48%      2368      1838      1605   87.32%
//	total           283970    280286    1484    99.23%   94.49%   99.24%    271044    177134    145717   82.26%
//
// confirmed counts the by-helper and by-isra accesses the table's notes
// describe. The time target is the whole index (dwarfmap's
// index build and the inference) within 2x of the index build before
// the issue: on 2026-11-27 the index build itself was made ~45% cheaper
// (line programs decoded without debug/dwarf, no comparison sorts in
// Finish, diescan's forms read in place), so this benchmark's two
// figures no longer compare with each other alone. Five runs alternated
// with the binary of the morning's main (whose index build costs what
// the one before the issue did): index 2.18-2.54 s CPU before, now
// 1.04-1.38 s, inference 2.16-3.04 s; index + inference 1.36-1.99x the
// index before, median 1.81x (TestDebianKernel, seven runs: 1.51-2.09x,
// median 1.63x). How each rule and cut moved these figures is in the
// commit messages (git log -- accessinfer x86code dwarfmap).
func BenchmarkInferVsPlugin(b *testing.B) {
	vmlinux := builtVmlinux(b)
	for i := 0; i < b.N; i++ {
		kr := runKernel(b, vmlinux, true)
		kr.report(b)
		tot := kr.scores[len(kr.scores)-1]
		b.ReportMetric(100*tot.Precision, "precision%")
		b.ReportMetric(100*tot.Recall, "recall%")
		b.ReportMetric(kr.infer.Seconds(), "infer-s")
		b.ReportMetric(kr.index.Seconds(), "index-s")
		b.ReportMetric(kr.inferCPU.Seconds(), "infer-cpu-s")
		b.ReportMetric(kr.indexCPU.Seconds(), "index-cpu-s")
	}
}

// TestBuiltKernelFloors holds inference on the built kernel to the
// figures measured when it was last changed (2026-11-27: precision
// 99.23% in total, bitfield tests and merged compares the source
// confirms counted, loads moved into IPA-SRA clones' callers too;
// recall 82.26%; file 99.42%, sk_buff 99.03% / 80.30%), so that a
// change cannot make it worse unnoticed. Issue 19's precision target
// (99%) is met in total and for every struct of the table.
func TestBuiltKernelFloors(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: reads the whole built kernel")
	}
	vmlinux := builtVmlinux(t)
	kr := runKernel(t, vmlinux, false)
	kr.report(t)
	floors := map[string][2]float64{ // precision, recall
		"sk_buff": {0.990, 0.802}, "inode": {0.998, 0.91}, "file": {0.994, 0.925},
		"task_struct": {0.997, 0.94}, "sock": {0.994, 0.87}, "": {0.992, 0.822},
	}
	for _, s := range kr.scores {
		f := floors[s.Struct]
		if s.Precision < f[0] || s.Recall < f[1] {
			t.Errorf("%q: precision %.4f recall %.4f, floors %.4f %.4f", s.Struct, s.Precision, s.Recall, f[0], f[1])
		}
	}
}

// TestDebianKernel runs inference on Debian's stock vmlinux (no plugin,
// no ground truth) and logs how many accesses it finds of the structs
// issue 19 names, beside dwarfmap's index build of the same image.
func TestDebianKernel(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: reads the whole Debian kernel")
	}
	k, err := lab.FindKernel(lab.Debian)
	testenv.Need(t, "debian-kernel", err)
	start, cpu := time.Now(), cpuTime()
	x, info, err := dwarfmap.Load(k.Vmlinux, dwarfmap.Options{NoCache: true})
	if err != nil {
		t.Fatal(err)
	}
	x.Close()
	index, indexCPU := time.Since(start), cpuTime()-cpu
	if info.Built > 0 {
		index = info.Built
	}
	img, err := elfimage.Open(k.Vmlinux)
	if err != nil {
		t.Fatal(err)
	}
	defer img.Close()
	start, cpu = time.Now(), cpuTime()
	res, err := accessinfer.Infer(img, accessinfer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	infer, inferCPU := time.Since(start), cpuTime()-cpu
	by := map[string]int{}
	for _, a := range res.Accesses {
		by[a.Struct]++
	}
	var b strings.Builder
	for _, s := range kernelStructs {
		fmt.Fprintf(&b, " %s %d", s, by[s])
		if by[s] == 0 {
			t.Errorf("no access of %s inferred on Debian's kernel", s)
		}
	}
	t.Logf("%s: %d functions, %d accesses;%s; inference %v (CPU %v), dwarfmap index build %v (CPU %v)",
		k.Vmlinux, res.Funcs, len(res.Accesses), b.String(), infer.Round(time.Millisecond), inferCPU.Round(time.Millisecond), index.Round(time.Millisecond), indexCPU.Round(time.Millisecond))
}
