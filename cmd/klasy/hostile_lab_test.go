package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/klasy/klasy/internal/labtest"
)

// Hostile inputs to klasy lab: endless input, signals while it waits, and
// damaged lab state (issue 14, classes 2, 6 and 7).
func init() {
	hostileCases = append(hostileCases,
		hostileCase{
			// stdin was read whole before the lab was looked up: endless
			// input grew without bound and ignored SIGTERM.
			name: "exec-endless-stdin-no-lab", class: "unbounded", want: "no such lab",
			setup: func(t *testing.T, dir string) hostileRun {
				zero, err := os.Open("/dev/zero")
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { zero.Close() })
				return hostileRun{args: []string{"lab", "exec", "--stdin", "nosuchlab", "--", "cat"}, stdin: zero,
					env: []string{"KLASY_LAB_DIR=" + filepath.Join(dir, "labs")}, timeout: 5 * time.Second}
			},
		},
		hostileCase{
			// A lab whose agent does not answer (an idle QEMU), stdin a
			// pipe that gives nothing: SIGTERM ends the wait at once.
			name: "exec-sigterm-while-connecting", class: "lab", want: "interrupted by SIGTERM",
			setup: func(t *testing.T, dir string) hostileRun {
				root := shortLabRoot(t)
				pid, _ := labtest.IdleQEMU(t, filepath.Join(root, "idle"))
				writeLabJSON(t, root, "idle", fmt.Sprintf(`{"name": "idle", "pid": %d}`, pid))
				r, w, err := os.Pipe()
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { r.Close(); w.Close() })
				return hostileRun{args: []string{"lab", "exec", "--stdin", "idle", "--", "cat"}, stdin: r,
					env: []string{"KLASY_LAB_DIR=" + root}, timeout: 3 * time.Second,
					during: func(t *testing.T, p *os.Process) {
						time.Sleep(time.Second)
						p.Signal(syscall.SIGTERM)
					},
				}
			},
		},
		hostileCase{
			// A damaged record and no QEMU: a stale lab, said so.
			name: "exec-damaged-record-no-qemu", class: "state", want: "not running any more",
			setup: func(t *testing.T, dir string) hostileRun {
				root := filepath.Join(dir, "labs")
				writeLabJSON(t, root, "broken", `{"name": "broken", "pid": 12`)
				return hostileRun{args: []string{"lab", "exec", "broken", "--", "true"}, env: []string{"KLASY_LAB_DIR=" + root}}
			},
		},
		hostileCase{
			// A damaged record made a running QEMU look stale, and up
			// started a second one, leaving the first with nothing to
			// stop it.
			name: "up-damaged-record-live-qemu", class: "state", want: "already running",
			setup: func(t *testing.T, dir string) hostileRun {
				root := shortLabRoot(t)
				pid, _ := labtest.IdleQEMU(t, filepath.Join(root, "dmg"))
				writeLabJSON(t, root, "dmg", "\x00garbage")
				return hostileRun{args: []string{"lab", "up", "dmg"}, env: []string{"KLASY_LAB_DIR=" + root},
					after: func(t *testing.T, _ []byte) {
						if syscall.Kill(pid, 0) != nil {
							t.Errorf("up over a damaged record stopped the running QEMU")
						}
						if _, err := os.Stat(filepath.Join(root, "dmg", "qmp.sock")); err != nil {
							t.Errorf("up over a damaged record removed the running lab's state: %v", err)
						}
					}}
			},
		},
		hostileCase{
			name: "down-damaged-record-live-qemu", class: "state",
			setup: func(t *testing.T, dir string) hostileRun {
				root := shortLabRoot(t)
				pid, _ := labtest.IdleQEMU(t, filepath.Join(root, "dmg"))
				writeLabJSON(t, root, "dmg", `{"name": "dmg", "pi`)
				return hostileRun{args: []string{"lab", "down", "dmg"}, env: []string{"KLASY_LAB_DIR=" + root}, exitOK: true,
					after: func(t *testing.T, _ []byte) {
						if !exited(pid, 5*time.Second) {
							t.Errorf("QEMU (pid %d) still runs after down of its lab with a damaged record", pid)
						}
						if _, err := os.Stat(filepath.Join(root, "dmg")); !os.IsNotExist(err) {
							t.Errorf("state left after down: %v", err)
						}
					}}
			},
		},
		hostileCase{
			name: "status-damaged-record-live-qemu", class: "state",
			setup: func(t *testing.T, dir string) hostileRun {
				root := shortLabRoot(t)
				pid, _ := labtest.IdleQEMU(t, filepath.Join(root, "dmg"))
				writeLabJSON(t, root, "dmg", "{}")
				return hostileRun{args: []string{"lab", "status", "dmg"}, env: []string{"KLASY_LAB_DIR=" + root}, exitOK: true,
					after: func(t *testing.T, stdout []byte) {
						if f := strings.Fields(lastLine(string(stdout))); len(f) < 5 || f[1] != "running" || f[4] != fmt.Sprint(pid) {
							t.Errorf("lab status = %q, want dmg running as pid %d", stdout, pid)
						}
					}}
			},
		},
	)
}

func lastLine(s string) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return l[len(l)-1]
}

// shortLabRoot is a labs directory whose socket paths fit a unix socket's
// 108 bytes (a test's TempDir may not).
func shortLabRoot(t *testing.T) string {
	root, err := os.MkdirTemp("", "klasy-hl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	return root
}

func writeLabJSON(t *testing.T, root, name, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(root, name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, name, "lab.json"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// exited reports whether process pid is gone (or a zombie) within d.
func exited(pid int, d time.Duration) bool {
	for deadline := time.Now().Add(d); ; time.Sleep(20 * time.Millisecond) {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil || strings.Contains(string(stat), ") Z ") {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}
