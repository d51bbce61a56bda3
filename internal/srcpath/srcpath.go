// Package srcpath spells a kernel source file as perf does: relative to
// the source tree it is in (fs/read_write.c, include/linux/skbuff.h),
// whether the compiler recorded it relative to its build directory or
// absolute (a kernel built with O=, a module built against a headers
// package under /usr/src). The one rule every name klasy prints from an
// image's DWARF or from the plugin's records goes through.
package srcpath

import "strings"

// topDirs are the kernel tree's top-level source directories (usr/, the
// initramfs tooling, is left out: it would match /usr/src/...).
var topDirs = map[string]bool{
	"arch": true, "block": true, "certs": true, "crypto": true, "drivers": true,
	"fs": true, "include": true, "init": true, "io_uring": true, "ipc": true,
	"kernel": true, "lib": true, "mm": true, "net": true, "rust": true,
	"samples": true, "scripts": true, "security": true, "sound": true,
	"tools": true, "virt": true,
}

// Rel returns p relative to its kernel source tree: an absolute path
// loses what comes before its first component that is one of the
// tree's top-level directories with a file under it
// (/usr/src/linux-headers-6.1.0-56-common/include/linux/skbuff.h:
// include/linux/skbuff.h); a relative one its leading "./". A path in no
// kernel tree (an out-of-tree module's own file) is returned as it is.
func Rel(p string) string {
	if !strings.HasPrefix(p, "/") {
		return strings.TrimPrefix(p, "./")
	}
	parts := strings.Split(p, "/")
	// parts[0] is "" (the root): a top directory right under / is a
	// system directory (/lib, /init), not a tree's.
	for i := 2; i < len(parts)-1; i++ {
		if topDirs[parts[i]] {
			return strings.Join(parts[i:], "/")
		}
	}
	return p
}
