package runtime_test

import (
	"context"
	"debug/elf"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/klasy/klasy/internal/testenv"
	"github.com/klasy/klasy/kbuild"
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

// build builds src with kbuild's extra warnings (W=1) in the directory
// name-FLAVOR under tempDir and fails on a build error or on any warning
// the kernel's build prints. It returns the directory.
func build(t testing.TB, k lab.Kernel, name string, src fs.FS, extraSymbols ...[]byte) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := tempDir(t, name+"-"+k.Flavor)
	res, err := kbuild.Build(ctx, k.BuildDir, src, kbuild.Options{Dir: dir, ExtraWarnings: "1", ExtraSymbols: extraSymbols})
	if err != nil {
		return "", fmt.Errorf("building %s: %+v", name, err)
	}
	if strings.Contains(strings.ToLower(string(res.Log)), "warning") {
		return "", fmt.Errorf("building %s warns:\n%s", name, res.Log)
	}
	return dir, nil
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
	return buildOnce(t, "runtime-"+k.Flavor, func() (string, error) {
		return build(t, k, "runtime", runtime.Sources)
	})
}

// buildAdvice builds testdata/advice beside the embedded klasy_rt.h, as
// klasy builds a generated advice module, and returns its .ko's path.
func buildAdvice(t testing.TB, k lab.Kernel) string {
	t.Helper()
	rt := buildRuntime(t, k)
	dir := buildOnce(t, "advice-"+k.Flavor, func() (string, error) {
		h, err := fs.ReadFile(runtime.Sources, runtime.Header)
		if err != nil {
			return "", err
		}
		src := fstest.MapFS{runtime.Header: {Data: h, Mode: 0o644}}
		ents, err := os.ReadDir("testdata/advice")
		if err != nil {
			return "", err
		}
		for _, e := range ents {
			data, err := os.ReadFile(filepath.Join("testdata/advice", e.Name()))
			if err != nil {
				return "", err
			}
			src[e.Name()] = &fstest.MapFile{Data: data, Mode: 0o644}
		}
		symvers, err := os.ReadFile(filepath.Join(rt, "Module.symvers"))
		if err != nil {
			return "", err
		}
		return build(t, k, "advice", src, symvers)
	})
	return filepath.Join(dir, "klasy_test_advice.ko")
}

// TestBuildsWithoutWarnings: the runtime and an advice module beside its
// header build with W=1 and no warning against both lab kernels' trees,
// Debian's and the one built with the klasy plugin (other options, other
// compiler flags).
func TestBuildsWithoutWarnings(t *testing.T) {
	for _, tt := range []struct{ flavor, feature string }{
		{lab.Debian, "debian-kernel"},
		{lab.Built, "lab-kernel"},
	} {
		t.Run(tt.flavor, func(t *testing.T) {
			k, err := lab.FindKernel(tt.flavor)
			testenv.Need(t, tt.feature, err)
			if _, err := os.Stat(buildAdvice(t, k)); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestBuildsOnPreemptRT (issue 20 #6): the runtime builds with W=1 and no
// warning against Debian's PREEMPT_RT headers of the lab kernel's ABI,
// and takes no lock that sleeps there: its locks are taken in kprobe
// handlers, with interrupts off and in NMI, where an rt_mutex-based
// spinlock_t (rt_spin_lock) is invalid.
func TestBuildsOnPreemptRT(t *testing.T) {
	k := debianKernel(t)
	rt := lab.Kernel{Flavor: "debian-rt", Release: k.Release, BuildDir: filepath.Join(filepath.Dir(k.BuildDir), "headers-rt")}
	conf, err := os.ReadFile(filepath.Join(rt.BuildDir, "include", "config", "auto.conf"))
	testenv.Need(t, "debian-kernel", err)
	if !strings.Contains(string(conf), "\nCONFIG_PREEMPT_RT=y\n") {
		t.Fatalf("%s is not a PREEMPT_RT tree", rt.BuildDir)
	}
	dir := buildRuntime(t, rt)
	syms, err := undefinedSymbols(filepath.Join(dir, "klasy_runtime.ko"))
	if err != nil {
		t.Fatal(err)
	}
	var sleeping []string
	for _, s := range syms {
		if strings.HasPrefix(s, "rt_spin_") || strings.HasPrefix(s, "rt_read_") || strings.HasPrefix(s, "rt_write_") {
			sleeping = append(sleeping, s)
		}
	}
	if len(sleeping) > 0 {
		t.Errorf("klasy_runtime.ko takes locks that sleep on PREEMPT_RT: %v", sleeping)
	}
}

// undefinedSymbols lists the symbols an ELF object imports.
func undefinedSymbols(path string) ([]string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil {
		return nil, err
	}
	var u []string
	for _, s := range syms {
		if s.Section == elf.SHN_UNDEF && s.Name != "" {
			u = append(u, s.Name)
		}
	}
	return u, nil
}
