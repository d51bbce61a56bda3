// Package cachedir says where klasy keeps what it downloads and builds:
// $KLASY_CACHE, else $XDG_CACHE_HOME/klasy, else ~/.cache/klasy — the
// same rule as scripts/lib.sh, so the Go code finds what make fetched.
package cachedir

import (
	"os"
	"path/filepath"
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
