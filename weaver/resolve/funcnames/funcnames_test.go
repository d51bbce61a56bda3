package funcnames

import (
	"strings"
	"testing"

	"github.com/klasy/klasy/pattern"
	"github.com/klasy/klasy/weaver/internal/weavertest"
)

// TestMatch: a syscall by its usual name is the DWARF function at the
// symbol's address; a pattern with % matches DWARF names only.
func TestMatch(t *testing.T) {
	x := weavertest.DebianIndex(t)
	for _, tt := range []struct{ p, want, alias string }{
		{"__x64_sys_getppid", "__do_sys_getppid", "__x64_sys_getppid is __do_sys_getppid"},
		{"__x64_sys_getpid", "__do_sys_getpid", "__x64_sys_getpid is __do_sys_getpid"},
		// SYSCALL_DEFINE3's wrapper has DWARF of its own in Debian's.
		{"__x64_sys_read", "__x64_sys_read", ""},
		{"vfs_read", "vfs_read", ""},
		{"__x64_sys_getppi%", "", ""},
		{"no_such_function_at_all", "", ""},
	} {
		names, alias := Match(x, pattern.MustCompile(tt.p, pattern.Pointcut))
		if got := strings.Join(names, ","); got != tt.want || !strings.HasPrefix(alias, tt.alias) || (tt.alias == "") != (alias == "") {
			t.Errorf("Match(%s) = %q, %q; want %q, %q", tt.p, got, alias, tt.want, tt.alias)
		}
	}
}

// TestUnknown: an unknown name gets the image's path and the nearest
// names, DWARF's and the ELF aliases.
func TestUnknown(t *testing.T) {
	x := weavertest.DebianIndex(t)
	for _, tt := range []struct{ name, want string }{
		{"vfs_raed", "no function is called vfs_raed in " + x.Image().Path + "; did you mean vfs_read"},
		{"__x64_sys_getppdi", "; did you mean __x64_sys_getpid, __x64_sys_getppid"},
		{"no_such_function_at_all", "no function is called no_such_function_at_all in " + x.Image().Path},
		{"zz%", "no function matches zz% in "},
	} {
		if got := Unknown(x, tt.name); !strings.Contains(got, tt.want) {
			t.Errorf("Unknown(%s) = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestNearestFiles(t *testing.T) {
	files := []string{"/build/linux/fs/read_write.c", "fs/namei.c", "include/linux/fs.h"}
	for _, tt := range []struct{ spec, want string }{
		{"fs/raed_write.c", "; did you mean fs/read_write.c?"},
		{"read_wirte.c", "; did you mean read_write.c?"},
		{"fs/namie.c", "; did you mean fs/namei.c?"},
		{"net/core/dev.c", ""},
	} {
		if got := NearestFiles(tt.spec, files); got != tt.want {
			t.Errorf("NearestFiles(%s) = %q, want %q", tt.spec, got, tt.want)
		}
	}
}
