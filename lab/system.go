package lab

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
)

// A Debian system lab (Config.System) boots Debian's kernel into a
// debootstrap'd bookworm root with systemd, gcc-12, make and Debian's
// headers for that kernel (scripts/build-system-lab.sh builds it once into
// $KLASY_CACHE/system-lab). The root is an ext4 image QEMU opens with
// snapshot=on: the guest writes to a throw-away overlay, so every boot
// starts from the image as built and several labs share it. The kernel's
// -dbg vmlinux is shared read-only from the host over virtio-9p and
// appears at /usr/lib/debug/boot/vmlinux-$(uname -r), where Debian's -dbg
// package puts it; klasy run in the guest with no --lab finds it there.
// The first stage is this package's busybox initramfs (guest/sysinit);
// the agent runs as a systemd service, so the host drives the lab as any
// other.

// systemModules are what the first stage of a system lab loads besides
// bootModules: the root's disk and file system (ext4 checksums with
// crc32c, which it finds at mount time, not as a module dependency), and
// the 9p share.
var systemModules = []string{"virtio_blk", "crc32c_generic", "ext4", "9pnet_virtio", "9p"}

// systemImageFormat is the layout scripts/build-system-lab.sh writes.
const systemImageFormat = "klasy-system-image-1"

// systemShareTag names the 9p share of the kernel's directory (its
// vmlinux) in QEMU's command line and the guest's mount.
const systemShareTag = "kernel"

// FindSystemImage returns the root image of a Debian system lab for
// kernel k; the error says how to build it.
func FindSystemImage(k Kernel) (string, error) {
	dir := filepath.Join(CacheDir(), "system-lab", "current")
	hint := "run make system-lab"
	if k.Flavor != Debian {
		return "", fmt.Errorf("a system lab boots Debian's kernel, not the %s one", k.Flavor)
	}
	format, err := os.ReadFile(filepath.Join(dir, "format"))
	if err != nil {
		return "", fmt.Errorf("no Debian system lab image in %s (%s): %w", dir, hint, err)
	}
	if got := strings.TrimSpace(string(format)); got != systemImageFormat {
		return "", fmt.Errorf("the system lab image in %s has layout %q, want %q (%s)", dir, got, systemImageFormat, hint)
	}
	abi, err := os.ReadFile(filepath.Join(dir, "abi"))
	if err != nil {
		return "", fmt.Errorf("system lab image in %s incomplete (%s): %w", dir, hint, err)
	}
	if got := strings.TrimSpace(string(abi)); got != k.Release {
		return "", fmt.Errorf("the system lab image holds the headers and modules of %s, the kernel is %s (%s)", got, k.Release, hint)
	}
	if err := os.MkdirAll(systemGuestCache(), 0o755); err != nil {
		return "", err
	}
	img := filepath.Join(dir, "root.img")
	if _, err := os.Stat(img); err != nil {
		return "", fmt.Errorf("system lab image incomplete (%s): %w", hint, err)
	}
	// The resolved path: QEMU keeps it open for the lab's life while a
	// rebuild may move current to a new image.
	return filepath.EvalSymlinks(img)
}

// systemCacheTag names the 9p share of the guest's klasy cache: root's
// ~/.cache/klasy in the guest is $KLASY_CACHE/system-lab/guest-cache on
// the host, kept from boot to boot as a user's cache is from run to run,
// so only a lab's first weave indexes the vmlinux and builds the runtime
// module (about 2 and 5 minutes under TCG).
const systemCacheTag = "klasycache"

func systemGuestCache() string { return filepath.Join(CacheDir(), "system-lab", "guest-cache") }

// systemArgs are QEMU's arguments for a system lab's root image, kernel
// share and guest cache.
func (r record) systemArgs() []string {
	return []string{
		"-virtfs", "local,path=" + systemGuestCache() + ",mount_tag=" + systemCacheTag + ",security_model=none",
		"-drive", "file=" + r.System + ",format=raw,if=virtio,snapshot=on",
		"-virtfs", "local,path=" + filepath.Dir(r.Kernel.Vmlinux) + ",mount_tag=" + systemShareTag +
			",security_model=none,readonly=on",
	}
}

// SystemAgentPort is the guest's TCP port a system lab forwards from the
// host: where the klasy agent service of klasy's Debian package listens.
const SystemAgentPort = 7070

// SystemAgentAddr returns the host's address (127.0.0.1:PORT) of the
// system lab guest's port SystemAgentPort; "" for another lab.
func (l *Lab) SystemAgentAddr() string {
	if l.rec.SystemPort == 0 {
		return ""
	}
	return fmt.Sprintf("127.0.0.1:%d", l.rec.SystemPort)
}

// systemForward is what the user network's -netdev gets for a system
// lab: the forward of SystemAgentAddr.
func (r record) systemForward() string {
	if r.SystemPort == 0 {
		return ""
	}
	return fmt.Sprintf(",hostfwd=tcp:127.0.0.1:%d-:%d", r.SystemPort, SystemAgentPort)
}

// freePort returns a TCP port of 127.0.0.1 nothing listens on now.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port for the system lab's agent: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
