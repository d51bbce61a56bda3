package weaver

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/klasy/klasy/weaver/gen"
	"github.com/klasy/klasy/weaver/joinpoint"
	"github.com/klasy/klasy/weaver/records"
	"github.com/klasy/klasy/weaver/target"
	"golang.org/x/sys/unix"
)

// hookError matches the runtime's line for a hook the kernel refused.
var hookError = regexp.MustCompile(`klasy_runtime: aspect (\S+): .*hook (\d+) .*error (-?\d+)`)

// reloaded matches the runtime's line for a module address that moved
// since generation (klasy_check_addrs).
var reloaded = regexp.MustCompile(`klasy_runtime: aspect (\S+): module (\S+) was reloaded since the aspect was generated: hook (\d+) \(\S*\) (is at|reads) (\S+) at (0x[0-9a-f]+), kallsyms has (.*) there; weave again`)

// explainLoad turns a failed load of the advice module into an error
// naming the join point the kernel refused, from the runtime's message.
func (s *Session) explainLoad(ctx context.Context, m *gen.Module, err error) error {
	log, lerr := s.T.KernelLog(ctx)
	if lerr == nil {
		var last, moved []string
		sc := bufio.NewScanner(bytes.NewReader(log))
		for sc.Scan() {
			if g := reloaded.FindStringSubmatch(sc.Text()); g != nil && g[1] == m.Aspect {
				last, moved = nil, g
			} else if g := hookError.FindStringSubmatch(sc.Text()); g != nil && g[1] == m.Aspect {
				last, moved = g, nil
			}
		}
		if moved != nil {
			i, _ := strconv.Atoi(moved[3])
			where := "hook " + moved[3]
			if i >= 0 && i < len(m.Hooks) {
				h := m.Hooks[i]
				where = (&joinpoint.JoinPoint{Function: h.Function, InlinedIn: h.InlinedIn, File: h.File, Line: h.Line}).Where()
			}
			what := "the hook at " + where + " was generated for"
			if moved[4] == "reads" {
				what = "the advice at " + where + " reads a static of it, generated for"
			}
			return fmt.Errorf("module %s was reloaded in %s since the aspect was generated: %s %s [%s] at %s, where kallsyms now has %s; weave again; nothing was woven",
				moved[2], s.T.Name(), what, moved[5], moved[2], moved[6], moved[7])
		}
		if last != nil {
			i, _ := strconv.Atoi(last[2])
			errno, _ := strconv.Atoi(last[3])
			if i >= 0 && i < len(m.Hooks) {
				h := m.Hooks[i]
				if h.Kind == joinpoint.KprobeReplace {
					return s.replaceRefused(ctx, m, h, unix.Errno(-errno))
				}
				where := (&joinpoint.JoinPoint{Function: h.Function, InlinedIn: h.InlinedIn, File: h.File, Line: h.Line}).Where()
				return fmt.Errorf("the kernel refused the %s at %s (image address %#x): %v; nothing was woven", h.Kind, where, h.Addr, unix.Errno(-errno))
			}
		}
	}
	return fmt.Errorf("loading the advice module %s into %s: %w; nothing was woven", m.Name, s.T.Name(), err)
}

// Where the kernel shows the functions ftrace hooks and who hooks them
// (with debugfs mounted, tracefs is mounted under it).
var enabledFunctions = []string{"/sys/kernel/debug/tracing/enabled_functions", "/sys/kernel/tracing/enabled_functions"}

// replaceRefused explains why the runtime or the kernel refused the
// replacement hook h (errno as the runtime logged it), naming what holds
// the function when it can be found: another aspect (klasy status),
// another kprobe (the kprobes list), a livepatch or another ftrace user
// that changes the function's return path (enabled_functions).
func (s *Session) replaceRefused(ctx context.Context, m *gen.Module, h *joinpoint.Hook, errno unix.Errno) error {
	fn := h.Function
	fail := func(format string, args ...any) error {
		return fmt.Errorf("cannot replace %s (%s:%d): %s; nothing was woven", fn, h.File, h.Line, fmt.Sprintf(format, args...))
	}
	switch errno {
	case unix.EADDRINUSE:
		if st, err := s.Status(ctx); err == nil && st != nil {
			for _, a := range st.Aspects {
				if a.Module == m.Name {
					continue
				}
				for _, oh := range a.Hooks {
					// A hook on an ftrace_ops is no kprobe: ftrace runs it
					// beside the replacement.
					if oh.Image != h.Addr || oh.Module != h.Module || oh.Mech == records.MechFtraceOps {
						continue
					}
					if oh.Kind == records.KindReplace {
						return fail("it is already replaced by aspect %s; unweave %s first", a.Name, a.Name)
					}
					return fail("aspect %s has a %s hook at its entry, whose advice a replacement would stop; unweave %s, weave the replacement, then weave %s again (probes added after a replacement run before it)", a.Name, oh.Kind, a.Name, a.Name)
				}
			}
		}
		if list, err := s.T.ReadFile(ctx, target.KprobesList); err == nil {
			for _, line := range strings.Split(string(list), "\n") {
				if f := strings.Fields(line); len(f) >= 3 && (f[2] == fn+"+0x0" || strings.HasPrefix(f[2], fn+"+0x0")) {
					return fail("another kprobe is at its entry (%s: %q), and a replacement must be the first kprobe there", target.KprobesList, strings.Join(f, " "))
				}
			}
		}
		return fail("another kprobe is at its entry (see %s), and a replacement must be the first kprobe there", target.KprobesList)
	case unix.EBUSY:
		for _, p := range enabledFunctions {
			b, err := s.T.ReadFile(ctx, p)
			if err != nil {
				continue
			}
			for _, line := range strings.Split(string(b), "\n") {
				f := strings.Fields(line)
				if len(f) == 0 || f[0] != fn {
					continue
				}
				if strings.Contains(line, "klp_") {
					return fail("a livepatch already replaces it (ftrace: %q)", strings.Join(f, " "))
				}
				return fail("another ftrace user already changes its return path (ftrace: %q)", strings.Join(f, " "))
			}
		}
		return fail("another ftrace user (a livepatch?) already changes its return path: ftrace allows one (EBUSY)")
	case unix.EOPNOTSUPP:
		return fail("the kernel did not put the kprobe at its entry on ftrace, which a replacement needs to change its return path")
	}
	return fail("the kernel refused the kprobe at its entry (image address %#x): %v", h.Addr, errno)
}
