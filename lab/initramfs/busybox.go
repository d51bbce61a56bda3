package initramfs

import (
	"debug/elf"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
)

// FindBusybox returns a statically linked busybox (Debian's busybox-static).
func FindBusybox() (string, error) {
	for _, p := range []string{"/bin/busybox", "/usr/bin/busybox"} {
		if err := CheckStatic(p); err == nil {
			return p, nil
		}
	}
	if p, err := exec.LookPath("busybox"); err == nil {
		if err := CheckStatic(p); err != nil {
			return "", fmt.Errorf("%w (install busybox-static)", err)
		}
		return p, nil
	}
	return "", errors.New("no static busybox found (install busybox-static)")
}

// CheckStatic reports an error unless path is a statically linked ELF
// executable, the only kind that runs in the bare initramfs.
func CheckStatic(path string) error {
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

// AddApplets adds a link to target (the busybox binary's path in the
// guest) for each applet of the busybox binary bb, where busybox puts it.
func AddApplets(a *Archive, bb, target string) error {
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
		a.Symlink(l, target)
	}
	return nil
}
