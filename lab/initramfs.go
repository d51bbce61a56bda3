package lab

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/klasy/klasy/lab/initramfs"
)

//go:embed guest/rcS
var guestRcS []byte

//go:embed guest/inittab
var guestInittab []byte

//go:embed guest/agent
var guestAgent []byte

//go:embed guest/sysinit
var guestSysinit []byte

//go:embed guest/sys-agent
var guestSysAgent []byte

// bootModules are the kernel modules the guest loads at boot, besides
// their dependencies: the PCI virtio transport, virtio networking and
// e1000. A kernel that has them built in needs none of them.
var bootModules = []string{"virtio_pci", "virtio_net", "e1000"}

// agentPortModule drives the virtio-serial port the agent prefers to the
// second UART; a kernel without it gets the UART.
const agentPortModule = "virtio_console"

// initramfsFormat changes whenever the layout built below changes, so
// cached archives of an older layout are not reused.
const initramfsFormat = "klasy-initramfs-2"

// guestInputs are the host files an initramfs is made of.
type guestInputs struct {
	kernel  Kernel
	agent   string // static klasy binary, runs `klasy agent` in the guest
	busybox string // static busybox
	modules []string
	// system: the first stage of a Debian system lab (system.go), which
	// mounts the root image and starts its systemd, instead of busybox
	// init.
	system bool
}

// AgentBinary finds the static klasy binary that runs the agent in the
// guest: $KLASY_LAB_AGENT, else this executable when it is a static
// klasy, else $KLASY_CACHE/lab/klasy (installed by make lab-guest).
func AgentBinary() (string, error) {
	if p := os.Getenv("KLASY_LAB_AGENT"); p != "" {
		return p, initramfs.CheckStatic(p)
	}
	if exe, err := os.Executable(); err == nil && filepath.Base(exe) == "klasy" && initramfs.CheckStatic(exe) == nil {
		return exe, nil
	}
	p := filepath.Join(CacheDir(), "lab", "klasy")
	if err := initramfs.CheckStatic(p); err != nil {
		return "", fmt.Errorf("no static klasy binary for the guest agent: build this one with CGO_ENABLED=0, set KLASY_LAB_AGENT, or run make lab-guest (%v)", err)
	}
	return p, nil
}

// Initramfs returns the path of the guest initramfs for kernel k with
// agent as the guest's klasy binary, building it when no cached archive
// matches the inputs. The archive is keyed by a hash of everything in it,
// so a new klasy binary, init script, busybox or module set gives a new
// archive and identical inputs give identical bytes.
func Initramfs(k Kernel, agent string) (string, error) {
	return buildInitramfs(k, agent, false)
}

func buildInitramfs(k Kernel, agent string, system bool) (string, error) {
	bb, err := initramfs.FindBusybox()
	if err != nil {
		return "", err
	}
	if err := initramfs.CheckStatic(agent); err != nil {
		return "", err
	}
	boot := bootModules[:len(bootModules):len(bootModules)]
	if system {
		boot = append(boot, systemModules...)
	}
	mods, err := initramfs.ResolveModules(k.ModulesDir, boot)
	if err != nil {
		return "", err
	}
	if all, err := initramfs.ResolveModules(k.ModulesDir, append(boot, agentPortModule)); err == nil {
		mods = all
	}
	in := guestInputs{kernel: k, agent: agent, busybox: bb, modules: mods, system: system}
	key, err := in.key()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(CacheDir(), "lab", "initramfs")
	prefix := k.Flavor + "-" + k.Release + "-"
	if system {
		prefix += "system-"
	}
	path := filepath.Join(dir, prefix+key[:16]+".cpio")
	if initramfs.Reuse(path) {
		return path, nil
	}
	arch, err := in.archive()
	if err != nil {
		return "", err
	}
	return initramfs.WriteCached(dir, path, prefix, arch)
}

func (in guestInputs) key() (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00", initramfsFormat, in.kernel.Flavor, in.kernel.Release)
	h.Write(guestRcS)
	h.Write(guestInittab)
	h.Write(guestAgent)
	if in.system {
		h.Write([]byte("\x00system\x00"))
		h.Write(guestSysinit)
		h.Write(guestSysAgent)
	}
	files := []string{in.agent, in.busybox}
	for _, m := range in.modules {
		files = append(files, filepath.Join(in.kernel.ModulesDir, m))
	}
	for _, f := range files {
		r, err := os.Open(f)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "\x00%s\x00", filepath.Base(f))
		_, err = io.Copy(h, r)
		r.Close()
		if err != nil {
			return "", fmt.Errorf("reading %s: %w", f, err)
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func (in guestInputs) archive() (*initramfs.Archive, error) {
	a := initramfs.New()
	for _, d := range []string{"dev", "proc", "sys", "tmp", "run", "root", "etc", "mnt", "var/log", "lib", "bin", "sbin", "usr/bin", "usr/sbin"} {
		a.Dir(d)
	}
	// The kernel opens /dev/console for init before devtmpfs is mounted.
	a.Chardev("dev/console", 0o600, 5, 1)
	a.Chardev("dev/null", 0o666, 1, 3)

	bb, err := os.ReadFile(in.busybox)
	if err != nil {
		return nil, err
	}
	a.File("bin/busybox", 0o755, bb)
	if err := initramfs.AddApplets(a, in.busybox, "/bin/busybox"); err != nil {
		return nil, err
	}
	if in.system {
		a.File("init", 0o755, guestSysinit)
		a.File("etc/klasy/sys-agent", 0o755, guestSysAgent)
	} else {
		a.Symlink("init", "/bin/busybox")
	}

	agent, err := os.ReadFile(in.agent)
	if err != nil {
		return nil, err
	}
	a.File("bin/klasy", 0o755, agent)
	a.File("etc/inittab", 0o644, guestInittab)
	a.File("etc/klasy/rcS", 0o755, guestRcS)
	a.File("etc/klasy/agent", 0o755, guestAgent)
	a.File("etc/klasy/modules", 0o644, []byte(strings.Join(in.modules, "\n")+"\n"))
	a.File("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/bin/sh\n"))
	a.File("etc/group", 0o644, []byte("root:x:0:\n"))
	modRoot := filepath.Join("lib", "modules", in.kernel.Release)
	for _, m := range in.modules {
		data, err := os.ReadFile(filepath.Join(in.kernel.ModulesDir, m))
		if err != nil {
			return nil, err
		}
		a.File(filepath.Join(modRoot, m), 0o644, data)
	}
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "%s\n", in.kernel.Release)
	a.File("etc/klasy/kernel-release", 0o644, buf.Bytes())
	return a, nil
}
