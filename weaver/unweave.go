package weaver

import (
	"context"
	"fmt"
	"strings"

	"github.com/klasy/klasy/kmod"
	"github.com/klasy/klasy/weaver/runtime"
)

// UnweaveReport says what an unweave removed.
type UnweaveReport struct {
	Aspects []string // aspects removed
	Saved   int      // records drained and kept for klasy trace
	// RuntimeRemoved: the last aspect went, and the runtime with it.
	RuntimeRemoved bool
}

// Unweave removes the aspects named (or all with all) from s's kernel,
// saving their unread records first. When no aspect is left, the
// runtime goes too: nothing of klasy stays in the kernel.
func Unweave(ctx context.Context, s *Session, names []string, all bool) (*UnweaveReport, error) {
	unlock, err := s.lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	rep := &UnweaveReport{}
	mods, err := s.T.Modules(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing the modules of %s: %w", s.T.Name(), err)
	}
	st, err := s.Status(ctx)
	if err != nil && !all {
		return nil, err
	}
	var remove []string // advice modules
	if all {
		for _, m := range mods {
			if strings.HasPrefix(m.Name, "klasy_a_") {
				remove = append(remove, m.Name)
			}
		}
	} else {
		for _, n := range names {
			mod := ModuleName(AspectName(n))
			found := false
			for _, m := range mods {
				found = found || m.Name == mod
			}
			if !found {
				return nil, fmt.Errorf("aspect %s is not woven into %s (klasy status lists what is)", AspectName(n), s.T.Name())
			}
			remove = append(remove, mod)
		}
	}
	if st != nil && err == nil {
		rs, _, err := s.Drain(ctx)
		if err != nil {
			return nil, err
		}
		if err := s.SaveRecords(rs); err != nil {
			return nil, fmt.Errorf("saving %d unread records: %w", len(rs), err)
		}
		rep.Saved += len(rs)
	}
	for _, mod := range remove {
		if err := kmod.Unload(ctx, s.T, mod); err != nil {
			return rep, fmt.Errorf("removing %s from %s: %w", mod, s.T.Name(), err)
		}
		rep.Aspects = append(rep.Aspects, strings.TrimPrefix(mod, "klasy_a_"))
	}
	runtimeLoaded := false
	for _, m := range mods {
		runtimeLoaded = runtimeLoaded || m.Name == runtime.ModuleName
	}
	if !runtimeLoaded {
		return rep, nil
	}
	st, err = s.Status(ctx)
	if err != nil && !all {
		return rep, err
	}
	if st != nil && len(st.Aspects) > 0 && !all {
		return rep, nil
	}
	if st != nil && err == nil {
		rs, _, err := s.Drain(ctx)
		if err == nil {
			err = s.SaveRecords(rs)
		}
		if err != nil {
			return rep, fmt.Errorf("saving the last records: %w", err)
		}
		rep.Saved += len(rs)
	}
	if err := kmod.Unload(ctx, s.T, runtime.ModuleName); err != nil {
		return rep, fmt.Errorf("removing the klasy runtime from %s: %w", s.T.Name(), err)
	}
	rep.RuntimeRemoved = true
	return rep, nil
}
