package initramfs

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/klasy/klasy/internal/atomicfile"
)

// Reuse reports whether the cached archive path exists, and marks it
// used, to keep it from WriteCached's clean-up.
func Reuse(path string) bool {
	if _, err := os.Stat(path); err != nil {
		return false
	}
	now := time.Now()
	os.Chtimes(path, now, now)
	return true
}

// WriteCached writes an archive to path (in dir) atomically and removes
// the archives of the same prefix not used for an hour: they are
// outdated (QEMU reads the initramfs into guest memory when it starts,
// so running labs do not need theirs); recent ones may be about to boot
// in another process with another klasy binary.
func WriteCached(dir, path, prefix string, a *Archive) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if err := atomicfile.Write(path, func(w io.Writer) error { _, err := a.WriteTo(w); return err }); err != nil {
		return "", fmt.Errorf("writing %s: %w", path, err)
	}
	old, _ := filepath.Glob(filepath.Join(dir, prefix+"*.cpio"))
	for _, o := range old {
		if fi, err := os.Stat(o); err == nil && o != path && time.Since(fi.ModTime()) > time.Hour {
			os.Remove(o)
		}
	}
	return path, nil
}
