package kmod_test

import (
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/klasy/klasy/agent"
	"github.com/klasy/klasy/agent/wire"
	"github.com/klasy/klasy/internal/testenv"
	"github.com/klasy/klasy/kbuild"
	"github.com/klasy/klasy/kmod"
	"github.com/klasy/klasy/lab"
)

// The lab's agent is a Target.
var _ kmod.Target = (*agent.Client)(nil)

func debian(t testing.TB) lab.Kernel {
	t.Helper()
	k, err := lab.FindKernel(lab.Debian)
	testenv.Need(t, "debian-kernel", err)
	return k
}

// debianModule reads one of the Debian kernel's own modules (stripped,
// as Debian ships them).
func debianModule(t testing.TB, k lab.Kernel, rel string) []byte {
	t.Helper()
	ko, err := os.ReadFile(filepath.Join(k.ModulesDir, "kernel", rel))
	if err != nil {
		t.Fatal(err)
	}
	return ko
}

var built struct {
	once sync.Once
	ko   []byte
	err  error
}

// testModule builds testdata/klasy_kmod_test, with its debug
// information, once for all tests.
func testModule(t testing.TB, k lab.Kernel) []byte {
	t.Helper()
	built.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		var res *kbuild.Result
		if res, built.err = kbuild.Build(ctx, k.BuildDir, os.DirFS("testdata/klasy_kmod_test"), kbuild.Options{}); built.err == nil {
			built.ko = res.Modules[0].Image
		}
	})
	if built.err != nil {
		t.Fatalf("%+v", built.err)
	}
	return built.ko
}

func TestReadInfo(t *testing.T) {
	k := debian(t)
	tests := []struct {
		rel  string
		name string
		deps []string
	}{
		{"net/core/failover.ko", "failover", nil},
		{"drivers/net/net_failover.ko", "net_failover", []string{"failover"}},
		{"drivers/net/virtio_net.ko", "virtio_net", []string{"virtio_ring", "virtio", "net_failover"}},
	}
	for _, tt := range tests {
		info, err := kmod.ReadInfo(debianModule(t, k, tt.rel))
		if err != nil {
			t.Errorf("%s: %v", tt.rel, err)
			continue
		}
		if info.Name != tt.name || !slices.Equal(info.Depends, tt.deps) || !strings.HasPrefix(info.Vermagic, k.Release+" ") {
			t.Errorf("%s: %+v, want name %s, depends %q, vermagic of %s", tt.rel, info, tt.name, tt.deps, k.Release)
		}
	}
	for _, bad := range [][]byte{nil, []byte("\x7fELF garbage"), debianModule(t, k, "net/core/failover.ko")[:64]} {
		if _, err := kmod.ReadInfo(bad); err == nil || !strings.Contains(err.Error(), "not a kernel module") {
			t.Errorf("ReadInfo(%q...) = %v, want 'not a kernel module'", bad[:min(len(bad), 8)], err)
		}
	}
}

// sections returns the sizes of a module's sections; loaded are those
// the kernel loads.
func sections(t testing.TB, ko []byte) (all, loaded map[string]uint64) {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(ko))
	if err != nil {
		t.Fatal(err)
	}
	all, loaded = map[string]uint64{}, map[string]uint64{}
	for _, s := range f.Sections {
		all[s.Name] = s.Size
		if s.Flags&elf.SHF_ALLOC != 0 {
			loaded[s.Name] = s.Size
		}
	}
	return all, loaded
}

// TestStripDebug strips a freshly built module: no .debug_ section is
// left, every section the kernel loads keeps its size, and .modinfo
// reads the same.
func TestStripDebug(t *testing.T) {
	ko := testModule(t, debian(t))
	stripped, err := kmod.StripDebug(ko)
	if err != nil {
		t.Fatal(err)
	}
	before, loaded := sections(t, ko)
	after, loadedAfter := sections(t, stripped)
	if before[".debug_info"] == 0 {
		t.Fatal("the test module was built without debug information")
	}
	for name := range after {
		if strings.HasPrefix(name, ".debug_") || strings.HasPrefix(name, ".rela.debug_") {
			t.Errorf("%s left after stripping", name)
		}
	}
	for name, size := range loaded {
		if got, ok := loadedAfter[name]; !ok || got != size {
			t.Errorf("%s: %d bytes after stripping, want %d", name, got, size)
		}
	}
	if len(loaded) < 5 || loaded[".modinfo"] == 0 || loaded[".gnu.linkonce.this_module"] == 0 {
		t.Errorf("loaded sections %v: want .modinfo, .gnu.linkonce.this_module and more", loaded)
	}
	i1, _ := kmod.ReadInfo(ko)
	i2, err := kmod.ReadInfo(stripped)
	if err != nil || i1.Name != i2.Name || i1.Vermagic != i2.Vermagic {
		t.Errorf("modinfo %+v after stripping, was %+v (%v)", i2, i1, err)
	}
	t.Logf("%d bytes, %d stripped", len(ko), len(stripped))
	if _, err := kmod.StripDebug([]byte("not ELF")); err == nil || !strings.Contains(err.Error(), "objcopy") {
		t.Errorf("StripDebug(garbage) = %v, want objcopy's error", err)
	}
}

// kernel stands in for a kernel's module loader with the rules of Linux
// 6.1 that Load and Unload rely on: init_module fails with EEXIST for a
// name already loaded and ENOENT for a symbol of a module not loaded
// (here: a missing dependency); delete_module with O_NONBLOCK fails with
// ENOENT for a module not loaded and EWOULDBLOCK while other modules use
// it. Each module a module depends on holds one reference for it.
type kernel struct {
	mods   []wire.Module
	deps   map[string][]string
	images [][]byte
	lose   bool // init_module succeeds but the module is not listed
}

