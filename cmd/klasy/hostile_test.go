package main

// The hostile-input suite: bad inputs a careful new user tries, each fed
// to the real klasy binary. For every case it asserts what the user would
// check: a non-zero exit, one clear line on stderr, no Go stack trace, a
// bounded time and memory, and nothing left behind (temporary files,
// partial cache files, QEMU processes).
//
// Cases live in hostile_*_test.go files, one per area, and append
// themselves to hostileCases from an init function. Every bug found later
// gets its case there.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/klasy/klasy/internal/cachedir"
	"github.com/klasy/klasy/internal/testenv"
	"github.com/klasy/klasy/lab/labboot"
)

// hostileCase is one bad input.
type hostileCase struct {
	name  string
	class string // the class of issue 14 it belongs to: crash, unbounded, output, wrong, special, lab, state, small
	// setup prepares the input under dir (a fresh directory that is also
	// the run's TMPDIR parent) and says how to run klasy. It may skip t.
	setup func(t *testing.T, dir string) hostileRun
	// want is a substring the one stderr line must contain.
	want string
}

// hostileRun says how one case runs klasy.
type hostileRun struct {
	args  []string
	stdin io.Reader // nil: empty
	// stdout is a path the command's standard output is opened on (such
	// as /dev/full); empty: a buffer, which the case may check in after.
	stdout string
	env    []string // added to the environment
	// timeout bounds the run; 0 means 20 s. A run that exceeds it fails
	// the case (a hang).
	timeout time.Duration
	// maxRSS bounds the peak resident memory in MiB; 0 means 512.
	maxRSS int64
	// during runs while klasy runs (e.g. to change its input under it).
	during func(t *testing.T, p *os.Process)
	// after checks what the command printed, after the common checks;
	// afterErr what it printed on stderr.
	after    func(t *testing.T, stdout []byte)
	afterErr func(t *testing.T, stderr string)
	// exitOK marks a case whose correct answer is success (exit 0), e.g. a
	// wrong answer that, once fixed, is a right one; the other checks stay.
	exitOK bool
}

var hostileCases []hostileCase

// progressLine is a line of progress on long work (dwarfmap's "indexing
// vmlinux: 355/2352 units", once a second), with its newline.
var progressLine = regexp.MustCompile(`(?m)^klasy: indexing \S+: \d+/\d+ units\n`)

var (
	hostileBinOnce sync.Once
	hostileBin     string
	hostileBinErr  error
)

