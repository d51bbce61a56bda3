package dwarfmap

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/klasy/klasy/dwarfmap/elfimage"
	"github.com/klasy/klasy/internal/cachedir"

	"github.com/klasy/klasy/internal/testenv"
	"github.com/klasy/klasy/pattern"
)

// The benchmark and the vmlinux test read Debian's 6.1 debug vmlinux that
// `make debian-kernel` fetches, and (benchmark only) what
// scripts/dwarfmap-bench-setup.sh prepares for perf probe and stap.

func kernelCache() string { return cachedir.Root() }

// TestDebianVmlinux checks the index of the real kernel: fast once its
// index is cached (the first run builds it).
func TestDebianVmlinux(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	v := testenv.DebianVmlinux(t)
	x, _, err := Load(v, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	st := x.Stats()
	// Sizes of Debian's 6.1.0-56-amd64 vmlinux (lab.md: 2,352 units,
	// 4.3 M line rows).
	if st.Units != 2352 || st.Rows < 4_000_000 || st.Funcs < 40_000 {
		t.Errorf("stats %+v", st)
	}
	ls, err := x.Lines(LineSpec{File: "net/core/skbuff.c"})
	if err != nil || len(ls) < 2000 {
		t.Fatalf("lines of net/core/skbuff.c: %d, %v", len(ls), err)
	}
	f := x.Funcs("tcp_sendmsg")
	if len(f) != 1 || !f[0].External || !strings.HasSuffix(f[0].File, "net/ipv4/tcp.c") {
		t.Fatalf("tcp_sendmsg: %+v", f)
	}
	vs, err := x.VarsAt(f[0].Entry)
	if err != nil {
		t.Fatal(err)
	}
	// At entry the SysV ABI puts sk, msg, size in rdi, rsi, rdx.
	for name, reg := range map[string]string{"sk": "register rdi", "msg": "register rsi", "size": "register rdx"} {
		if v := varAt(t, vs, name, "tcp_sendmsg"); v.Location != reg || v.Kind != "param" {
			t.Errorf("tcp_sendmsg entry: %s = %+v, want %s", name, v, reg)
		}
	}
	l, err := x.Struct("sk_buff")
	if err != nil {
		t.Fatal(err)
	}
	var lenOff int64 = -1
	for _, m := range l.Members {
		if m.Name == "len" && m.Depth == 0 {
			lenOff = m.Offset
		}
	}
	// pahole of this kernel: struct sk_buff is 232 bytes, len at 112.
	if l.Size != 232 || lenOff != 112 {
		t.Errorf("sk_buff: size %d, len at %d", l.Size, lenOff)
	}
}

// BenchmarkBuild builds the index of Debian's vmlinux in this process,
// without the cache: the DIE scanner, line tables and merge, as a cold
// `klasy` run pays them. cpu-s/op (user+sys of the process) varies less
// than the wall time on a shared machine.
func BenchmarkBuild(b *testing.B) {
	img, err := elfimage.Open(testenv.DebianVmlinux(b))
	if err != nil {
		b.Fatal(err)
	}
	defer img.Close()
	b.ResetTimer()
	cpu0 := cpuTime()
	for i := 0; i < b.N; i++ {
		x, err := Build(img, nil)
		if err != nil {
			b.Fatal(err)
		}
		if st := x.Stats(); st.Funcs == 0 {
			b.Fatalf("no functions: %+v", st)
		}
	}
	b.ReportMetric((cpuTime()-cpu0).Seconds()/float64(b.N), "cpu-s/op")
}

// cpuTime is the user and system time of the process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// helperResult is what the helper process reports.
type helperResult struct {
	LoadMS  float64 `json:"load_ms"`
	QueryMS float64 `json:"query_ms"`
	N       int     `json:"n"`
	Built   bool    `json:"built"`
	Err     string  `json:"err,omitempty"`
}

// runHelper is the test binary acting as a one-shot klasy query, so
// process time and peak memory are measured like perf's and stap's.
func runHelper(mode, image, cacheDir string) {
	var res helperResult
	t0 := time.Now()
	x, info, err := Load(image, Options{CacheDir: cacheDir, Rebuild: mode == "build"})
	res.LoadMS = ms(time.Since(t0))
	if err != nil {
		res.Err = err.Error()
	} else {
		res.Built = !info.FromCache
		t1 := time.Now()
		switch mode {
		case "lines":
			ls, err := x.Lines(LineSpec{File: "net/core/skbuff.c"})
			res.N, res.Err = len(ls), errString(err)
		case "vars":
			vs, err := x.VarsAtLine("tcp_sendmsg", benchVarsLine)
			res.N, res.Err = len(vs), errString(err)
		case "funcs":
			res.N = len(x.MatchFuncs(pattern.MustCompile("tcp_%", pattern.CommandLine)))
		}
		res.QueryMS = ms(time.Since(t1))
	}
	json.NewEncoder(os.Stdout).Encode(res)
}

// benchVarsLine is a line of tcp_sendmsg (net/ipv4/tcp.c:1489-1500 in
// 6.1): perf probe calls it tcp_sendmsg:5 (relative to the function).
const benchVarsLine = 1494

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// run is one measured process.
type run struct {
	wall   time.Duration
	cpu    time.Duration
	maxRSS int64 // KB
	out    []byte
	err    error
}

func measure(name string, args []string, env ...string) run {
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	t0 := time.Now()
	err := cmd.Run()
	r := run{wall: time.Since(t0), out: out.Bytes()}
	if cmd.ProcessState != nil {
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			r.maxRSS = ru.Maxrss
			r.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		}
	}
	if err != nil {
		msg := strings.TrimSpace(errb.String())
		if i := strings.LastIndexByte(msg, '\n'); i >= 0 && len(msg) > 400 {
			msg = msg[i+1:]
		}
		r.err = fmt.Errorf("%s: %v: %s", filepath.Base(name), err, msg)
	}
	return r
}

