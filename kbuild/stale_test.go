package kbuild_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/klasy/klasy/kbuild"
)

// TestRemoveStaleUnowned: build directories an older klasy left (issue
// 21, "orphans": no owner record was written then) are removed once they
// are an hour old, unless a process still names one (its build runs) or
// it was kept for its caller; younger ones may be a build's being made.
func TestRemoveStaleUnowned(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	mk := func(name string, age time.Duration, files ...string) string {
		dir := filepath.Join(tmp, "klasy-kbuild-"+name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range append(files, "hello.o") {
			if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		old := time.Now().Add(-age)
		if err := os.Chtimes(dir, old, old); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	old := mk("1", 2*time.Hour)
	young := mk("2", time.Minute)
	kept := mk("3", 2*time.Hour, ".klasy-kept")
	running := mk("4", 2*time.Hour)
	// A build of an older klasy, still running in running.
	sleep := exec.Command("sh", "-c", "sleep 60; : "+running)
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sleep.Process.Kill(); sleep.Wait() })

	removed := kbuild.RemoveStale()
	if !slices.Equal(removed, []string{old}) {
		t.Errorf("RemoveStale removed %q, want only %q", removed, old)
	}
	for _, dir := range []string{young, kept, running} {
		if _, err := os.Stat(dir); err != nil {
			t.Errorf("%s: %v", dir, err)
		}
	}
	if _, err := os.Stat(old); !os.IsNotExist(err) {
		t.Errorf("%s left: %v", old, err)
	}
}
