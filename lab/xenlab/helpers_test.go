package xenlab

import (
	"os"
	"testing"

	"github.com/klasy/klasy/internal/testenv"
	"github.com/klasy/klasy/lab"
	"github.com/klasy/klasy/lab/initramfs"
	"github.com/klasy/klasy/lab/labboot"
)

func TestMain(m *testing.M) {
	code := m.Run()
	labboot.Cleanup()
	os.Exit(code)
}

// needLab skips (or fails under make test) without QEMU, busybox-static
// or Debian's kernel, and returns the kernel.
func needLab(t testing.TB) lab.Kernel {
	t.Helper()
	k := labboot.Need(t, lab.Debian)
	_, err := initramfs.FindBusybox()
	testenv.Need(t, "lab", err)
	return k
}
