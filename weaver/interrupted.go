package weaver

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/klasy/klasy/internal/interrupt"
	"github.com/klasy/klasy/kmod"
	"github.com/klasy/klasy/weaver/gen"
	"github.com/klasy/klasy/weaver/runtime"
)

// A signal cannot stop init_module: the kernel registers every hook of
// the advice module and then the aspect is live, whether or not the
// klasy that asked for it is still there to say so. So a weave that is
// interrupted while the module loads waits for the load, unloads the
// module again and only then says that nothing was woven; a second
// signal stops the wait and says the module is still loading. kill -9
// leaves a record on the host (the weaving pid, in the target's state
// directory), by which the next klasy tells such a module from a woven
// one: status warns of it, weave waits for it, unweave waits for it to
// finish loading and removes it.

// unwindTimeout bounds the rollback of an interrupted load: the load
// itself may take minutes for thousands of hooks under emulation, its
// unload as long.
const unwindTimeout = 30 * time.Minute

// loadAdvice loads the advice module ko, all or nothing under signals:
// ctx cancelled while the kernel loads it makes it wait for the load and
// unload the module; loadedRuntime says whether this weave loaded the
// runtime, which goes too then.
func (s *Session) loadAdvice(ctx context.Context, m *gen.Module, ko []byte, loadedRuntime bool) error {
	stopProgress := s.loadProgress(ctx, m)
	defer stopProgress()
	unwind := func(uctx context.Context) error { return kmod.Unload(uctx, s.T, m.Name) }
	interrupted, err := s.loadWhole(ctx, m.Name, ko, "", "unwoven", unwind)
	if !interrupted {
		if err != nil {
			return s.explainLoad(ctx, m, err)
		}
		return nil
	}
	if loadedRuntime && !errors.Is(err, errLeftLoaded) {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), unwindTimeout)
		defer cancel()
		s.releaseRuntime(uctx)
	}
	return err
}

// loadRuntime loads the runtime module ko with params, all or nothing
// under signals as an advice module is (loadWhole): it has no hooks and
// loads in a moment, but a weave interrupted in that moment left it
// loaded while saying nothing was woven.
func (s *Session) loadRuntime(ctx context.Context, ko []byte, params string) (interrupted bool, err error) {
	return s.loadWhole(ctx, runtime.ModuleName, ko, params, "removed", func(uctx context.Context) error {
		return unloadRuntime(uctx, s.T)
	})
}

// errLeftLoaded is matched by loadWhole's error when the module stays
// in the kernel (a second signal, or an unwind that failed).
var errLeftLoaded = errors.New("left loaded")

// leftLoaded is an error that says the module stays in the kernel.
type leftLoaded struct{ msg string }

func (e *leftLoaded) Error() string        { return e.msg }
func (e *leftLoaded) Is(target error) bool { return target == errLeftLoaded }

// loadWhole loads module mod (image ko, parameters params) and, when ctx
// is cancelled meanwhile, waits for the load to end and removes the
// module again with unwind (undone says how: "unwoven", "removed"),
// since no signal stops init_module. Until the load ends the target's
// state directory records the weaving pid, by which the next klasy
// tells a module left by kill -9 (Orphans). interrupted says whether ctx
// ended; err is then what to tell the user, else the load's own error.
func (s *Session) loadWhole(ctx context.Context, mod string, ko []byte, params, undone string, unwind func(context.Context) error) (interrupted bool, err error) {
	if ctx.Err() != nil {
		return true, fmt.Errorf("interrupted before %s was loaded; nothing was woven", mod)
	}
	rec := s.weavingRecord(mod)
	if err := os.WriteFile(rec, []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return false, fmt.Errorf("recording the load of %s: %w", mod, err)
	}
	done := make(chan error, 1)
	// The load goes on in the kernel whatever ctx does: the request must
	// too, so that its end is seen.
	go func() {
		_, err := kmod.Load(context.WithoutCancel(ctx), s.T, ko, params)
		done <- err
	}()
	select {
	case err := <-done:
		os.Remove(rec)
		return false, err
	case <-ctx.Done():
	}
	fmt.Fprintf(s.log, "klasy: interrupted while %s loads %s, which the kernel cannot stop: waiting for the load to end to %s it (interrupt again to stop waiting)\n", s.T.Name(), mod, map[string]string{"unwoven": "unweave", "removed": "remove"}[undone])
	select {
	case err = <-done:
	case <-interrupt.Again(ctx):
		return true, &leftLoaded{fmt.Sprintf("interrupted twice: stopped waiting: %s %s; 'klasy unweave --all' on %s waits for the load and removes it", mod, s.moduleState(mod), s.T.Name())}
	}
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), unwindTimeout)
	defer cancel()
	if err != nil {
		os.Remove(rec)
		return true, fmt.Errorf("interrupted: the load of %s failed (%v); nothing was woven", mod, err)
	}
	if err := unwind(uctx); err != nil {
		return true, &leftLoaded{fmt.Sprintf("interrupted: %s finished loading but could not be %s (%v): it is live in %s; 'klasy unweave --all' removes it", mod, undone, err, s.T.Name())}
	}
	os.Remove(rec)
	return true, fmt.Errorf("interrupted: %s finished loading and was %s again; nothing was woven", mod, undone)
}

// weavingRecord is the file that says a weave of module mod is under
// way, holding the weaving klasy's pid.
func (s *Session) weavingRecord(mod string) string {
	return filepath.Join(s.stateDir(), "weaving-"+mod)
}

