package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klasy/klasy/internal/testenv"
	"github.com/klasy/klasy/lab"
)

// The built lab kernel is compiled with O= from a tree under
// $KLASY_CACHE: its DWARF and the plugin's records name files by
// absolute path. Every command prints them as perf does, relative to
// the source tree (issue 23 #9).
func TestSourcePathsRelative(t *testing.T) {
	if testing.Short() {
		t.Skip("reads the built lab kernel's vmlinux")
	}
	k, err := lab.FindKernel(lab.Built)
	testenv.Need(t, "lab-kernel", err)
	aspect := filepath.Join(t.TempDir(), "rw.klasy")
	src := `<aspect><advice><pointcut>execution(vfs_read) OR access(file.f_pos)</pointcut><before>STORE_DATA(1);</before></advice></aspect>`
	if err := os.WriteFile(aspect, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"lines", k.Vmlinux, "vfs_read"},
		{"lines", "--json", k.Vmlinux, "vfs_read"},
		{"funcs", k.Vmlinux, "vfs_read"},
		{"funcs", "--json", k.Vmlinux, "vfs_read"},
		{"vars", k.Vmlinux, "vfs_read:454"},
		{"accesses", k.Vmlinux, "file.f_pos"},
		{"accesses", "--json", k.Vmlinux, "file.f_pos"},
		{"list", "--vmlinux", k.Vmlinux, aspect},
		{"list", "--json", "--vmlinux", k.Vmlinux, aspect},
	} {
		out, errs, err := runKlasy(t, args...)
		if err != nil {
			t.Errorf("klasy %s: %v\n%s", strings.Join(args, " "), err, errs)
			continue
		}
		out = strings.ReplaceAll(out, k.Vmlinux, "VMLINUX") // list names the image
		if args[0] != "vars" && !strings.Contains(out, "fs/read_write.c") {
			t.Errorf("klasy %s names no fs/read_write.c:\n%s", strings.Join(args, " "), out)
		}
		for _, root := range []string{k.BuildDir, filepath.Dir(k.BuildDir), "linux-source-6.1/src", "/root/", "/usr/src/"} {
			if root != "" && root != "." && strings.Contains(out, root) {
				t.Errorf("klasy %s prints %s, a path outside the source tree's:\n%s", strings.Join(args, " "), root, out)
				break
			}
		}
	}
}
