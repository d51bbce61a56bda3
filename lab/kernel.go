package lab

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/klasy/klasy/internal/cachedir"
)

// Kernel flavors a lab can boot.
const (
	// Debian is Debian's own 6.1 kernel, fetched by `make debian-kernel`.
	Debian = "debian"
	// Built is Debian's linux-source-6.1 compiled with the klasy GCC
	// plugin and a small lab config, built by `make lab-kernel`.
	Built = "built"
	// Debug is Built with lockdep, KASAN and atomic-sleep checks
	// (scripts/lab-kernel-debug.config), built by `make lab-kernel-debug`:
	// the runtime's lab tests run on it and fail on any report.
	Debug = "debug"
	// DebianRT is Debian's PREEMPT_RT 6.1 kernel of Debian's ABI, fetched
	// by `make debian-rt-kernel`.
	DebianRT = "debian-rt"
)

// Kernel is one bootable kernel and the files that belong to it.
type Kernel struct {
	Flavor  string // Debian, DebianRT, Built or Debug
	Release string // uname -r inside the guest, e.g. 6.1.0-56-amd64
	Image   string // what QEMU's -kernel boots (vmlinuz / bzImage)
	Vmlinux string // ELF with DWARF (and .debug_klasy for Built)
	// ModulesDir is lib/modules/<Release>: the kernel's own modules the
	// guest loads at boot (virtio, e1000...).
	ModulesDir string
	// BuildDir is the kbuild tree out-of-tree modules build against:
	// make -C BuildDir M=dir.
	BuildDir string
}

// CacheDir is where klasy keeps downloads and builds: $KLASY_CACHE, else
// $XDG_CACHE_HOME/klasy, else ~/.cache/klasy (the same rule as
// scripts/lib.sh).
func CacheDir() string { return cachedir.Root() }

// FindKernel locates the files of a kernel flavor in the cache. The error
// says which make target provides what is missing.
func FindKernel(flavor string) (Kernel, error) {
	switch flavor {
	case Debian, "":
		return findDebian(Debian, filepath.Join(CacheDir(), "debian", "current"), "run make debian-kernel")
	case DebianRT:
		return findDebian(DebianRT, filepath.Join(CacheDir(), "debian-rt", "current"), "run make debian-rt-kernel")
	case Built:
		return findBuilt(Built, filepath.Join(CacheDir(), "lab-kernel", "current"), "run make lab-kernel")
	case Debug:
		return findBuilt(Debug, filepath.Join(CacheDir(), "lab-kernel-debug", "current"), "run make lab-kernel-debug")
	}
	return Kernel{}, fmt.Errorf("unknown kernel flavor %q (want %q, %q, %q or %q)", flavor, Debian, DebianRT, Built, Debug)
}

func findDebian(flavor, dir, hint string) (Kernel, error) {
	abi, err := os.ReadFile(filepath.Join(dir, "abi"))
	if err != nil {
		return Kernel{}, fmt.Errorf("no Debian kernel in %s (%s): %w", dir, hint, err)
	}
	rel := strings.TrimSpace(string(abi))
	k := Kernel{
		Flavor:     flavor,
		Release:    rel,
		Image:      filepath.Join(dir, "vmlinuz"),
		Vmlinux:    filepath.Join(dir, "vmlinux"),
		ModulesDir: filepath.Join(dir, "root", "lib", "modules", rel),
		BuildDir:   filepath.Join(dir, "headers"),
	}
	return k, k.check(hint)
}

func findBuilt(flavor, dir, hint string) (Kernel, error) {
	rel, err := os.ReadFile(filepath.Join(dir, "release"))
	if err != nil {
		return Kernel{}, fmt.Errorf("no %s lab kernel in %s (%s): %w", flavor, dir, hint, err)
	}
	r := strings.TrimSpace(string(rel))
	k := Kernel{
		Flavor:     flavor,
		Release:    r,
		Image:      filepath.Join(dir, "bzImage"),
		Vmlinux:    filepath.Join(dir, "vmlinux"),
		ModulesDir: filepath.Join(dir, "modules", "lib", "modules", r),
		BuildDir:   filepath.Join(dir, "build"),
	}
	return k, k.check(hint)
}

func (k Kernel) check(hint string) error {
	for _, p := range []string{k.Image, k.ModulesDir, filepath.Join(k.BuildDir, "Makefile")} {
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("%s kernel %s incomplete (%s): %w", k.Flavor, k.Release, hint, err)
		}
	}
	return nil
}
