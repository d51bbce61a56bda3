package weaver

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/klasy/klasy/internal/atomicfile"
	"github.com/klasy/klasy/weaver/health"
)

// What went wrong in the kernel since an aspect was woven (a NULL
// dereference in advice oopses it, and the runtime's status does not
// show that): each weave records, in the target's state directory, the
// kernel's taint flags and its log's last stamp then, and keeps the
// advice module it loaded (with its symbols and #line info) to map a
// report's RIP to the advice. status, trace and unweave say what the
// kernel reported since.

// wovenRecord is that record.
type wovenRecord struct {
	Aspect  string  `json:"aspect"`
	Taint   uint64  `json:"taint"`
	LogTime float64 `json:"log_time"`
}

func (s *Session) wovenPath(mod, ext string) string {
	return filepath.Join(s.stateDir(), "woven-"+mod+ext)
}

// recordWoven records the kernel's state as module mod (its image ko)
// goes live. The lookout is best effort: a failure only loses it.
func (s *Session) recordWoven(ctx context.Context, mod, aspect string, ko []byte) {
	taint, log, err := s.kernelState(ctx)
	if err != nil {
		fmt.Fprintf(s.log, "klasy: warning: %v: what the kernel reports later will not be checked\n", err)
		return
	}
	b, _ := json.Marshal(wovenRecord{Aspect: aspect, Taint: taint, LogTime: health.LastTime(log)})
	if atomicfile.WriteFile(s.wovenPath(mod, ".ko"), ko) != nil {
		return
	}
	atomicfile.WriteFile(s.wovenPath(mod, ".json"), b)
}

func (s *Session) kernelState(ctx context.Context) (uint64, []byte, error) {
	b, err := s.T.ReadFile(ctx, health.TaintPath)
	if err != nil {
		return 0, nil, fmt.Errorf("reading %s in %s: %w", health.TaintPath, s.T.Name(), err)
	}
	taint, err := health.ParseTaint(b)
	if err != nil {
		return 0, nil, err
	}
	// An agent that runs no commands has no dmesg for us: the flags
	// still tell.
	log, _ := s.T.KernelLog(ctx)
	return taint, log, nil
}

// Troubles says what the kernel reported since the aspects woven in it
// were woven: flags it gained, and each oops, BUG, warning, lockup or
// stall with where it was, naming the advice and its aspect line when
// that was in an advice module. Records of aspects no longer woven are
// removed.
func (s *Session) Troubles(ctx context.Context) ([]string, error) {
	states, err := s.moduleStates(ctx)
	if err != nil {
		return nil, err
	}
	recs, _ := filepath.Glob(s.wovenPath("*", ".json"))
	var first *wovenRecord
	byModule := map[string]wovenRecord{}
	for _, p := range recs {
		mod := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(p), "woven-"), ".json")
		if _, ok := states[mod]; !ok {
			os.Remove(p)
			os.Remove(s.wovenPath(mod, ".ko"))
			continue
		}
		var r wovenRecord
		if b, err := os.ReadFile(p); err != nil || json.Unmarshal(b, &r) != nil {
			continue
		}
		byModule[mod] = r
		if first == nil || r.LogTime < first.LogTime {
			first = &r
		}
	}
	if first == nil {
		return nil, nil
	}
	taint, log, err := s.kernelState(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	if gained := taint &^ (first.Taint | health.Expected); gained != 0 {
		out = append(out, fmt.Sprintf("%s is tainted %s since aspect %s was woven: its state is unsure, and unweaving may crash it; 'klasy lab down' and 'up' restart a lab", s.T.Name(), health.Letters(gained), first.Aspect))
	}
	for _, e := range health.Events(log, first.LogTime) {
		msg := fmt.Sprintf("%s reported %q (%.1f s after boot)", s.T.Name(), e.What, e.Time)
		if e.RIP != "" {
			msg += " at " + e.RIP
		}
		if r, ok := byModule[e.Module]; ok {
			msg += ", in advice of aspect " + r.Aspect
			if ko, err := os.ReadFile(s.wovenPath(e.Module, ".ko")); err == nil {
				if p, err := health.Locate(ko, e.Func, e.Off); err == nil {
					msg += fmt.Sprintf(" at %s:%d", p.File, p.Line)
				}
			}
		}
		out = append(out, msg)
	}
	return out, nil
}

// WarnTroubles writes Troubles' lines as warnings on the session's log,
// each after the session's domain when it is one of a domains file's.
func (s *Session) WarnTroubles(ctx context.Context) {
	prefix := "klasy: warning: "
	if s.Domain != "" {
		prefix += "domain " + s.Domain + ": "
	}
	lines, err := s.Troubles(ctx)
	if err != nil {
		fmt.Fprintf(s.log, "%scannot check the kernel's health: %v\n", prefix, err)
	}
	for _, l := range lines {
		fmt.Fprintf(s.log, "%s%s\n", prefix, l)
	}
}
