package lab

import (
	"bytes"
	"crypto/sha256"
	"debug/elf"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

//go:embed guest/rcS
var guestRcS []byte

//go:embed guest/inittab
var guestInittab []byte

//go:embed guest/agent
var guestAgent []byte

// initramfsFormat changes whenever the layout built below changes, so
// cached archives of an older layout are not reused.
const initramfsFormat = "klasy-initramfs-2"

// guestInputs are the host files an initramfs is made of.
type guestInputs struct {
	kernel  Kernel
	agent   string // static klasy binary, runs `klasy agent` in the guest
	busybox string // static busybox
	modules []string
}

// findBusybox returns a statically linked busybox (Debian's busybox-static).
func findBusybox() (string, error) {
	for _, p := range []string{"/bin/busybox", "/usr/bin/busybox"} {
		if err := checkStatic(p); err == nil {
			return p, nil
		}
	}
	if p, err := exec.LookPath("busybox"); err == nil {
		if err := checkStatic(p); err != nil {
			return "", fmt.Errorf("%w (install busybox-static)", err)
		}
		return p, nil
	}
	return "", errors.New("no static busybox found (install busybox-static)")
}

// checkStatic reports an error unless path is a statically linked ELF
// executable, the only kind that runs in the bare initramfs.
func checkStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked; the guest needs a static binary", path)
		}
	}
	return nil
}

// AgentBinary finds the static klasy binary that runs the agent in the
// guest: $KLASY_LAB_AGENT, else this executable when it is a static
// klasy, else $KLASY_CACHE/lab/klasy (installed by make lab-guest).
func AgentBinary() (string, error) {
	if p := os.Getenv("KLASY_LAB_AGENT"); p != "" {
		return p, checkStatic(p)
	}
	if exe, err := os.Executable(); err == nil && filepath.Base(exe) == "klasy" && checkStatic(exe) == nil {
		return exe, nil
	}
	p := filepath.Join(CacheDir(), "lab", "klasy")
	if err := checkStatic(p); err != nil {
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
	bb, err := findBusybox()
	if err != nil {
		return "", err
	}
	if err := checkStatic(agent); err != nil {
		return "", err
	}
	mods, err := resolveModules(k.ModulesDir, bootModules)
	if err != nil {
		return "", err
	}
	if all, err := resolveModules(k.ModulesDir, append(bootModules[:len(bootModules):len(bootModules)], agentPortModule)); err == nil {
		mods = all
	}
	in := guestInputs{kernel: k, agent: agent, busybox: bb, modules: mods}
	key, err := in.key()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(CacheDir(), "lab", "initramfs")
	prefix := k.Flavor + "-" + k.Release + "-"
	path := filepath.Join(dir, prefix+key[:16]+".cpio")
	if reuse(path) {
		return path, nil
	}
	arch, err := in.archive()
	if err != nil {
		return "", err
	}
	return writeCached(dir, path, prefix, arch)
}

func (in guestInputs) key() (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00", initramfsFormat, in.kernel.Flavor, in.kernel.Release)
	h.Write(guestRcS)
	h.Write(guestInittab)
	h.Write(guestAgent)
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

func (in guestInputs) archive() (*cpioArchive, error) {
	a := newCpio()
	for _, d := range []string{"dev", "proc", "sys", "tmp", "run", "root", "etc", "mnt", "var/log", "lib", "bin", "sbin", "usr/bin", "usr/sbin"} {
		a.dir(d)
	}
	// The kernel opens /dev/console for init before devtmpfs is mounted.
	a.chardev("dev/console", 0o600, 5, 1)
	a.chardev("dev/null", 0o666, 1, 3)

	bb, err := os.ReadFile(in.busybox)
	if err != nil {
		return nil, err
	}
	a.file("bin/busybox", 0o755, bb)
	if err := addApplets(a, in.busybox, "/bin/busybox"); err != nil {
		return nil, err
	}
	a.symlink("init", "/bin/busybox")

	agent, err := os.ReadFile(in.agent)
	if err != nil {
		return nil, err
	}
	a.file("bin/klasy", 0o755, agent)
	a.file("etc/inittab", 0o644, guestInittab)
	a.file("etc/klasy/rcS", 0o755, guestRcS)
	a.file("etc/klasy/agent", 0o755, guestAgent)
	a.file("etc/klasy/modules", 0o644, []byte(strings.Join(in.modules, "\n")+"\n"))
	a.file("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/bin/sh\n"))
	a.file("etc/group", 0o644, []byte("root:x:0:\n"))
	modRoot := filepath.Join("lib", "modules", in.kernel.Release)
	for _, m := range in.modules {
		data, err := os.ReadFile(filepath.Join(in.kernel.ModulesDir, m))
		if err != nil {
			return nil, err
		}
		a.file(filepath.Join(modRoot, m), 0o644, data)
	}
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "%s\n", in.kernel.Release)
	a.file("etc/klasy/kernel-release", 0o644, buf.Bytes())
	return a, nil
}

// addApplets adds a link to target (the busybox binary's path in the
// guest) for each applet of the busybox binary bb, where busybox puts it.
func addApplets(a *cpioArchive, bb, target string) error {
	out, err := exec.Command(bb, "--list-full").Output()
	if err != nil {
		return fmt.Errorf("listing busybox applets: %w", err)
	}
	for _, l := range strings.Fields(string(out)) {
		// The list names busybox itself: a link there would replace
		// the binary with a link to itself.
		if l == "bin/busybox" || filepath.Base(l) == "busybox" || a.has(l) {
			continue
		}
		a.symlink(l, target)
	}
	return nil
}
