package plugintest_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestPrepareTree runs kernel/prepare-tree.sh on a copy of linux-source's
// vmlinux.lds.S: one .debug_klasy line right after ELF_DETAILS, nothing
// more on a second run, a clear error for a script it cannot patch.
func TestPrepareTree(t *testing.T) {
	k := linuxSource(t)
	orig, err := os.ReadFile(filepath.Join(k.src, "arch/x86/kernel/vmlinux.lds.S"))
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(string(orig), "\n") {
		if !strings.Contains(l, ".debug_klasy") { // the shared tree is already prepared
			lines = append(lines, l)
		}
	}
	tree := t.TempDir()
	lds := filepath.Join(tree, "arch/x86/kernel/vmlinux.lds.S")
	if err := os.MkdirAll(filepath.Dir(lds), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(lds, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	script, _ := filepath.Abs("../kernel/prepare-tree.sh")
	for run := 1; run <= 2; run++ {
		if out, err := exec.Command(script, tree).CombinedOutput(); err != nil {
			t.Fatalf("run %d: %v\n%s", run, err, out)
		}
		b, _ := os.ReadFile(lds)
		got := strings.Split(string(b), "\n")
		if n := strings.Count(string(b), ".debug_klasy 0 : { *(.debug_klasy) }"); n != 1 {
			t.Fatalf("run %d: %d .debug_klasy lines, want 1", run, n)
		}
		for i, l := range got {
			if strings.Contains(l, ".debug_klasy") && (i == 0 || strings.TrimSpace(got[i-1]) != "ELF_DETAILS") {
				t.Errorf("run %d: .debug_klasy placed after %q, want after ELF_DETAILS", run, got[i-1])
			}
		}
		if len(got) != len(lines)+1 {
			t.Errorf("run %d: %d lines, want %d", run, len(got), len(lines)+1)
		}
	}

	if err := os.WriteFile(lds, []byte("SECTIONS { }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(script, tree).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "no ELF_DETAILS") {
		t.Errorf("script without ELF_DETAILS: err=%v\n%s", err, out)
	}
	if b, _ := os.ReadFile(lds); string(b) != "SECTIONS { }\n" {
		t.Errorf("failed run changed the file: %q", b)
	}
}