func (k *kernel) index(name string) int {
	return slices.IndexFunc(k.mods, func(m wire.Module) bool { return m.Name == name })
}

func (k *kernel) LoadModule(_ context.Context, image []byte, _ string) error {
	k.images = append(k.images, image)
	info, err := kmod.ReadInfo(image)
	if err != nil {
		return syscall.ENOEXEC
	}
	if k.index(info.Name) >= 0 {
		return syscall.EEXIST
	}
	for _, d := range info.Depends {
		if k.index(d) < 0 {
			return syscall.ENOENT
		}
	}
	if k.lose {
		return nil
	}
	for _, d := range info.Depends {
		k.mods[k.index(d)].Refs++
	}
	k.mods = append(k.mods, wire.Module{Name: info.Name, Size: int64(len(image))})
	k.deps[info.Name] = info.Depends
	return nil
}

func (k *kernel) UnloadModule(_ context.Context, name string) error {
	i := k.index(name)
	switch {
	case i < 0:
		return syscall.ENOENT
	case k.mods[i].Refs > 0:
		return syscall.EWOULDBLOCK
	}
	k.mods = slices.Delete(k.mods, i, i+1)
	for _, d := range k.deps[name] {
		k.mods[k.index(d)].Refs--
	}
	return nil
}

func (k *kernel) Modules(context.Context) ([]wire.Module, error) {
	return slices.Clone(k.mods), nil
}

// TestLoadUnload loads and unloads Debian's failover and net_failover
// (which uses it) and the test module (which has debug information) into
// a stand-in kernel: images go in without debug information, modules go
// in dependencies first and come out users first, and each refusal is
// explained. The same path against a real kernel is in the lab's
// TestDebianLab.
func TestLoadUnload(t *testing.T) {
	dk := debian(t)
	ctx := context.Background()
	k := &kernel{deps: map[string][]string{}}
	failover := debianModule(t, dk, "net/core/failover.ko")
	netFailover := debianModule(t, dk, "drivers/net/net_failover.ko")
	test := testModule(t, dk)

	if _, err := kmod.Load(ctx, k, netFailover, ""); !errors.Is(err, syscall.ENOENT) || !strings.Contains(err.Error(), "load failover first") {
		t.Errorf("loading net_failover before failover: %v, want ENOENT saying to load failover first", err)
	}
	for _, ko := range [][]byte{failover, netFailover, test} {
		if _, err := kmod.Load(ctx, k, ko, ""); err != nil {
			t.Fatal(err)
		}
	}
	for _, img := range k.images {
		if s, _ := sections(t, img); s[".debug_info"] != 0 {
			t.Errorf("Load gave the kernel an image with .debug_info (%d bytes)", s[".debug_info"])
		}
	}
	if info, err := kmod.Load(ctx, k, test, ""); !errors.Is(err, syscall.EEXIST) || !strings.Contains(err.Error(), "loading klasy_kmod_test: a module of that name is already loaded") || info.Name != "" {
		t.Errorf("loading klasy_kmod_test twice: %+v, %v; want EEXIST saying it is loaded", info, err)
	}

	err := kmod.Unload(ctx, k, "failover")
	var inUse *kmod.InUseError
	if !errors.As(err, &inUse) || inUse.Refs != 1 || !errors.Is(err, kmod.ErrInUse) || !errors.Is(err, syscall.EWOULDBLOCK) ||
		err.Error() != "unloading failover: in use (1 reference): unload what uses it first" {
		t.Errorf("unloading failover while net_failover uses it: %v, want an *InUseError with 1 reference", err)
	}
	for _, name := range []string{"net_failover", "failover", "klasy_kmod_test"} {
		if err := kmod.Unload(ctx, k, name); err != nil {
			t.Errorf("unloading %s: %v", name, err)
		}
	}
	if len(k.mods) != 0 {
		t.Errorf("modules left: %v", k.mods)
	}
	if err := kmod.Unload(ctx, k, "failover"); !errors.Is(err, syscall.ENOENT) || !strings.Contains(err.Error(), "unloading failover: not loaded") {
		t.Errorf("unloading failover twice: %v, want ENOENT saying it is not loaded", err)
	}

	k.lose = true
	if _, err := kmod.Load(ctx, k, failover, ""); err == nil || !strings.Contains(err.Error(), "does not list it") {
		t.Errorf("a load the kernel does not list: %v, want an error saying so", err)
	}
	if _, err := kmod.Load(ctx, k, []byte("garbage"), ""); err == nil || !strings.Contains(err.Error(), "not a kernel module") {
		t.Errorf("loading garbage: %v", err)
	}
}

func TestInUseError(t *testing.T) {
	tests := []struct {
		refs int
		want string
	}{
		{2, "unloading m: in use (2 references): unload what uses it first"},
		{-1, "unloading m: the kernel cannot unload it (no exit function)"},
		{0, "unloading m: busy (still loading or unloading): device or resource busy"},
	}
	for _, tt := range tests {
		err := error(&kmod.InUseError{Name: "m", Refs: tt.refs, Err: syscall.EBUSY})
		if err.Error() != tt.want || !errors.Is(err, kmod.ErrInUse) || !errors.Is(err, syscall.EBUSY) {
			t.Errorf("refs %d: %q, want %q matching ErrInUse and EBUSY", tt.refs, err, tt.want)
		}
	}
}
