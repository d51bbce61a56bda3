// Package kmod loads kernel modules into a kernel and unloads them again,
// as insmod, lsmod and rmmod do, through a Target: a lab guest's agent
// (*agent.Client) or, later, the local kernel. Building modules is
// package kbuild's job; kmod needs no kernel tree, only the .ko.
package kmod

import (
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/klasy/klasy/agent/wire"
)

// Target is a kernel that loads and unloads modules: init_module(2),
// delete_module(2) without waiting (O_NONBLOCK, as rmmod does) and
// /proc/modules. *agent.Client is one; its errors carry the kernel's
// errno (errors.Is(err, syscall.EEXIST)).
type Target interface {
	LoadModule(ctx context.Context, image []byte, params string) error
	UnloadModule(ctx context.Context, name string) error
	Modules(ctx context.Context) ([]wire.Module, error)
}

// Info is what a module's .modinfo section says about it.
type Info struct {
	Name     string   // the name the kernel lists it under
	Vermagic string   // the kernel it was built for
	Depends  []string // modules it needs loaded first
}

// ReadInfo reads the .modinfo section of a module image (a .ko).
func ReadInfo(image []byte) (Info, error) {
	f, err := elf.NewFile(bytes.NewReader(image))
	if err != nil {
		return Info{}, fmt.Errorf("not a kernel module: %w", err)
	}
	sec := f.Section(".modinfo")
	if sec == nil {
		return Info{}, errors.New("not a kernel module: no .modinfo section")
	}
	data, err := sec.Data()
	if err != nil {
		return Info{}, fmt.Errorf("reading .modinfo: %w", err)
	}
	var info Info
	for _, kv := range bytes.Split(data, []byte{0}) {
		k, v, _ := strings.Cut(string(kv), "=")
		switch k {
		case "name":
			info.Name = v
		case "vermagic":
			info.Vermagic = strings.TrimSpace(v)
		case "depends":
			for _, d := range strings.Split(v, ",") {
				if d != "" {
					info.Depends = append(info.Depends, d)
				}
			}
		}
	}
	if info.Name == "" {
		return Info{}, errors.New("not a kernel module: .modinfo has no name")
	}
	return info, nil
}

// StripDebug returns a module image without its debug sections, as
// `make modules_install INSTALL_MOD_STRIP=1` would install it. The
// kernel does not need them, and a kbuild module with DWARF is ten times
// larger than without: on a lab's UART fallback line host-to-guest data
// moves at only tens of KB/s under TCG.
func StripDebug(image []byte) ([]byte, error) {
	dir, err := os.MkdirTemp("", "klasy-strip-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	in, out := filepath.Join(dir, "in.ko"), filepath.Join(dir, "out.ko")
	if err := os.WriteFile(in, image, 0o600); err != nil {
		return nil, err
	}
	if msg, err := exec.Command("objcopy", "--strip-debug", in, out).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("objcopy --strip-debug: %v: %s", err, bytes.TrimSpace(msg))
	}
	return os.ReadFile(out)
}

// Load loads a module image into t with the parameter string params
// ("a=1 b=x"), without its debug sections (see StripDebug), and checks
// that the kernel lists it. It returns what the image's .modinfo says.
func Load(ctx context.Context, t Target, image []byte, params string) (Info, error) {
	info, err := ReadInfo(image)
	if err != nil {
		return Info{}, fmt.Errorf("loading module: %w", err)
	}
	stripped, err := StripDebug(image)
	if err != nil {
		return Info{}, fmt.Errorf("loading %s: %w", info.Name, err)
	}
	if err := t.LoadModule(ctx, stripped, params); err != nil {
		switch {
		case errors.Is(err, syscall.EEXIST):
			return Info{}, fmt.Errorf("loading %s: a module of that name is already loaded: %w", info.Name, err)
		case errors.Is(err, syscall.ENOEXEC):
			return Info{}, fmt.Errorf("loading %s: the kernel refused it; was it built for this kernel (vermagic %q)? %w", info.Name, info.Vermagic, err)
		case errors.Is(err, syscall.ENOENT) && len(info.Depends) > 0:
			return Info{}, fmt.Errorf("loading %s: unknown symbol; load %s first: %w", info.Name, strings.Join(info.Depends, ", "), err)
		}
		return Info{}, fmt.Errorf("loading %s: %w", info.Name, err)
	}
	if _, ok, err := find(ctx, t, info.Name); err != nil {
		return Info{}, fmt.Errorf("loading %s: listing modules: %w", info.Name, err)
	} else if !ok {
		return Info{}, fmt.Errorf("loading %s: init_module succeeded but the kernel does not list it", info.Name)
	}
	return info, nil
}

// ErrInUse is matched by the error of Unload for a module the kernel
// will not unload now: other modules use it, or something holds a
// reference to it.
var ErrInUse = errors.New("module in use")

// InUseError is Unload's error for a module in use.
type InUseError struct {
	Name string
	Refs int   // its reference count, -1 if it can never be unloaded
	Err  error // the kernel's error (EWOULDBLOCK or EBUSY)
}

func (e *InUseError) Error() string {
	switch {
	case e.Refs < 0:
		return fmt.Sprintf("unloading %s: the kernel cannot unload it (no exit function)", e.Name)
	case e.Refs == 1:
		return fmt.Sprintf("unloading %s: in use (1 reference): unload what uses it first", e.Name)
	case e.Refs > 1:
		return fmt.Sprintf("unloading %s: in use (%d references): unload what uses it first", e.Name, e.Refs)
	}
	return fmt.Sprintf("unloading %s: busy (still loading or unloading): %v", e.Name, e.Err)
}

func (e *InUseError) Unwrap() error        { return e.Err }
func (e *InUseError) Is(target error) bool { return target == ErrInUse }

// Unload removes the module name from t without waiting for its users,
// and checks that the kernel no longer lists it. A module in use fails
// with an *InUseError (errors.Is(err, ErrInUse)).
func Unload(ctx context.Context, t Target, name string) error {
	if err := t.UnloadModule(ctx, name); err != nil {
		switch {
		case errors.Is(err, syscall.EWOULDBLOCK), errors.Is(err, syscall.EBUSY):
			refs := 0
			if m, ok, lerr := find(ctx, t, name); lerr == nil && ok {
				refs = m.Refs
			}
			return &InUseError{Name: name, Refs: refs, Err: err}
		case errors.Is(err, syscall.ENOENT):
			return fmt.Errorf("unloading %s: not loaded: %w", name, err)
		}
		return fmt.Errorf("unloading %s: %w", name, err)
	}
	if _, ok, err := find(ctx, t, name); err != nil {
		return fmt.Errorf("unloading %s: listing modules: %w", name, err)
	} else if ok {
		return fmt.Errorf("unloading %s: delete_module succeeded but the kernel still lists it", name)
	}
	return nil
}

func find(ctx context.Context, t Target, name string) (wire.Module, bool, error) {
	ms, err := t.Modules(ctx)
	if err != nil {
		return wire.Module{}, false, err
	}
	for _, m := range ms {
		if m.Name == name {
			return m, true, nil
		}
	}
	return wire.Module{}, false, nil
}
