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
// with the machine's load), after the undecleaf branch's rules (named
// scalar wrappers moved whole, embedded structs written whole by
// immediates, memset's head and tail words: not decided; bitfield
// writes or-ing a value from memory, struct copies into a local with
// gaps, structs pushed from the frame) on the undecnest branch's:
//
//	struct        inferred confirmed  by-src precision   strict    no-bt   records reachable     found   recall
//	sk_buff           9497      9158     233    98.88%   87.84%   98.88%      4006      3285      2636   80.24%
//	inode             2867      2863       0    99.86%   95.15%   99.86%      2278      1820      1657   91.04%
//	file              1880      1869       0    99.41%   88.03%   99.41%      1440      1225      1133   92.49%
//	task_struct       7525      7491      19    99.80%   95.57%   99.80%      4995      3961      3736   94.32%
//	sock              3674      3646       7    99.43%   96.05%   99.37%      2368      1838      1604   87.27%
//	total           280313    276784    1465    99.26%   94.54%   99.28%    271044    177131    144417   81.53%
//
// with the perstruct branch's scoring: loads IPA-SRA moved into the
// callers of a clone (by-isra, 247), file_inode's loads scheduled
// among the previous line's instructions (15) and accesses through a
// helper the base of a record at the line calls (qdisc_skb_cb(skb)'s
// skb->cb, dev_net(dev)'s dev->nd_net: 51), and bitfield tests through
// a getter macro (skb_vlan_tag_present(skb): by-src +8) or computed as
// a shift and a mask (!!p->x, unlikely(skb->pfmemalloc): by-src +54). (Before it: 276,471
// confirmed, 99.13%; file 98.09%, sk_buff 98.34%, inode 99.41%.)
// (before the undecleaf rules: 281,378 inferred, 277,072 confirmed,
// 98.97%, recall 81.60%; before the undecnest rules — a pointer loaded
// from a global pointer, current, decides no offset-0 level; a
// constant-valued pointer parameter types the global's bytes it points
// to; the levels above a class holding a class the function points to;
// an outer scope's variable in the same register kept as another
// typing — after the precleaf branch's leaf rules, the by-helper
// scoring rule and the precnest branch's nested-level rules: 281,185
// inferred, 276,634 confirmed, 1,397 by-src, 98.88%, recall 81.27%;
// sk_buff 98.33% / 80.09%, task_struct 98.48% / 94.09%.)
// (by-src 1,365 and 98.87% before the source rule read macros that
// stand for a member's path, sk->sk_reuseport.)
// (before the nested-level rules — offset-0 levels above a cast within
// a class hierarchy, scalar arrays read wider than an element, copies
// through a second base a lea set or from or to a global: 281,582
// inferred, 276,695 confirmed, 98.75%, recall 81.27%; before the leaf
// rules, 281,959 inferred, 276,514 confirmed, 1,333 by-src, 98.54%,
// recall 81.27%.)
// (before the scoring's source rule for bitfield tests and the rules
// of Score and accessinfer added with it: 282,910 inferred, 97.52%,
// recall 81.31%.) Inference CPU 5.9-6.3 s, dwarfmap's index build
// 1.9 s; after the infertime branch's allocation cuts (types read with
// diescan, buffers reused), same accesses: 4.8-5.5 s (Debian's vmlinux
// 8.2-9.3 s -> 6.5-7.9 s, its index 2.7 s), 18% less CPU paired with
// farm-bench, 26% less peak memory. After the infertime2 branch's cuts
// (no second emitting pass after a fixed point, integer locals' location
// lists not read, names and member types' sizes not read again, call
// files read from the line table header without debug/dwarf, fewer
// allocations, GOGC 400), the same accesses (TestAccessesHash, every
// field) and the same table: inference CPU 3.5-3.7 s against the index
// build's 1.85-2.0 s in the same run (index + inference 2.9x the index;
// the issue asks 2x); whole process, paired medians: 6.36 -> 4.63 s CPU
// and 831 -> 622 MiB peak (Debian's vmlinux 9.69 -> 6.59 s, 1202 -> 1015
// MiB). After the infertime3 branch's cuts on the DWARF side (the
// units' types and call sites stepped over undecoded, structs' members
// read when first walked and not read before the access, the scan's
// lists in slabs, abbreviation tables shared by the workers), the same
// accesses and table: inference CPU 3.05-3.43 s -> 2.67-2.96 s in this
// benchmark, three runs of each taken in turn (index build 1.59-1.77 s);
// TestDebianKernel 5.17 -> 4.25 s and 4.77 -> 3.88 s; whole process,
// paired medians: 3.87 -> 3.71 s CPU and 658 -> 558 MiB (Debian's
// vmlinux 5.95 -> 5.50 s, 1026 -> 840 MiB). Measured again after
// merging main's rules (280,313 inferred, 99.13%): 3.34-3.79 s -> 2.71-
// 3.13 s (index 1.63-1.85 s); TestDebianKernel 5.72 -> 4.52 s and
// 4.88 -> 4.33 s.
// After the infertime4 branch's cuts on the instruction side
// (x86code's Decoder from templates of instruction shapes, x86code.Index
// and dense address searches, per-instruction caches of copyAt, DWARF
// registers shared with the instruction before, per-worker callee
// return types, buffers reused), the same accesses and table: inference
// CPU 3.33-3.60 -> 2.47-2.65 s in this benchmark, three runs of each in
// turn, before infertime3's cuts (index 1.64-1.84 s); TestDebianKernel
// 4.80-5.30 -> 4.17-4.75 s; whole process, paired medians of Infer
// alone: 3.55 -> 3.17 s CPU (Debian's vmlinux 5.00 -> 4.29 s, peak 1046
// -> 1018 MiB). With infertime3's cuts, on a loaded machine: 2.85-3.34
// -> 2.47-3.13 s (index 1.69-2.27 s); TestDebianKernel 4.69-4.71 ->
// 3.98-4.06 s.
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
// 99.26% in total, bitfield tests and merged compares the source
// confirms counted, loads moved into IPA-SRA clones' callers too;
// recall 81.53%; file 99.41%, sk_buff 98.88% / 80.2%), so that a
// change cannot make it worse unnoticed. Issue 19's precision target
// (99%) is met in total and for file, not yet for sk_buff.
func TestBuiltKernelFloors(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: reads the whole built kernel")
	}
	vmlinux := builtVmlinux(t)
	kr := runKernel(t, vmlinux, false)
	kr.report(t)
	floors := map[string][2]float64{ // precision, recall
		"sk_buff": {0.988, 0.802}, "inode": {0.998, 0.91}, "file": {0.994, 0.92},
		"task_struct": {0.997, 0.94}, "sock": {0.994, 0.87}, "": {0.992, 0.815},
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
