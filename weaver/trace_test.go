package weaver

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/klasy/klasy/weaver/records"
	"github.com/klasy/klasy/weaver/target"
)

// namedTarget is a target that has only a name: all TakeSaved and
// SaveRecords need to find the session's state directory.
type namedTarget struct {
	target.Target
	name string
}

func (t namedTarget) Name() string { return t.name }

// Concurrent readers of saved records (issue 21, "readers"): each record
// unweave saved is taken by exactly one of 8 readers at once, and none
// fails (they printed them 4-6 times and 3-5 failed with "remove
// .../saved.jsonl: no such file or directory").
func TestTakeSavedConcurrentReaders(t *testing.T) {
	t.Setenv("KLASY_CACHE", t.TempDir())
	s := &Session{T: namedTarget{name: "lab readers"}}
	const n = 500
	var saved []records.TraceRecord
	for i := range n {
		saved = append(saved, records.TraceRecord{Aspect: "a", Function: fmt.Sprint("f", i), TimeNS: uint64(i)})
	}
	for round := range 20 {
		if err := s.SaveRecords(saved); err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		seen := map[string]int{}
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rs, done, err := s.TakeSaved()
				if err != nil {
					t.Errorf("round %d: TakeSaved: %v", round, err)
					return
				}
				if err := done(); err != nil {
					t.Errorf("round %d: done: %v", round, err)
				}
				mu.Lock()
				for _, r := range rs {
					seen[r.Function]++
				}
				mu.Unlock()
			}()
		}
		wg.Wait()
		if len(seen) != n {
			t.Fatalf("round %d: readers took %d distinct records, want %d", round, len(seen), n)
		}
		for f, c := range seen {
			if c != 1 {
				t.Fatalf("round %d: record %s taken %d times, want once", round, f, c)
			}
		}
		if ents, _ := os.ReadDir(s.stateDir()); len(ents) != 0 {
			var names []string
			for _, e := range ents {
				names = append(names, e.Name())
			}
			t.Fatalf("round %d: the state directory holds %q after every reader is done, want nothing", round, names)
		}
	}
}

// Records a reader took and did not finish with (its process killed
// before done) are taken by the next reader once that process is gone.
func TestTakeSavedAfterDeadReader(t *testing.T) {
	t.Setenv("KLASY_CACHE", t.TempDir())
	s := &Session{T: namedTarget{name: "lab dead"}}
	if err := s.SaveRecords([]records.TraceRecord{{Aspect: "a", Function: "old"}}); err != nil {
		t.Fatal(err)
	}
	// A reader with a process ID no process has took the file.
	dead := filepath.Join(s.stateDir(), fmt.Sprintf("saved.jsonl.%d.1.taken", deadPID(t)))
	if err := os.Rename(s.savedPath(), dead); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveRecords([]records.TraceRecord{{Aspect: "a", Function: "new"}}); err != nil {
		t.Fatal(err)
	}
	rs, done, err := s.TakeSaved()
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 || rs[0].Function != "old" || rs[1].Function != "new" {
		t.Fatalf("TakeSaved = %+v, want the dead reader's record, then the new one", rs)
	}
	if err := done(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Errorf("the dead reader's file is still there: %v", err)
	}
}

// deadPID is a process ID no process has.
func deadPID(t *testing.T) int {
	for pid := 4_000_000; pid > 100_000; pid -= 7919 {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); os.IsNotExist(err) {
			return pid
		}
	}
	t.Skip("no free process ID found")
	return 0
}
