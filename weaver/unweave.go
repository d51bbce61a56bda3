package weaver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/klasy/klasy/kmod"
	"github.com/klasy/klasy/weaver/gen"
	"github.com/klasy/klasy/weaver/records"
	"github.com/klasy/klasy/weaver/runtime"
	"github.com/klasy/klasy/weaver/target"
)

// UnweaveReport says what an unweave removed.
type UnweaveReport struct {
	Aspects []string // aspects removed
	Saved   int      // records drained and kept for klasy trace
	// RuntimeRemoved: the last aspect went, and the runtime with it.
	RuntimeRemoved bool
	// RuntimeHeld: the last aspect went, but tasks are still inside
	// functions that had after advice on the direct trampoline (this many
	// aspects' trampolines): the runtime stays loaded until they return,
	// and the next unweave of the last aspect removes it.
	RuntimeHeld int
}

// Unweave removes the aspects named (or all with all) from s's kernel.
// Their unread records are drained once their hooks are gone and saved
// on the host for klasy trace. When no aspect is left, the runtime goes
// too: nothing of klasy stays in the kernel.
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
	loaded := map[string]bool{}
	for _, m := range mods {
		loaded[m.Name] = true
	}
	// With --all, a runtime of another ABI is removed too.
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
			mod := gen.ModuleName(gen.AspectName(n))
			if !loaded[mod] {
				return nil, fmt.Errorf("aspect %s is not woven into %s (klasy status lists what is)", gen.AspectName(n), s.T.Name())
			}
			remove = append(remove, mod)
		}
	}
	// An oops in advice may leave kprobes' state broken: say so first.
	s.WarnTroubles(ctx)
	// A load an interrupted weave left cannot be unloaded until it ends.
	if err := s.WaitLoaded(ctx, append(slices.Clip(remove), runtime.ModuleName)); err != nil {
		return rep, err
	}
	for _, mod := range remove {
		if err := unloadSettling(ctx, s.T, mod); err != nil {
			return rep, fmt.Errorf("removing %s from %s: %w", mod, s.T.Name(), err)
		}
		os.Remove(s.weavingRecord(mod))
		os.Remove(s.wovenPath(mod, ".json"))
		os.Remove(s.wovenPath(mod, ".ko"))
		rep.Aspects = append(rep.Aspects, strings.TrimPrefix(mod, "klasy_a_"))
	}
	if !loaded[runtime.ModuleName] {
		return rep, nil
	}
	left, err := s.saveUnread(ctx, st, rep)
	if err != nil && !all {
		return rep, err
	}
	if left > 0 && !all {
		return rep, nil
	}
	if err := unloadRuntime(ctx, s.T); err != nil {
		if held := s.fexitHeld(ctx, err); held > 0 {
			rep.RuntimeHeld = held
			fmt.Fprintf(s.log, "klasy: the runtime stays loaded in %s: tasks are still inside functions that had after advice; the next unweave removes it once they return\n", s.T.Name())
			return rep, nil
		}
		return rep, fmt.Errorf("removing the klasy runtime from %s: %w", s.T.Name(), err)
	}
	os.Remove(s.weavingRecord(runtime.ModuleName))
	rep.RuntimeRemoved = true
	return rep, nil
}

// unloadRuntime unloads the runtime, waiting a moment while it is busy:
// an open debugfs file of the runtime holds a reference on it, and the
// agent closes the records file it just streamed a little after the
// stream's end.
func unloadRuntime(ctx context.Context, t target.Target) error {
	deadline := time.Now().Add(3 * time.Second)
	for {
		err := kmod.Unload(ctx, t, runtime.ModuleName)
		if err == nil || !errors.Is(err, kmod.ErrInUse) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// fexitHeld says how many unwoven aspects' direct trampolines hold the
// runtime when err, unloading it, says it is in use: calls still inside
// hooked functions, which unweave does not wait for.
func (s *Session) fexitHeld(ctx context.Context, err error) int {
	if !errors.Is(err, kmod.ErrInUse) {
		return 0
	}
	st, serr := s.Status(ctx)
	if serr != nil || st == nil {
		return 0
	}
	return st.FexitHeld
}

// saveUnread drains the records left in the kernel and saves them on the
// host, symbolized with prev for the aspects just removed. It returns how
// many aspects are still woven.
func (s *Session) saveUnread(ctx context.Context, prev *records.Status, rep *UnweaveReport) (int, error) {
	rs, st, err := s.drain(ctx, prev)
	if err != nil {
		return 0, err
	}
	if err := s.SaveRecords(rs); err != nil {
		return 0, fmt.Errorf("saving %d unread records: %w", len(rs), err)
	}
	rep.Saved += len(rs)
	if st == nil {
		return 0, nil
	}
	return len(st.Aspects), nil
}

// unloadSettling unloads mod, trying again for a few seconds while the
// kernel says it is in use: a module that has just finished loading (an
// interrupted weave's, waited for) was seen held by one reference for a
// moment in the lab.
func unloadSettling(ctx context.Context, t target.Target, mod string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := kmod.Unload(ctx, t, mod)
		if err == nil || !errors.Is(err, kmod.ErrInUse) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(500 * time.Millisecond):
		}
	}
}
