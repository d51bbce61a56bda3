package initramfs

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

// readNewc parses a newc archive back into path -> entry.
func readNewc(t *testing.T, data []byte) map[string]Entry {
	t.Helper()
	out, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestCpioRoundTripAndDeterminism(t *testing.T) {
	build := func() []byte {
		a := New()
		a.File("etc/klasy/rcS", 0o755, []byte("#!/bin/sh\necho hi\n"))
		a.Symlink("bin/sh", "/bin/busybox")
		a.Chardev("dev/console", 0o600, 5, 1)
		a.File("odd", 0o644, []byte("12345")) // forces padding
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
		if e.Mode != tt.mode || string(e.Data) != tt.data {
			t.Errorf("%s: mode %o data %q, want %o %q", tt.path, e.Mode, e.Data, tt.mode, tt.data)
		}
	}
	if c := got["dev/console"]; c.Major != 5 || c.Minor != 1 {
		t.Errorf("dev/console is %d:%d, want 5:1", c.Major, c.Minor)
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
	a := New()
	a.File("x", 0o644, nil)
	a.File("x", 0o644, nil)
}
