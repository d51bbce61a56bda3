package lab

import (
	"slices"
	"strings"
	"testing"

	"github.com/klasy/klasy/lab/initramfs"
)

func TestResolveModulesDebian(t *testing.T) {
	k := needLab(t, Debian)
	order, err := initramfs.ResolveModules(k.ModulesDir, bootModules)
	if err != nil {
		t.Fatal(err)
	}
	pos := map[string]int{}
	for i, p := range order {
		pos[initramfs.ModName(p)] = i
	}
	// Each module comes after what it depends on.
	for _, dep := range [][2]string{
		{"virtio_ring", "virtio"}, {"virtio", "virtio_net"}, {"virtio", "virtio_pci"},
		{"virtio_pci_modern_dev", "virtio_pci"}, {"net_failover", "virtio_net"}, {"failover", "net_failover"},
	} {
		a, okA := pos[dep[0]]
		b, okB := pos[dep[1]]
		if !okA || !okB || a >= b {
			t.Errorf("want %s before %s in %v", dep[0], dep[1], order)
		}
	}
	if _, ok := pos["e1000"]; !ok {
		t.Errorf("e1000 missing from %v", order)
	}
	if slices.ContainsFunc(order, func(p string) bool { return strings.Contains(p, "8250") }) {
		t.Errorf("built-in serial driver listed as a module: %v", order)
	}
}

func TestResolveModulesUnknown(t *testing.T) {
	k := needLab(t, Debian)
	_, err := initramfs.ResolveModules(k.ModulesDir, []string{"no_such_module_xyz"})
	if err == nil || !strings.Contains(err.Error(), "no_such_module_xyz not found") {
		t.Errorf("resolving an unknown module: %v", err)
	}
}

func TestCheckName(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"default", true}, {"a", true}, {"lab-2_x", true},
		{"", false}, {"-a", false}, {"../x", false}, {"a/b", false}, {"a b", false},
		{strings.Repeat("x", 33), false},
	}
	for _, tt := range tests {
		if err := CheckName(tt.name); (err == nil) != tt.ok {
			t.Errorf("CheckName(%q) = %v, want ok=%v", tt.name, err, tt.ok)
		}
	}
}

func TestConsoleWatcherCompleteLines(t *testing.T) {
	path := t.TempDir() + "/console.log"
	w := consoleWatcher{path: path}
	if got := w.newLines(); got != nil {
		t.Errorf("missing file: %q", got)
	}
	appendFile(t, path, "one\r\ntw")
	if got := w.newLines(); !slices.Equal(got, []string{"one"}) {
		t.Errorf("got %q, want [one]", got)
	}
	appendFile(t, path, "o\nthree\n")
	if got := w.newLines(); !slices.Equal(got, []string{"two", "three"}) {
		t.Errorf("got %q, want [two three]", got)
	}
}
