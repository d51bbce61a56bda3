package lab

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A system lab's image is found only when it fits the kernel, and the
// error says how to get one that does; QEMU gets the image as a
// throw-away snapshot and the kernel's directory read-only.
func TestSystemImage(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("KLASY_CACHE", cache)
	k := Kernel{Flavor: Debian, Release: "6.1.0-56-amd64", Vmlinux: "/k/vmlinux"}
	if _, err := FindSystemImage(k); err == nil || !strings.Contains(err.Error(), "run make system-lab") {
		t.Errorf("no image: error %v, want it to say run make system-lab", err)
	}
	dir := filepath.Join(cache, "system-lab", "image-x")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("image-x", filepath.Join(cache, "system-lab", "current")); err != nil {
		t.Fatal(err)
	}
	write := func(name, data string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("format", "klasy-system-image-0\n")
	write("abi", "6.1.0-55-amd64\n")
	write("root.img", "")
	if _, err := FindSystemImage(k); err == nil || !strings.Contains(err.Error(), `layout "klasy-system-image-0"`) {
		t.Errorf("old layout: error %v", err)
	}
	write("format", systemImageFormat+"\n")
	if _, err := FindSystemImage(k); err == nil || !strings.Contains(err.Error(), "6.1.0-55-amd64, the kernel is 6.1.0-56-amd64") {
		t.Errorf("other ABI: error %v", err)
	}
	write("abi", k.Release+"\n")
	if _, err := FindSystemImage(Kernel{Flavor: Built, Release: k.Release}); err == nil || !strings.Contains(err.Error(), "not the built one") {
		t.Errorf("built kernel: error %v", err)
	}
	img, err := FindSystemImage(k)
	if err != nil || img != filepath.Join(dir, "root.img") {
		t.Fatalf("FindSystemImage = %q, %v; want %s", img, err, filepath.Join(dir, "root.img"))
	}
	args := strings.Join(record{Name: "s", Kernel: k, System: img, SystemPort: 40123}.qemuArgs(), " ")
	for _, want := range []string{
		"file=" + img + ",format=raw,if=virtio,snapshot=on",
		"path=/k,mount_tag=kernel,security_model=none,readonly=on",
		"mount_tag=klasycache",
		"user,id=net0,hostfwd=tcp:127.0.0.1:40123-:7070",
	} {
		if !strings.Contains(args, want) {
			t.Errorf("QEMU's arguments lack %q:\n%s", want, args)
		}
	}
	if args := strings.Join(record{Name: "b", Kernel: k}.qemuArgs(), " "); strings.Contains(args, "virtfs") || strings.Contains(args, "hostfwd") {
		t.Errorf("a busybox lab got a system lab's arguments:\n%s", args)
	}
}