func (r run) String() string {
	if r.err != nil {
		return "failed: " + r.err.Error()
	}
	return fmt.Sprintf("%.2f s cpu %.2f s %d MB", r.wall.Seconds(), r.cpu.Seconds(), r.maxRSS/1024)
}

func median(rs []run) run {
	slices.SortFunc(rs, func(a, b run) int { return int(a.wall - b.wall) })
	return rs[len(rs)/2]
}

// BenchmarkVsPerfProbeAndStap measures klasy's index against perf probe
// and SystemTap's pass 2 on the same queries in one run, and prints them
// side by side. `make bench` sets everything up.
func BenchmarkVsPerfProbeAndStap(b *testing.B) {
	v := testenv.DebianVmlinux(b)
	bench := filepath.Join(kernelCache(), "dwarfmap-bench")
	src, kbuild := filepath.Join(bench, "src"), filepath.Join(bench, "kbuild")
	for _, p := range []string{filepath.Join(src, "net/core/skbuff.c"), filepath.Join(kbuild, "vmlinux")} {
		if _, err := os.Stat(p); err != nil {
			testenv.Need(b, "dwarfmap-bench", fmt.Errorf("%s missing: run scripts/dwarfmap-bench-setup.sh (make bench does)", p))
		}
	}
	for _, tool := range []string{"perf", "stap"} {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.Need(b, "dwarfmap-bench", fmt.Errorf("%s not installed: apt install linux-perf systemtap", tool))
		}
	}
	load, _ := os.ReadFile("/proc/loadavg")
	self := os.Args[0]
	// The index goes to <tmp>/dwarfmap, where klasy finds it with
	// KLASY_CACHE=<tmp>.
	cacheParent := b.TempDir()
	cache := filepath.Join(cacheParent, "dwarfmap")
	// make bench builds bin/klasy first: then the klasy rows are the real
	// command's process times; otherwise this test binary stands in.
	cli, _ := filepath.Abs("../bin/klasy")
	if _, err := os.Stat(cli); err != nil {
		cli = ""
	}
	helper := func(mode string) (run, helperResult) {
		r := measure(self, []string{"-test.run=^$"}, "DWARFMAP_BENCH_HELPER="+mode, "DWARFMAP_BENCH_IMAGE="+v, "DWARFMAP_BENCH_CACHE="+cache)
		var h helperResult
		if r.err == nil {
			if err := json.Unmarshal(r.out, &h); err != nil {
				r.err = fmt.Errorf("helper said %q: %v", r.out, err)
			} else if h.Err != "" {
				r.err = errors.New(h.Err)
			}
		}
		return r, h
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		cold, ch := helper("build")
		if cold.err != nil || !ch.Built {
			b.Fatalf("cold build: %v (built %v)", cold.err, ch.Built)
		}
		type ours struct {
			proc run
			res  helperResult
		}
		repeat := func(mode string) ours {
			var rs []run
			var hs []helperResult
			for k := 0; k < 5; k++ {
				r, h := helper(mode)
				if r.err != nil {
					b.Fatalf("%s: %v", mode, r.err)
				}
				rs, hs = append(rs, r), append(hs, h)
			}
			m := median(rs)
			slices.SortFunc(hs, func(a, b helperResult) int { return int((a.LoadMS - b.LoadMS) * 1000) })
			h := hs[len(hs)/2]
			qs := make([]float64, len(hs))
			for k := range hs {
				qs[k] = hs[k].QueryMS
			}
			slices.Sort(qs)
			h.QueryMS = qs[len(qs)/2]
			return ours{m, h}
		}
		warm := repeat("load")
		lines, vars, funcs := repeat("lines"), repeat("vars"), repeat("funcs")
		procName := "process (test helper)"
		if cli != "" {
			procName = "klasy process"
			for _, q := range []struct {
				o    *ours
				args []string
			}{
				{&lines, []string{"lines", "--json", v, "net/core/skbuff.c"}},
				{&vars, []string{"vars", "--json", v, fmt.Sprintf("tcp_sendmsg:%d", benchVarsLine)}},
				{&funcs, []string{"funcs", "--json", v, "tcp_%"}},
			} {
				var rs []run
				for k := 0; k < 9; k++ {
					r := measure(cli, q.args, "KLASY_CACHE="+cacheParent)
					if r.err != nil {
						b.Fatalf("klasy %s: %v", strings.Join(q.args, " "), r.err)
					}
					rs = append(rs, r)
				}
				q.o.proc = median(rs)
			}
		}

		perf := func(args ...string) run {
			return measure("perf", append([]string{"probe", "-k", v, "-s", src}, args...))
		}
		stap := func(args ...string) run {
			return measure("stap", append([]string{"-r", kbuild}, args...))
		}
		pLines := perf("-L", "net/core/skbuff.c")
		pVars := perf("-V", fmt.Sprintf("tcp_sendmsg:%d", benchVarsLine-1489))
		pFuncs := perf("-F", "tcp_*")
		sLines := stap("-u", "-p2", "-e", `probe kernel.statement("*@net/core/skbuff.c:*") {}`)
		sVars := stap("-L", fmt.Sprintf(`kernel.statement("tcp_sendmsg@net/ipv4/tcp.c:%d")`, benchVarsLine))
		sFuncs := stap("-u", "-p2", "-e", `probe kernel.function("tcp_*") {}`)

		w := &strings.Builder{}
		fmt.Fprintf(w, "\ndwarfmap vs perf probe vs stap on %s (%d MB); /proc/loadavg before: %s\n", v, fileMB(v), strings.TrimSpace(string(load)))
		fmt.Fprintf(w, "(wall time and peak RSS of one process each; cpu = user+sys; the machine's 2 cores are shared)\n")
		fmt.Fprintf(w, "%-34s %-38s %-26s %s\n", "", "klasy (dwarfmap)", "perf probe -k -s", "stap -r")
		fmt.Fprintf(w, "%-34s %-38s %-26s %s\n", "index build, cold (process)", cold.String(), "-", "-")
		fmt.Fprintf(w, "%-34s %-38s %-26s %s\n", "warm load (in process / process)", fmt.Sprintf("%.0f ms / %.0f ms  %d MB", warm.res.LoadMS, ms(warm.proc.wall), warm.proc.maxRSS/1024), "-", "-")
		row := func(name string, o ours, p, s run, pn, sn string) {
			fmt.Fprintf(w, "%-34s %-38s %-26s %s\n", name,
				fmt.Sprintf("%.1f ms query; %s %.0f ms cpu %.0f ms %d MB (%d)", o.res.QueryMS, procName, ms(o.proc.wall), ms(o.proc.cpu), o.proc.maxRSS/1024, o.res.N),
				p.String()+pn, s.String()+sn)
			for _, base := range []struct {
				tool string
				r    run
			}{{"perf", p}, {"stap", s}} {
				if base.r.err == nil {
					fmt.Fprintf(w, "%-34s %-38s\n", "", fmt.Sprintf("  vs %s: %.0fx less wall, %.0fx less cpu (process vs process)", base.tool,
						base.r.wall.Seconds()/o.proc.wall.Seconds(), base.r.cpu.Seconds()/o.proc.cpu.Seconds()))
				}
			}
		}
		row("lines of net/core/skbuff.c", lines, pLines, sLines, fmt.Sprintf(" (%d lines)", countLines(pLines.out)), fmt.Sprintf(" (%d probes)", countLines(sLines.out)))
		row(fmt.Sprintf("vars at tcp_sendmsg:%d", benchVarsLine), vars, pVars, sVars, "", "")
		row("functions matching tcp_%", funcs, pFuncs, sFuncs, fmt.Sprintf(" (%d, symbols)", countLines(pFuncs.out)), fmt.Sprintf(" (%d probes)", countLines(sFuncs.out)))
		fmt.Fprintln(w, "perf -F lists symbol-table names only (no DWARF); klasy counts out-of-line and inline-only functions.")
		fmt.Fprintln(w, "klasy's warm load maps the index and checks its header; each query's time includes checking the parts of the index it reads.")
		fmt.Print(w.String())

		b.ReportMetric(cold.wall.Seconds(), "cold-s")
		b.ReportMetric(float64(cold.maxRSS)/1024, "cold-MB")
		b.ReportMetric(warm.res.LoadMS, "warm-load-ms")
		b.ReportMetric(lines.res.QueryMS, "lines-ms")
		b.ReportMetric(vars.res.QueryMS, "vars-ms")
		b.ReportMetric(funcs.res.QueryMS, "funcs-ms")
	}
}

func fileMB(p string) int64 {
	st, err := os.Stat(p)
	if err != nil {
		return 0
	}
	return st.Size() >> 20
}

func countLines(b []byte) int { return bytes.Count(b, []byte{'\n'}) }
