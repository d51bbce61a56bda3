package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/klasy/klasy/internal/testenv"
)

// Hostile inputs to the image reader, the index and the plugin-section
// reader: klasy lines, vars, struct, funcs and accesses (issue 14,
// classes 1, 4, 5, 7 and 8).
func init() {
	hostileCases = append(hostileCases,
		// Crash: the image truncated in place while it is indexed, as a
		// vmlinux rebuilt during a query, faulted its mapping (SIGBUS).
		hostileCase{
			name: "image-truncated-while-indexed", class: "crash", want: "vmlinux changed while it was read",
			setup: func(t *testing.T, dir string) hostileRun {
				img := filepath.Join(dir, "vmlinux")
				copyImage(t, needDebianVmlinux(t), img)
				return hostileRun{args: []string{"funcs", img, "arch_cpu_idle"}, timeout: 60 * time.Second, maxRSS: 1024,
					during: func(t *testing.T, p *os.Process) {
						// Once klasy has mapped the image and decoded a
						// while: its worker goroutines are reading it.
						waitFor(p.Pid, func() bool { return mapped(p.Pid, img) && cpuTime(p.Pid) >= 300*time.Millisecond })
						if err := os.Truncate(img, 1<<20); err != nil {
							t.Error(err)
						}
					}}
			},
		},
		// Wrong answers that looked right.
		hostileCase{
			name: "vars-offset-past-end", class: "wrong", want: "process+0x10000 is past the end of process (size 0x",
			setup: func(t *testing.T, dir string) hostileRun {
				return hostileRun{args: []string{"vars", indexedFixture(t, dir), "process+0x10000"}}
			},
		},
		hostileCase{
			// A __weak arch_idle overridden by a strong one: the weak
			// copy's code never runs, and is neither listed nor given
			// lines.
			name: "funcs-discarded-weak", class: "wrong",
			setup: func(t *testing.T, dir string) hostileRun {
				return hostileRun{args: []string{"funcs", weakImage(t, dir), "arch_idle"}, exitOK: true,
					after: func(t *testing.T, stdout []byte) {
						if l := strings.Split(strings.TrimSpace(string(stdout)), "\n"); len(l) != 1 || !strings.Contains(l[0], "strong.c") {
							t.Errorf("funcs arch_idle: %q, want strong.c's alone", stdout)
						}
					}}
			},
		},
		hostileCase{
			name: "lines-discarded-weak", class: "wrong",
			setup: func(t *testing.T, dir string) hostileRun {
				return hostileRun{args: []string{"lines", weakImage(t, dir), "weak.c"}, exitOK: true,
					after: func(t *testing.T, stdout []byte) {
						if !strings.Contains(string(stdout), "main") || strings.Contains(string(stdout), "arch_idle") {
							t.Errorf("lines weak.c: %q, want main's lines and none of the discarded arch_idle", stdout)
						}
					}}
			},
		},
		hostileCase{
			// The real one: Debian's kernel/sched/idle.c arch_cpu_idle.
			name: "funcs-discarded-weak-vmlinux", class: "wrong",
			setup: func(t *testing.T, dir string) hostileRun {
				return hostileRun{args: []string{"funcs", needDebianVmlinux(t), "arch_cpu_idle"}, exitOK: true, timeout: 60 * time.Second, maxRSS: 1024,
					after: func(t *testing.T, stdout []byte) {
						if l := strings.Split(strings.TrimSpace(string(stdout)), "\n"); len(l) != 1 || !strings.Contains(l[0], "arch/x86/kernel/process.c") {
							t.Errorf("funcs arch_cpu_idle: %q, want arch/x86/kernel/process.c's alone", stdout)
						}
					}}
			},
		},
		// Special files: a FIFO waited for a writer forever.
		hostileCase{
			name: "image-fifo", class: "special", want: "fifo: a FIFO, not a regular file",
			setup: func(t *testing.T, dir string) hostileRun {
				return hostileRun{args: []string{"funcs", fifo(t, dir), "%"}, timeout: 5 * time.Second}
			},
		},
		hostileCase{
			name: "vmlinux-fifo", class: "special", want: "fifo: a FIFO, not a regular file",
			setup: func(t *testing.T, dir string) hostileRun {
				return hostileRun{args: []string{"funcs", "--vmlinux", fifo(t, dir), fixtureObject(t, false), "%"}, timeout: 5 * time.Second}
			},
		},
		hostileCase{
			name: "accesses-fifo", class: "special", want: "fifo: a FIFO, not a regular file",
			setup: func(t *testing.T, dir string) hostileRun {
				return hostileRun{args: []string{"accesses", fifo(t, dir), "sk_buff.len"}, timeout: 5 * time.Second}
			},
		},
		hostileCase{
			// A FIFO where the index belongs: refused, rebuilt, replaced.
			name: "cache-fifo", class: "special",
			setup: func(t *testing.T, dir string) hostileRun {
				img := indexedFixture(t, dir)
				idx, _ := filepath.Glob(filepath.Join(dir, "cache", "dwarfmap", "*.idx"))
				if len(idx) != 1 {
					t.Fatalf("index files %q, want one", idx)
				}
				if err := os.Remove(idx[0]); err != nil {
					t.Fatal(err)
				}
				if err := syscall.Mkfifo(idx[0], 0o600); err != nil {
					t.Fatal(err)
				}
				return hostileRun{args: []string{"funcs", img, "process"}, exitOK: true, timeout: 10 * time.Second,
					after: func(t *testing.T, stdout []byte) {
						if !strings.HasPrefix(string(stdout), "process ") {
							t.Errorf("funcs process: %q", stdout)
						}
						if st, err := os.Stat(idx[0]); err != nil || !st.Mode().IsRegular() {
							t.Errorf("the FIFO was not replaced by the index: %v", err)
						}
					}}
			},
		},
		// Lab state: a build killed while it wrote the index left its
		// temporary file; the next build removes it (the suite checks
		// that no partial file is left in the cache).
		hostileCase{
			name: "stale-index-temp", class: "state",
			setup: func(t *testing.T, dir string) hostileRun {
				cache := filepath.Join(dir, "cache", "dwarfmap")
				if err := os.MkdirAll(cache, 0o755); err != nil {
					t.Fatal(err)
				}
				tmp := filepath.Join(cache, "0123abcd-4096.v8.idx.tmp-1234567")
				if err := os.WriteFile(tmp, bytes.Repeat([]byte("partial index "), 1000), 0o644); err != nil {
					t.Fatal(err)
				}
				old := time.Now().Add(-time.Hour)
				if err := os.Chtimes(tmp, old, old); err != nil {
					t.Fatal(err)
				}
				return hostileRun{args: []string{"funcs", fixtureImage(t), "process"}, exitOK: true}
			},
		},
		// Smaller ones: errors said as the other commands say them.
		hostileCase{
			name: "accesses-truncated", class: "small", want: "truncated.o: reading ELF headers: file is truncated",
			setup: func(t *testing.T, dir string) hostileRun {
				data, err := os.ReadFile(fixtureObject(t, false))
				if err != nil {
					t.Fatal(err)
				}
				p := filepath.Join(dir, "truncated.o")
				if err := os.WriteFile(p, data[:len(data)/2], 0o644); err != nil {
					t.Fatal(err)
				}
				return hostileRun{args: []string{"accesses", p, "sk_buff.len"}}
			},
		},
		hostileCase{
			name: "accesses-directory", class: "small", want: ": a directory, not a regular file",
			setup: func(t *testing.T, dir string) hostileRun {
				return hostileRun{args: []string{"accesses", dir, "sk_buff.len"}}
			},
		},
		hostileCase{
			name: "funcs-directory", class: "small", want: ": a directory, not a regular file",
			setup: func(t *testing.T, dir string) hostileRun {
				return hostileRun{args: []string{"funcs", dir, "%"}}
			},
		},
		hostileCase{
			// A vmlinux and its copy with compressed debug sections share
			// a build-id: indexed one after the other, each keeps its
			// index, so the query loads it and says nothing more than its
			// answer (a rebuild would say so on stderr).
			name: "same-build-id-two-sizes", class: "small", want: `no function matches "nosuch"`,
			setup: func(t *testing.T, dir string) hostileRun {
				img := fixtureImage(t)
				gz := filepath.Join(dir, "fixture-gz")
				if b, err := exec.Command("objcopy", "--compress-debug-sections", img, gz).CombinedOutput(); err != nil {
					testenv.Need(t, "binutils", fmt.Errorf("objcopy: %v %s", err, b))
				}
				indexInto(t, dir, gz)
				indexInto(t, dir, img)
				return hostileRun{args: []string{"funcs", gz, "nosuch"}}
			},
		},
	)
}