// klasyBinary builds this tree's klasy once per test process.
func klasyBinary(t *testing.T) string {
	t.Helper()
	hostileBinOnce.Do(func() {
		dir, err := os.MkdirTemp("", "klasy-hostile-bin")
		if err != nil {
			hostileBinErr = err
			return
		}
		hostileBin = filepath.Join(dir, "klasy")
		out, err := exec.Command("go", "build", "-o", hostileBin, ".").CombinedOutput()
		if err != nil {
			hostileBinErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if hostileBinErr != nil {
		t.Fatal(hostileBinErr)
	}
	return hostileBin
}

func TestHostileInput(t *testing.T) {
	if len(hostileCases) == 0 {
		t.Fatal("no hostile-input cases registered")
	}
	bin := klasyBinary(t)
	seen := map[string]bool{}
	for _, hc := range hostileCases {
		if seen[hc.name] {
			t.Fatalf("two hostile cases named %q", hc.name)
		}
		seen[hc.name] = true
		t.Run(hc.class+"/"+hc.name, func(t *testing.T) {
			runHostile(t, bin, hc)
		})
	}
}

func runHostile(t *testing.T, bin string, hc hostileCase) {
	dir := t.TempDir()
	tmp := filepath.Join(dir, "tmp")
	cache := filepath.Join(dir, "cache")
	for _, d := range []string{tmp, cache} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	r := hc.setup(t, dir)
	if r.timeout == 0 {
		r.timeout = 20 * time.Second
	}
	if r.maxRSS == 0 {
		r.maxRSS = 512
	}
	roots := labRoots(cache, r.env)
	qemuBefore := qemuProcesses(roots)

	ctx, cancel := context.WithTimeout(context.Background(), r.timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, r.args...)
	// A cache and a TMPDIR of the case's own, so that anything left
	// behind is seen; a case may point KLASY_CACHE elsewhere through env.
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp, "KLASY_CACHE="+cache)
	cmd.Env = append(cmd.Env, r.env...)
	cmd.Stdin = r.stdin
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if r.stdout != "" {
		f, err := os.OpenFile(r.stdout, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		cmd.Stdout = f
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	peak := watchPeak(cmd.Process.Pid, bin)
	if r.during != nil {
		r.during(t, cmd.Process)
	}
	err := cmd.Wait()
	rss := peak() >> 10
	elapsed := time.Since(start)
	if ctx.Err() != nil {
		t.Fatalf("klasy %q: still running after %v (a hang); stderr: %s", r.args, r.timeout, stderr.String())
	}
	code := cmd.ProcessState.ExitCode()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		t.Fatalf("klasy %q: killed by %v; stderr: %s", r.args, ws.Signal(), stderr.String())
	}
	if r.exitOK {
		if err != nil {
			t.Errorf("klasy %q: %v, want success; stderr: %s", r.args, err, stderr.String())
		}
	} else if code == 0 {
		t.Errorf("klasy %q: exit 0, want a failure; stdout: %.200s", r.args, stdout.String())
	}
	msg := strings.TrimRight(stderr.String(), "\n")
	for _, bad := range []string{"goroutine ", "panic:", "runtime error", "[signal "} {
		if strings.Contains(msg, bad) {
			t.Errorf("klasy %q: stderr holds a Go crash (%q):\n%s", r.args, bad, msg)
		}
	}
	if !r.exitOK {
		// Progress a slow machine shows before the error is fine: the
		// error itself must be one line.
		if errMsg := progressLine.ReplaceAllString(msg, ""); errMsg == "" || strings.Contains(errMsg, "\n") {
			t.Errorf("klasy %q: stderr = %q, want one line (after progress lines)", r.args, msg)
		}
		if !strings.Contains(msg, hc.want) {
			t.Errorf("klasy %q: stderr = %q, want it to contain %q", r.args, msg, hc.want)
		}
	}
	if rss > r.maxRSS {
		t.Errorf("klasy %q: peak memory %d MiB, want at most %d MiB", r.args, rss, r.maxRSS)
	}
	t.Logf("exit %d in %v, peak %d MiB: %s", code, elapsed.Round(time.Millisecond), rss, msg)
	if left := leftFiles(t, tmp); len(left) > 0 {
		t.Errorf("klasy %q left files in TMPDIR: %q", r.args, left)
	}
	if left := leftFiles(t, cache); len(left) > 0 {
		var partial []string
		for _, f := range left {
			if strings.Contains(filepath.Base(f), ".tmp") {
				partial = append(partial, f)
			}
		}
		if len(partial) > 0 {
			t.Errorf("klasy %q left partial files in the cache: %q", r.args, partial)
		}
	}
	if after := qemuProcesses(roots); after > qemuBefore {
		t.Errorf("klasy %q left %d more QEMU processes running", r.args, after-qemuBefore)
	}
	if r.after != nil {
		r.after(t, stdout.Bytes())
	}
	if r.afterErr != nil {
		r.afterErr(t, stderr.String())
	}
}

// watchPeak follows the peak resident memory (VmHWM, in KiB) of process
// pid once it runs bin, every 2 ms until the returned function is called,
// which returns the highest reading. The wait status's Maxrss cannot
// serve: Linux charges a child the peak of the memory it shared with its
// parent before exec (Go starts children with vfork), so it reads as the
// test binary's, hundreds of MiB.
func watchPeak(pid int, bin string) (stop func() int64) {
	done := make(chan struct{})
	result := make(chan int64, 1)
	exe := fmt.Sprintf("/proc/%d/exe", pid)
	status := fmt.Sprintf("/proc/%d/status", pid)
	go func() {
		var peak int64
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			if p, err := os.Readlink(exe); err == nil && p == bin {
				if b, err := os.ReadFile(status); err == nil {
					for _, line := range strings.Split(string(b), "\n") {
						if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
							var kb int64
							fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), &kb)
							peak = max(peak, kb)
						}
					}
				}
			}
			select {
			case <-done:
				result <- peak
				return
			case <-tick.C:
			}
		}
	}()
	return func() int64 {
		close(done)
		return <-result
	}
}

// leftFiles lists the regular files and sockets under dir.
func leftFiles(t *testing.T, dir string) []string {
	var out []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// labRoots are the directories a run's labs may live in: its cache's,
// and where KLASY_LAB_DIR points, in the run's environment or ours.
func labRoots(cache string, env []string) []string {
	roots := []string{filepath.Join(cache, "labs")}
	for _, e := range append([]string{"KLASY_LAB_DIR=" + os.Getenv("KLASY_LAB_DIR")}, env...) {
		if d, ok := strings.CutPrefix(e, "KLASY_LAB_DIR="); ok && d != "" {
			roots = append(roots, d)
		}
		if d, ok := strings.CutPrefix(e, "KLASY_CACHE="); ok && d != "" {
			roots = append(roots, filepath.Join(d, "labs"))
		}
	}
	return roots
}

// qemuProcesses counts the QEMU processes of labs under roots. QEMUs of
// other labs (a lab test package running alongside, another engineer's
// lab) come and go meanwhile: they are not the run's.
func qemuProcesses(roots []string) int {
	ents, _ := os.ReadDir("/proc")
	n := 0
	for _, e := range ents {
		comm, err := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if err != nil || !strings.HasPrefix(string(comm), "qemu-system") {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		for _, root := range roots {
			if strings.Contains(string(cmdline), filepath.Clean(root)+"/") {
				n++
				break
			}
		}
	}
	return n
}

// needDebianVmlinux skips (or fails under make test) without Debian's
// debug vmlinux, and returns its path.
func needDebianVmlinux(t *testing.T) string {
	t.Helper()
	p := filepath.Join(cachedir.Root(), "debian", "current", "vmlinux")
	_, err := os.Stat(p)
	if err != nil {
		err = fmt.Errorf("no Debian debug vmlinux at %s: run make debian-kernel", p)
	}
	testenv.Need(t, "debian-kernel", err)
	return p
}

func TestMain(m *testing.M) {
	code := m.Run()
	labboot.Cleanup()
	if hostileBin != "" {
		os.RemoveAll(filepath.Dir(hostileBin))
	}
	os.Exit(code)
}
