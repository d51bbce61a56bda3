package initramfs

import (
	"os"
	"path/filepath"
	"testing"
)

func TestResolveModulesAllBuiltIn(t *testing.T) {
	dir := t.TempDir()
	builtin := "kernel/drivers/virtio/virtio_pci.ko\nkernel/drivers/net/virtio_net.ko\nkernel/drivers/net/ethernet/intel/e1000/e1000.ko\n"
	if err := os.WriteFile(filepath.Join(dir, "modules.builtin"), []byte(builtin), 0o644); err != nil {
		t.Fatal(err)
	}
	order, err := ResolveModules(dir, []string{"virtio_pci", "virtio_net", "e1000"})
	if err != nil || len(order) != 0 {
		t.Errorf("ResolveModules with everything built in = %v, %v; want none", order, err)
	}
}
