package weaver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/klasy/klasy/dwarfmap"
	"github.com/klasy/klasy/kmod"
	"github.com/klasy/klasy/weaver/gen"
	"github.com/klasy/klasy/weaver/joinpoint"
	"github.com/klasy/klasy/weaver/resolve"
	"github.com/klasy/klasy/weaver/target"
)

// A module (klasy weave --module PATH.ko; built with the plugin, or its
// accesses are inferred as a distribution kernel's are) is indexed like
// the kernel (dwarfmap lays its sections out at addresses
// of their own: elfimage.SectionAt), resolved beside the kernel, and its
// hooks placed at SECTION+OFFSET of the module as loaded in the target
// kernel: /sys/module/NAME/sections/SECTION. Its build-id there
// (/sys/module/NAME/notes/.note.gnu.build-id) must be the file's.

// loadedModule is a module image with where the target kernel loaded it.
type loadedModule struct {
	*resolve.ModuleImage
	sections map[string]uint64 // running address of each section read so far
}

// moduleInfo reads the module at path and checks that it is a module
// before anything is indexed.
func moduleInfo(path string) (kmod.Info, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return kmod.Info{}, fmt.Errorf("--module %s: %w", path, unwrapPath(err))
	}
	if !bytes.HasPrefix(b, []byte("\x7fELF")) {
		return kmod.Info{}, fmt.Errorf("--module %s: not a kernel module: not an ELF file (want a .ko built by kbuild)", path)
	}
	info, err := kmod.ReadInfo(b)
	if err != nil {
		return kmod.Info{}, fmt.Errorf("--module %s: %v (want a .ko built by kbuild)", path, err)
	}
	return info, nil
}

// openModule indexes the module at path.
func openModule(path string, info kmod.Info) (*resolve.ModuleImage, error) {
	x, _, err := dwarfmap.Load(path, dwarfmap.Options{})
	if err != nil {
		if strings.HasPrefix(err.Error(), path+": ") {
			return nil, fmt.Errorf("--module %w", err) // the index's errors name the file already
		}
		return nil, fmt.Errorf("--module %s: %w", path, err)
	}
	return &resolve.ModuleImage{Name: info.Name, Path: path, X: x}, nil
}

func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// openModules opens the modules of opt for the session: in a running
// kernel each must be loaded, as the build the file is.
func (s *Session) openModules(ctx context.Context, paths []string, running bool) error {
	seen := map[string]string{}
	infos := make([]kmod.Info, len(paths))
	for i, p := range paths {
		info, err := moduleInfo(p)
		if err != nil {
			return err
		}
		if prev, dup := seen[info.Name]; dup {
			return fmt.Errorf("--module %s: module %s is given twice (also as %s)", p, info.Name, prev)
		}
		seen[info.Name] = p
		infos[i] = info
	}
	for i, p := range paths {
		m, err := openModule(p, infos[i])
		if err != nil {
			return err
		}
		s.Modules = append(s.Modules, m)
		if !running {
			continue
		}
		lm := &loadedModule{ModuleImage: m, sections: map[string]uint64{}}
		if err := s.checkLoaded(ctx, lm); err != nil {
			return err
		}
		s.loaded = append(s.loaded, lm)
		m.Refused = s.moduleRefusal(lm)
	}
	return nil
}

