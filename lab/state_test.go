package lab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/klasy/klasy/internal/labtest"
)

func appendFile(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

func TestRecordSaveIsAtomic(t *testing.T) {
	t.Setenv("KLASY_LAB_DIR", t.TempDir())
	r := record{Name: "a", PID: 42, AgentDevice: "/dev/vport0p1", Mux: true}
	if err := os.MkdirAll(r.dir(), 0o755); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if err := r.save(); err != nil {
			t.Fatal(err)
		}
	}
	got, err := loadRecord("a")
	if err != nil || got.PID != 42 || !got.Mux || got.AgentDevice != r.AgentDevice {
		t.Errorf("loadRecord = %+v, %v", got, err)
	}
	ents, _ := os.ReadDir(r.dir())
	if len(ents) != 1 {
		t.Errorf("lab directory holds %d entries after saves, want lab.json alone", len(ents))
	}
}

// A damaged lab.json must not hide a running QEMU: status shows it
// running, up refuses to start a second, Get says what to do, down stops
// it and leaves nothing.
func TestDamagedRecordWithLiveQEMU(t *testing.T) {
	t.Setenv("KLASY_LAB_DIR", t.TempDir())
	tests := []struct {
		name   string
		damage func(t *testing.T, r record, pid int)
		want   string // in Status.Problem
	}{
		{"garbage", func(t *testing.T, r record, pid int) {
			os.WriteFile(r.recordPath(), []byte("\x00\x01garbage"), 0o644)
		}, "lab.json is damaged"},
		{"truncated", func(t *testing.T, r record, pid int) {
			os.WriteFile(r.recordPath(), []byte(fmt.Sprintf(`{"name": %q, "pid": %d, "ker`, r.Name, pid)), 0o644)
		}, "lab.json is damaged"},
		{"empty-object", func(t *testing.T, r record, pid int) {
			os.WriteFile(r.recordPath(), []byte("{}"), 0o644)
		}, `names lab "" and pid 0`},
		{"missing", func(t *testing.T, r record, pid int) {}, "no lab.json"},
		{"dead-pid", func(t *testing.T, r record, pid int) {
			r.PID = 1 << 22 // above pid_max's default: no such process
			r.save()
		}, "but the lab's QEMU runs as pid"},
		{"directory-gone", func(t *testing.T, r record, pid int) {
			os.RemoveAll(r.dir())
		}, "is gone"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := "d-" + tt.name
			pid, exited := labtest.IdleQEMU(t, labDir(name))
			r := record{Name: name}
			tt.damage(t, r, pid)

			sts, err := List()
			if err != nil {
				t.Fatal(err)
			}
			var st *Status
			for i := range sts {
				if sts[i].Name == name {
					st = &sts[i]
				}
			}
			if st == nil || st.State != "running" || st.PID != pid || !strings.Contains(st.Problem, tt.want) {
				t.Errorf("List() entry = %+v, want running with pid %d and a problem saying %q", st, pid, tt.want)
			}
			if _, err := Up(context.Background(), Config{Name: name}); err == nil || !strings.Contains(err.Error(), "already running") {
				t.Errorf("Up over a running QEMU = %v, want 'already running'", err)
			}
			if _, err := Get(context.Background(), name); err == nil || !strings.Contains(err.Error(), "klasy lab down "+name) {
				t.Errorf("Get = %v, want an error saying to stop it with lab down", err)
			}
			var progress bytes.Buffer
			if err := Down(context.Background(), name, &progress); err != nil {
				t.Fatalf("Down: %v\n%s", err, progress.String())
			}
			select {
			case <-exited:
			case <-time.After(5 * time.Second):
				t.Fatalf("QEMU still runs after Down:\n%s", progress.String())
			}
			if _, err := os.Stat(r.dir()); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("state left after Down: %v", err)
			}
			t.Logf("down said: %s", strings.TrimSpace(progress.String()))
		})
	}
}

// A Booter's QEMU names Files.AgentSocket in its agent chardev, as Files
// says: that must be what tells the lab's QEMU from others.
func TestFilesAgentSocketFindsQEMU(t *testing.T) {
	t.Setenv("KLASY_LAB_DIR", "/labs")
	r := record{Name: "x"}
	if arg := "socket,id=agent,path=" + r.files().AgentSocket + ",server=on,wait=off"; !strings.HasPrefix(arg, qemuAgentArg(r.dir())) {
		t.Errorf("a chardev on Files.AgentSocket, %q, is not what finds the lab's QEMU, %q", arg, qemuAgentArg(r.dir()))
	}
}

// TestKernelOf: the source-level queries' --lab reads the kernel from
// the lab's record, reaching no agent; no lab, or a record without a
// vmlinux, is an error that says what to do.
func TestKernelOf(t *testing.T) {
	t.Setenv("KLASY_LAB_DIR", t.TempDir())
	if _, err := KernelOf("nosuch"); err == nil || !strings.Contains(err.Error(), "lab nosuch: no such lab (start it with: klasy lab up nosuch)") {
		t.Errorf("KernelOf(nosuch) = %v, want no such lab", err)
	}
	if _, err := KernelOf("../x"); err == nil {
		t.Error("KernelOf(../x) took a bad name")
	}
	r := record{Name: "a", PID: 1 << 30, Kernel: Kernel{Flavor: Debian, Vmlinux: "/k/vmlinux"}}
	if err := os.MkdirAll(r.dir(), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := r.save(); err != nil {
		t.Fatal(err)
	}
	if k, err := KernelOf("a"); err != nil || k.Vmlinux != "/k/vmlinux" {
		t.Errorf("KernelOf(a) = %+v, %v; want /k/vmlinux", k, err)
	}
	r.Kernel.Vmlinux = ""
	if err := r.save(); err != nil {
		t.Fatal(err)
	}
	if _, err := KernelOf("a"); err == nil || !strings.Contains(err.Error(), "lab a: its lab.json names no vmlinux") {
		t.Errorf("KernelOf(a) without a vmlinux = %v", err)
	}
}
