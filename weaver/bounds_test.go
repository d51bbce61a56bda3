package weaver

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klasy/klasy/weaver/gen"
	"github.com/klasy/klasy/weaver/joinpoint"
	"github.com/klasy/klasy/weaver/target"
)

// registering is a kernel registering hooks: each read of its kprobes
// list has 100 lines more than the last.
type registering struct {
	namedTarget
	mu    sync.Mutex
	lines int
}

func (r *registering) ReadFile(_ context.Context, path string) ([]byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if path != target.KprobesList {
		return nil, nil
	}
	b := strings.Repeat("ffffffffc0000000  k  f+0x0  [FTRACE]\n", r.lines)
	r.lines += 100
	return []byte(b), nil
}

// A load of thousands of hooks (issue 21, "unbounded work": 7,204 hooks
// loaded for minutes with no word for 100 s) says how many are
// registered as it goes, and stops saying so when the load ends.
func TestLoadProgressReported(t *testing.T) {
	defer func(d time.Duration) { progressEvery = d }(progressEvery)
	progressEvery = 20 * time.Millisecond
	var log bytes.Buffer
	s := &Session{T: &registering{namedTarget: namedTarget{name: "lab big"}}, log: &syncWriter{w: &log}}
	m := &gen.Module{Name: "klasy_a_big", Hooks: make([]*joinpoint.Hook, 1500)}
	stop := s.loadProgress(context.Background(), m)
	time.Sleep(150 * time.Millisecond)
	stop()
	said := log.String()
	lines := regexp.MustCompile(`klasy: klasy_a_big: (\d+) of 1500 hooks registered in lab big after \d+ s\n`).FindAllStringSubmatch(said, -1)
	if len(lines) < 2 || lines[0][1] != "100" {
		t.Fatalf("progress of a load of 1500 hooks: %q, want a line every interval from 100 registered on", said)
	}
	time.Sleep(60 * time.Millisecond)
	if log.String() != said {
		t.Errorf("progress reported after the load ended: %q", strings.TrimPrefix(log.String(), said))
	}
	// A small load says nothing.
	log.Reset()
	s.loadProgress(context.Background(), &gen.Module{Name: "klasy_a_small", Hooks: make([]*joinpoint.Hook, 999)})()
	if log.Len() != 0 {
		t.Errorf("a load of 999 hooks reported progress: %q", log.String())
	}
}

type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}
