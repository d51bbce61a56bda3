package lab

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// readNewc parses a newc archive back into path -> entry, checking the
// format's magic, alignment and trailer as the kernel does.
func readNewc(t *testing.T, data []byte) map[string]cpioEntry {
	t.Helper()
	out := map[string]cpioEntry{}
	off := 0
	field := func(i int) uint32 {
		v, err := strconv.ParseUint(string(data[off+6+8*i:off+14+8*i]), 16, 32)
		if err != nil {
			t.Fatalf("offset %d: bad header field %d: %v", off, i, err)
		}
		return uint32(v)
	}
	align := func(n int) int { return (n + 3) &^ 3 }
	for {
		if off+110 > len(data) || string(data[off:off+6]) != "070701" {
			t.Fatalf("offset %d: no newc header", off)
		}
		mode, size, rmaj, rmin, nsize := field(1), int(field(6)), field(9), field(10), int(field(11))
		name := string(data[off+110 : off+110+nsize-1])
		body := align(off + 110 + nsize)
		if name == "TRAILER!!!" {
			return out
		}
		out[name] = cpioEntry{mode: mode, data: data[body : body+size], major: rmaj, minor: rmin}
		off = align(body + size)
	}
}

func TestCpioRoundTripAndDeterminism(t *testing.T) {
	build := func() []byte {
		a := newCpio()
		a.file("etc/klasy/rcS", 0o755, []byte("#!/bin/sh\necho hi\n"))
		a.symlink("bin/sh", "/bin/busybox")
		a.chardev("dev/console", 0o600, 5, 1)
		a.file("odd", 0o644, []byte("12345")) // forces padding
		var buf bytes.Buffer
		if _, err := a.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	data := build()
	if !bytes.Equal(data, build()) {
		t.Fatal("two archives of the same entries differ")
	}
	got := readNewc(t, data)
	tests := []struct {
		path string
		mode uint32
		data string
	}{
		{"etc", sIFDIR | 0o755, ""},
		{"etc/klasy", sIFDIR | 0o755, ""},
		{"etc/klasy/rcS", sIFREG | 0o755, "#!/bin/sh\necho hi\n"},
		{"bin/sh", sIFLNK | 0o777, "/bin/busybox"},
		{"dev/console", sIFCHR | 0o600, ""},
		{"odd", sIFREG | 0o644, "12345"},
	}
	for _, tt := range tests {
		e, ok := got[tt.path]
		if !ok {
			t.Errorf("%s missing from the archive", tt.path)
			continue
		}
		if e.mode != tt.mode || string(e.data) != tt.data {
			t.Errorf("%s: mode %o data %q, want %o %q", tt.path, e.mode, e.data, tt.mode, tt.data)
		}
	}
	if c := got["dev/console"]; c.major != 5 || c.minor != 1 {
		t.Errorf("dev/console is %d:%d, want 5:1", c.major, c.minor)
	}

	// The system's cpio, when installed, agrees on the listing.
	if _, err := exec.LookPath("cpio"); err == nil {
		cmd := exec.Command("cpio", "-it", "--quiet")
		cmd.Stdin = bytes.NewReader(data)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("cpio -it: %v", err)
		}
		if !strings.Contains(string(out), "etc/klasy/rcS\n") || !strings.Contains(string(out), "dev/console\n") {
			t.Errorf("cpio -it lists:\n%s", out)
		}
	}
}

func TestCpioDuplicatePathPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("adding a path twice did not panic")
		}
	}()
	a := newCpio()
	a.file("x", 0o644, nil)
	a.file("x", 0o644, nil)
}

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
	got := readNewc(t, data)
	if bb := got["bin/busybox"]; bb.mode != sIFREG|0o755 || len(bb.data) < 100000 {
		t.Errorf("bin/busybox is mode %o, %d bytes: want the binary itself", bb.mode, len(bb.data))
	}
	for _, p := range []string{"init", "bin/sh", "sbin/insmod", "sbin/ip"} {
		if e := got[p]; e.mode != sIFLNK|0o777 || string(e.data) != "/bin/busybox" {
			t.Errorf("%s: mode %o -> %q, want a link to /bin/busybox", p, e.mode, e.data)
		}
	}
	if e := got["bin/klasy"]; e.mode != sIFREG|0o755 || len(e.data) == 0 {
		t.Errorf("bin/klasy missing")
	}
	mods := strings.Fields(string(got["etc/klasy/modules"].data))
	for _, m := range mods {
		if _, ok := got[filepath.Join("lib/modules", k.Release, m)]; !ok {
			t.Errorf("module %s listed but not in the archive", m)
		}
	}
	if !strings.Contains(string(got["etc/inittab"].data), "::respawn:/etc/klasy/agent") {
		t.Errorf("inittab does not start the agent:\n%s", got["etc/inittab"].data)
	}
	if w := got["etc/klasy/agent"]; w.mode != sIFREG|0o755 || !strings.Contains(string(w.data), "/bin/klasy agent --device ") || !strings.Contains(string(w.data), "--allow-run") {
		t.Errorf("etc/klasy/agent (mode %o) does not run klasy agent --device ... --allow-run:\n%s", w.mode, w.data)
	}
	// Debian's kernel has virtio_console as a module: the agent's fast line.
	if !slices.ContainsFunc(mods, func(m string) bool { return modName(m) == agentPortModule }) {
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
