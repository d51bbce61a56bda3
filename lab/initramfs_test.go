package lab

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/klasy/klasy/lab/initramfs"
)

// TestInitramfsForDebianKernel builds the real guest initramfs and checks
// what the guest needs is in it, that busybox was not replaced by a link
// to itself, and that a second build is a cache hit with the same bytes.
func TestInitramfsForDebianKernel(t *testing.T) {
	k := needLab(t, Debian)
	agent := testAgent(t)
	t.Setenv("KLASY_CACHE", t.TempDir())
	path, err := Initramfs(k, agent)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got, err := initramfs.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if bb := got["bin/busybox"]; bb.Mode != syscall.S_IFREG|0o755 || len(bb.Data) < 100000 {
		t.Errorf("bin/busybox is mode %o, %d bytes: want the binary itself", bb.Mode, len(bb.Data))
	}
	for _, p := range []string{"init", "bin/sh", "sbin/insmod", "sbin/ip"} {
		if e := got[p]; e.Mode != syscall.S_IFLNK|0o777 || string(e.Data) != "/bin/busybox" {
			t.Errorf("%s: mode %o -> %q, want a link to /bin/busybox", p, e.Mode, e.Data)
		}
	}
	if e := got["bin/klasy"]; e.Mode != syscall.S_IFREG|0o755 || len(e.Data) == 0 {
		t.Errorf("bin/klasy missing")
	}
	mods := strings.Fields(string(got["etc/klasy/modules"].Data))
	for _, m := range mods {
		if _, ok := got[filepath.Join("lib/modules", k.Release, m)]; !ok {
			t.Errorf("module %s listed but not in the archive", m)
		}
	}
	if !strings.Contains(string(got["etc/inittab"].Data), "::respawn:/etc/klasy/agent") {
		t.Errorf("inittab does not start the agent:\n%s", got["etc/inittab"].Data)
	}
	if w := got["etc/klasy/agent"]; w.Mode != syscall.S_IFREG|0o755 || !strings.Contains(string(w.Data), "/bin/klasy agent --device ") || !strings.Contains(string(w.Data), "--allow-run") {
		t.Errorf("etc/klasy/agent (mode %o) does not run klasy agent --device ... --allow-run:\n%s", w.Mode, w.Data)
	}
	// Debian's kernel has virtio_console as a module: the agent's fast line.
	if !slices.ContainsFunc(mods, func(m string) bool { return initramfs.ModName(m) == agentPortModule }) {
		t.Errorf("etc/klasy/modules lacks %s: %v", agentPortModule, mods)
	}
	again, err := Initramfs(k, agent)
	if err != nil || again != path {
		t.Errorf("second Initramfs = %s, %v; want the cached %s", again, err, path)
	}
	// A different agent binary gives a new archive.
	changed := filepath.Join(t.TempDir(), "klasy")
	agentBytes, err := os.ReadFile(agent)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(changed, append(agentBytes, 0), 0o755); err != nil {
		t.Fatal(err)
	}
	if other, err := Initramfs(k, changed); err != nil || other == path {
		t.Errorf("Initramfs with a changed agent = %s, %v; want a new archive", other, err)
	}
	// Rebuilding from scratch gives identical bytes.
	os.Remove(path)
	if _, err := Initramfs(k, agent); err != nil {
		t.Fatal(err)
	}
	if data2, _ := os.ReadFile(path); !bytes.Equal(data, data2) {
		t.Error("rebuilding the initramfs from the same inputs gave different bytes")
	}
}

func TestAgentMustBeStatic(t *testing.T) {
	k := needLab(t, Debian)
	t.Setenv("KLASY_CACHE", t.TempDir())
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip(err)
	}
	if _, err := Initramfs(k, sh); err == nil || !strings.Contains(err.Error(), "dynamically linked") {
		t.Errorf("Initramfs with a dynamic agent binary: %v, want a 'dynamically linked' error", err)
	}
}
