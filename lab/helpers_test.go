package lab

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/klasy/klasy/internal/testenv"
	"github.com/klasy/klasy/kbuild"
	"github.com/klasy/klasy/lab/initramfs"
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
	_, err = initramfs.FindBusybox()
	testenv.Need(t, "lab", err)
	k, err := FindKernel(flavor)
	testenv.Need(t, "lab", err)
	return k
}

// labModules are the lab tests' modules: klasy_lab_test (a kprobe while
// loaded) and klasy_lab_user (which uses klasy_lab_test's export).
type labModules struct {
	test, user []byte
}

// buildModules builds testdata/kprobe_mod and, against its
// Module.symvers, testdata/user_mod for a kernel's kbuild tree.
func buildModules(ctx context.Context, buildDir string) (labModules, error) {
	test, err := kbuild.Build(ctx, buildDir, os.DirFS("testdata/kprobe_mod"), kbuild.Options{})
	if err != nil {
		return labModules{}, err
	}
	user, err := kbuild.Build(ctx, buildDir, os.DirFS("testdata/user_mod"), kbuild.Options{ExtraSymbols: [][]byte{test.Symvers}})
	if err != nil {
		return labModules{}, err
	}
	return labModules{test.Modules[0].Image, user.Modules[0].Image}, nil
}
