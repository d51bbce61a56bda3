package initramfs

import (
	"bufio"
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ModName normalizes a module name the way the kernel does: the file
// name without .ko, with - as _.
func ModName(s string) string {
	s = filepath.Base(s)
	s = strings.TrimSuffix(s, ".ko")
	return strings.ReplaceAll(s, "-", "_")
}

// moduleDeps reads the "depends=" entry of a module's .modinfo section.
func moduleDeps(path string) ([]string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading module %s: %w", path, err)
	}
	defer f.Close()
	sec := f.Section(".modinfo")
	if sec == nil {
		return nil, fmt.Errorf("module %s has no .modinfo section", path)
	}
	data, err := sec.Data()
	if err != nil {
		return nil, fmt.Errorf("reading .modinfo of %s: %w", path, err)
	}
	for _, kv := range bytes.Split(data, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte("depends=")); ok {
			var deps []string
			for _, d := range strings.Split(string(v), ",") {
				if d != "" {
					deps = append(deps, ModName(d))
				}
			}
			return deps, nil
		}
	}
	return nil, nil
}

// ResolveModules returns the paths (relative to modDir, lib/modules/REL)
// of the wanted modules and everything they depend on, dependencies
// first. Modules the kernel has built in are left out. It reads
// modules.order and .modinfo rather than modules.dep because a kernel
// unpacked from a .deb has not been through depmod.
func ResolveModules(modDir string, wanted []string) ([]string, error) {
	byName := map[string]string{}
	// A kernel with everything built in may install no modules.order.
	if err := readLines(filepath.Join(modDir, "modules.order"), func(l string) {
		byName[ModName(l)] = l
	}); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("listing modules of %s: %w", modDir, err)
	}
	builtin := map[string]bool{}
	_ = readLines(filepath.Join(modDir, "modules.builtin"), func(l string) { builtin[ModName(l)] = true })

	var order []string
	state := map[string]int{} // 1 visiting, 2 done
	var visit func(name, from string) error
	visit = func(name, from string) error {
		switch state[name] {
		case 1:
			return fmt.Errorf("module dependency cycle through %s", name)
		case 2:
			return nil
		}
		rel, ok := byName[name]
		if !ok {
			if builtin[name] {
				state[name] = 2
				return nil
			}
			if from != "" {
				return fmt.Errorf("module %s (needed by %s) not found in %s", name, from, modDir)
			}
			return fmt.Errorf("module %s not found in %s (neither a module nor built in)", name, modDir)
		}
		state[name] = 1
		deps, err := moduleDeps(filepath.Join(modDir, rel))
		if err != nil {
			return err
		}
		for _, d := range deps {
			if err := visit(d, name); err != nil {
				return err
			}
		}
		state[name] = 2
		order = append(order, rel)
		return nil
	}
	for _, w := range wanted {
		if err := visit(ModName(w), ""); err != nil {
			return nil, err
		}
	}
	return order, nil
}

func readLines(path string, fn func(string)) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			fn(l)
		}
	}
	return sc.Err()
}