// checkLoaded refuses a module that the target does not run, or runs
// another build of.
func (s *Session) checkLoaded(ctx context.Context, m *loadedModule) error {
	dir := "/sys/module/" + m.Name
	notes, err := s.T.ReadFile(ctx, dir+"/notes/.note.gnu.build-id")
	if err != nil {
		if isNotExist(err) {
			if _, err2 := s.T.ReadFile(ctx, dir+"/initstate"); err2 != nil && isNotExist(err2) {
				return fmt.Errorf("--module %s: module %s is not loaded in %s: load it first (insmod %s)", m.Path, m.Name, s.T.Name(), m.Path)
			}
			return fmt.Errorf("--module %s: module %s is loaded in %s without a build-id note, so klasy cannot tell it is this build", m.Path, m.Name, s.T.Name())
		}
		return fmt.Errorf("--module %s: reading %s in %s: %w", m.Path, dir, s.T.Name(), err)
	}
	running, err := target.BuildIDFromNotes(notes)
	if err != nil {
		return fmt.Errorf("--module %s: %s/notes: %v", m.Path, dir, err)
	}
	if running != m.X.BuildID {
		return fmt.Errorf("--module %s: module %s loaded in %s is build-id %s, %s is build-id %s: give the .ko that was loaded", m.Path, m.Name, s.T.Name(), running, m.Path, m.X.BuildID)
	}
	if _, err := s.sectionAddr(ctx, m, ".text"); err != nil {
		return fmt.Errorf("--module %s: %w", m.Path, err)
	}
	return nil
}

// sectionAddr reads where the target loaded a section of module m.
func (s *Session) sectionAddr(ctx context.Context, m *loadedModule, sec string) (uint64, error) {
	if a, ok := m.sections[sec]; ok {
		return a, nil
	}
	p := "/sys/module/" + m.Name + "/sections/" + sec
	b, err := s.T.ReadFile(ctx, p)
	if err != nil {
		return 0, fmt.Errorf("reading %s in %s: %w", p, s.T.Name(), err)
	}
	a, err := strconv.ParseUint(strings.TrimPrefix(strings.TrimSpace(string(b)), "0x"), 16, 64)
	if err != nil || a == 0 {
		return 0, fmt.Errorf("%s in %s is %q: not a kernel address (are you root?)", p, s.T.Name(), strings.TrimSpace(string(b)))
	}
	m.sections[sec] = a
	return a, nil
}

// runningAddr maps an address of module m's .ko to the running kernel.
func (s *Session) runningAddr(ctx context.Context, m *loadedModule, addr uint64) (uint64, error) {
	sec, off, ok := m.X.Image().SectionAt(addr)
	if !ok {
		return 0, fmt.Errorf("%#x is in no section of %s", addr, m.Path)
	}
	base, err := s.sectionAddr(ctx, m, sec)
	if err != nil {
		return 0, err
	}
	return base + off, nil
}

// moduleRefusal is the blacklist's view of module m's addresses.
func (s *Session) moduleRefusal(m *loadedModule) joinpoint.Refusal {
	if len(s.Blacklist) == 0 || os.Getenv(NoPrecheckEnv) == "1" {
		return nil
	}
	// Refusals works on kernel image addresses plus a slide: it is given
	// running addresses with a slide of 0.
	refused := target.Refusals(s.Blacklist, 0)
	return func(addr uint64) string {
		a, err := s.runningAddr(context.Background(), m, addr)
		if err != nil {
			return "its address in the loaded module is unknown: " + err.Error()
		}
		return refused(a)
	}
}

// moduleAddr is GenOptions.ModuleAddr for the session's modules: the
// running address from the section addresses read now, and the symbol
// kallsyms must show there, which the runtime checks at load time.
func (s *Session) moduleAddr(ctx context.Context) func(string, uint64) (gen.ModuleLoc, error) {
	return func(name string, addr uint64) (gen.ModuleLoc, error) {
		for _, m := range s.loaded {
			if m.Name != name {
				continue
			}
			a, err := s.runningAddr(ctx, m, addr)
			if err != nil {
				return gen.ModuleLoc{}, err
			}
			sym, off, err := m.X.Image().ModuleSymbolAt(addr)
			if err != nil {
				return gen.ModuleLoc{}, fmt.Errorf("--module %s: %w", m.Path, err)
			}
			return gen.ModuleLoc{Addr: a, Symbol: sym, Offset: off}, nil
		}
		return gen.ModuleLoc{}, fmt.Errorf("module %s is not among the loaded modules of this session", name)
	}
}