// moduleState says, for a message, what the kernel is doing with the
// advice module mod.
func (s *Session) moduleState(mod string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	states, err := s.moduleStates(ctx)
	switch st, ok := states[mod]; {
	case err != nil:
		return fmt.Sprintf("may still be loading in %s (its state cannot be read: %v)", s.T.Name(), err)
	case !ok:
		return fmt.Sprintf("is not loaded in %s", s.T.Name())
	case st == "Loading":
		return fmt.Sprintf("is still loading in %s (its hooks are registering) and goes live when the load ends", s.T.Name())
	}
	return fmt.Sprintf("is loaded and live in %s", s.T.Name())
}

// moduleStates reads each module's state from the target's
// /proc/modules: Live, Loading or Unloading.
func (s *Session) moduleStates(ctx context.Context) (map[string]string, error) {
	b, err := s.T.ReadFile(ctx, "/proc/modules")
	if err != nil {
		return nil, fmt.Errorf("reading /proc/modules in %s: %w", s.T.Name(), err)
	}
	states := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) >= 5 {
			states[f[0]] = f[4]
		}
	}
	return states, nil
}

// Orphan is an advice module whose weave never finished: the klasy
// that wove it was killed (its record names a pid that is gone), or it
// is loading while no klasy weaves it.
type Orphan struct {
	Module string
	Pid    int    // the weave's klasy, 0 if unknown
	State  string // the kernel's: Loading or Live
}

// who names the weave's klasy.
func (o Orphan) who() string {
	if o.Pid > 0 {
		return fmt.Sprintf("klasy pid %d, which is gone", o.Pid)
	}
	return "a klasy that is gone"
}

func (o Orphan) String() string {
	who := o.who()
	if o.Module == runtime.ModuleName {
		if o.State == "Loading" {
			return fmt.Sprintf("%s is still loading, by a weave of %s, and nothing was woven with it; 'klasy unweave --all' waits for the load and removes it", o.Module, who)
		}
		return fmt.Sprintf("%s is loaded with no aspect, by a weave of %s that never finished; 'klasy unweave --all' removes it", o.Module, who)
	}
	if o.State == "Loading" {
		return fmt.Sprintf("%s is still loading, by a weave of %s: its hooks go live when the load ends, and nothing reported it woven; 'klasy unweave --all' waits for the load and removes it", o.Module, who)
	}
	return fmt.Sprintf("%s is live, from a weave of %s that never reported it woven; 'klasy unweave --all' (or unweave %s) removes it", o.Module, who, strings.TrimPrefix(o.Module, "klasy_a_"))
}

// Orphans lists the advice modules in the kernel whose weave was
// interrupted without its rollback (kill -9). Records of modules no
// longer loaded are removed.
func (s *Session) Orphans(ctx context.Context) ([]Orphan, error) {
	states, err := s.moduleStates(ctx)
	if err != nil {
		return nil, err
	}
	var out []Orphan
	recorded := map[string]bool{}
	recs, _ := filepath.Glob(filepath.Join(s.stateDir(), "weaving-*"))
	for _, rec := range recs {
		mod := strings.TrimPrefix(filepath.Base(rec), "weaving-")
		b, _ := os.ReadFile(rec)
		pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		if pid > 0 && processAlive(pid) {
			recorded[mod] = true // a weave under way
			continue
		}
		st, ok := states[mod]
		if !ok {
			os.Remove(rec)
			continue
		}
		if mod == runtime.ModuleName && st == "Live" {
			// A runtime with aspects is no orphan: a weave took it.
			if rs, err := s.Status(ctx); err != nil || (rs != nil && len(rs.Aspects) > 0) {
				os.Remove(rec)
				continue
			}
		}
		recorded[mod] = true
		out = append(out, Orphan{Module: mod, Pid: pid, State: st})
	}
	for mod, st := range states {
		if st == "Loading" && strings.HasPrefix(mod, gen.ModuleName("")) && !recorded[mod] {
			out = append(out, Orphan{Module: mod, State: st})
		}
	}
	return out, nil
}

// WaitLoaded waits while the kernel loads any of mods, saying so once.
func (s *Session) WaitLoaded(ctx context.Context, mods []string) error {
	said := false
	for {
		states, err := s.moduleStates(ctx)
		if err != nil {
			return err
		}
		var loading []string
		for _, m := range mods {
			if states[m] == "Loading" {
				loading = append(loading, m)
			}
		}
		if len(loading) == 0 {
			return nil
		}
		if !said {
			fmt.Fprintf(s.log, "klasy: waiting for %s to finish loading in %s (a weave was interrupted; the kernel cannot stop a load)\n", strings.Join(loading, ", "), s.T.Name())
			said = true
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("interrupted while waiting for %s to finish loading in %s: %w", strings.Join(loading, ", "), s.T.Name(), ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// settleOrphans, before a weave, waits for orphaned loads and warns of
// every orphan.
func (s *Session) settleOrphans(ctx context.Context) error {
	orphans, err := s.Orphans(ctx)
	if err != nil || len(orphans) == 0 {
		return err
	}
	var mods []string
	for _, o := range orphans {
		mods = append(mods, o.Module)
	}
	if err := s.WaitLoaded(ctx, mods); err != nil {
		return err
	}
	if orphans, err = s.Orphans(ctx); err != nil {
		return err
	}
	for _, o := range orphans {
		if o.Module == runtime.ModuleName {
			// Nothing was woven with it: it goes, as its weave would
			// have removed it, and this weave loads its own.
			if err := unloadRuntime(ctx, s.T); err != nil {
				return fmt.Errorf("removing the klasy runtime a killed weave left in %s: %w", s.T.Name(), err)
			}
			os.Remove(s.weavingRecord(o.Module))
			fmt.Fprintf(s.log, "klasy: removed %s, which a weave of %s left loaded with no aspect\n", o.Module, o.who())
			continue
		}
		fmt.Fprintf(s.log, "klasy: warning: %s\n", o)
	}
	return nil
}
