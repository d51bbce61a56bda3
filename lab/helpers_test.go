package lab

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/klasy/klasy/internal/testenv"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if agentPath != "" {
		os.RemoveAll(filepath.Dir(agentPath))
	}
	os.Exit(code)
}

var (
	agentOnce sync.Once
	agentPath string
	agentErr  error
)

// testAgent builds the static klasy binary of this tree for the guest,
// so the lab runs the agent code under test.
func testAgent(t testing.TB) string {
	t.Helper()
	agentOnce.Do(func() {
		dir, err := os.MkdirTemp("", "klasy-lab-agent")
		if err != nil {
			agentErr = err
			return
		}
		agentPath = filepath.Join(dir, "klasy")
		cmd := exec.Command("go", "build", "-o", agentPath, "github.com/klasy/klasy/cmd/klasy")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			agentErr = fmt.Errorf("building the static klasy agent: %v\n%s", err, out)
		}
	})
	if agentErr != nil {
		t.Fatal(agentErr)
	}
	return agentPath
}

// needLab skips (or fails under make test) without QEMU, busybox-static
// or the kernel flavor.
func needLab(t testing.TB, flavor string) Kernel {
	t.Helper()
	_, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		err = fmt.Errorf("qemu-system-x86_64 not installed (make lab-setup)")
	}
	testenv.Need(t, "lab", err)
	_, err = findBusybox()
	testenv.Need(t, "lab", err)
	k, err := FindKernel(flavor)
	testenv.Need(t, "lab", err)
	return k
}

// buildModule builds testdata/kprobe_mod against a kernel's kbuild tree
// with real kbuild and returns the .ko's bytes.
func buildModule(buildDir string) ([]byte, error) {
	dir, err := os.MkdirTemp("", "klasy-lab-mod")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	for _, f := range []string{"Kbuild", "klasy_lab_test.c"} {
		data, err := os.ReadFile(filepath.Join("testdata", "kprobe_mod", f))
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
			return nil, err
		}
	}
	cmd := exec.Command("make", "-s", "-C", buildDir, "M="+dir, "modules")
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("make -C %s M=%s modules: %v\n%s", buildDir, dir, err, out)
	}
	return os.ReadFile(filepath.Join(dir, "klasy_lab_test.ko"))
}
