package runtime_test

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/klasy/klasy/internal/testenv"
	"github.com/klasy/klasy/lab"
	"github.com/klasy/klasy/weaver/runtime"
)

var tmpRoot string // removed by TestMain

func TestMain(m *testing.M) {
	code := m.Run()
	if tmpRoot != "" {
		os.RemoveAll(tmpRoot)
	}
	os.Exit(code)
}

var tmpOnce sync.Once

// tempDir is a directory that outlives one test (builds are shared by
// the tests of this binary) and is removed by TestMain.
func tempDir(t testing.TB, name string) string {
	t.Helper()
	tmpOnce.Do(func() {
		var err error
		if tmpRoot, err = os.MkdirTemp("", "klasy-runtime-test"); err != nil {
			t.Fatal(err)
		}
	})
	dir := filepath.Join(tmpRoot, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// debianKernel returns the Debian kernel whose headers the modules build
// against; without it the test skips (fails under make test).
func debianKernel(t testing.TB) lab.Kernel {
	t.Helper()
	k, err := lab.FindKernel(lab.Debian)
	testenv.Need(t, "debian-kernel", err)
	return k
}

// kbuild runs `make -C buildDir M=dir W=1 modules` and fails on a build
// error or on any warning the kernel's build prints.
//
// TODO: use the kbuild package once it is on main.
func kbuild(buildDir, dir string, vars ...string) error {
	args := append([]string{"-s", "-C", buildDir, "M=" + dir, "W=1"}, vars...)
	cmd := exec.Command("make", append(args, "modules")...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("make %s modules: %v\n%s", strings.Join(args, " "), err, out)
	}
	if strings.Contains(strings.ToLower(string(out)), "warning") {
		return fmt.Errorf("make %s modules warns:\n%s", strings.Join(args, " "), out)
	}
	return nil
}

type buildResult struct {
	dir string
	err error
}

var (
	buildMu sync.Mutex
	builds  = map[string]buildResult{}
)

// buildOnce runs build once per key in this test binary.
func buildOnce(t testing.TB, key string, build func() (string, error)) string {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	r, ok := builds[key]
	if !ok {
		r.dir, r.err = build()
		builds[key] = r
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.dir
}

// buildRuntime builds the embedded runtime sources against k's headers
// and returns the directory holding klasy_runtime.ko and Module.symvers.
func buildRuntime(t testing.TB, k lab.Kernel) string {
	t.Helper()
	return buildOnce(t, "runtime", func() (string, error) {
		dir := tempDir(t, "runtime")
		if err := os.CopyFS(dir, runtime.Sources); err != nil {
			return "", err
		}
		return dir, kbuild(k.BuildDir, dir)
	})
}

// buildAdvice builds testdata/advice beside the embedded klasy_rt.h, as
// klasy builds a generated advice module, and returns its .ko's path.
func buildAdvice(t testing.TB, k lab.Kernel) string {
	t.Helper()
	rt := buildRuntime(t, k)
	dir := buildOnce(t, "advice", func() (string, error) {
		dir := tempDir(t, "advice")
		if err := os.CopyFS(dir, os.DirFS("testdata/advice")); err != nil {
			return "", err
		}
		h, err := fs.ReadFile(runtime.Sources, runtime.Header)
		if err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(dir, runtime.Header), h, 0o644); err != nil {
			return "", err
		}
		return dir, kbuild(k.BuildDir, dir, "KBUILD_EXTRA_SYMBOLS="+filepath.Join(rt, "Module.symvers"))
	})
	return filepath.Join(dir, "klasy_test_advice.ko")
}
