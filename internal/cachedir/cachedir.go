// Package cachedir says where klasy keeps what it downloads and builds:
// $KLASY_CACHE, else $XDG_CACHE_HOME/klasy, else ~/.cache/klasy — the
// same rule as scripts/lib.sh, so the Go code finds what make fetched.
// Lock serializes the processes that build into it.
package cachedir

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// Root returns klasy's cache directory (it may not exist yet).
func Root() string {
	if d := os.Getenv("KLASY_CACHE"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "klasy")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		home = os.TempDir()
	}
	return filepath.Join(home, ".cache", "klasy")
}

// Lock takes an exclusive lock on path, waiting for it: for what more
// than one process may build or change at once in the cache (a build
// that lands in a directory keyed by its inputs, the labs' state).
// unlock releases it.
func Lock(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}