// copyImage copies src to dst (a vmlinux to truncate: never the cache's).
func copyImage(t *testing.T, src, dst string) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// waitFor polls cond every few milliseconds for up to 30 s, or until
// process pid is gone.
func waitFor(pid int, cond func() bool) {
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err != nil || cond() {
			return
		}
	}
}

// mapped reports whether process pid maps the file p.
func mapped(pid int, p string) bool {
	maps, _ := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	return bytes.Contains(maps, []byte(p))
}

// cpuTime is the CPU time process pid has used (/proc/PID/stat).
func cpuTime(pid int) time.Duration {
	stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)        // utime, field 14
	st, _ := strconv.ParseInt(f[12], 10, 64)        // stime, field 15
	return time.Duration(ut+st) * time.Second / 100 // USER_HZ
}

// fifo makes dir/fifo, which no one writes.
func fifo(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// weakImage links dwarfmap's weak.c and strong.c: a __weak arch_idle
// overridden by a strong one, whose code stays in .text without a symbol.
func weakImage(t *testing.T, dir string) string {
	t.Helper()
	out := filepath.Join(dir, "weak")
	args := []string{"-O2", "-g", "-fno-asynchronous-unwind-tables", "-nostdlib", "-Wl,--build-id", "-Wl,-e,main",
		"-o", out, "../../dwarfmap/testdata/weak.c", "../../dwarfmap/testdata/strong.c"}
	testenv.GCC(t, args...)
	return out
}

// indexInto indexes img into the case's cache (dir/cache), as
// indexedFixture does.
func indexInto(t *testing.T, dir, img string) {
	t.Helper()
	t.Setenv("KLASY_CACHE", filepath.Join(dir, "cache"))
	var out, errb bytes.Buffer
	if err := run(&stdio{Out: &out, Err: &errb}, []string{"funcs", img, "%"}); err != nil {
		t.Fatalf("indexing %s: %v\n%s", img, err, errb.String())
	}
}
