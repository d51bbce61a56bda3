// Package golden compares what a test produced with a file kept under
// testdata, and rewrites the file instead when the test binary runs with
// -update (go test ./pkg -update), so that a change of output is read
// in the diff before it is committed.
package golden

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files with what the tests produce")

// Check compares got with the golden file at path (relative to the test's
// package), first writing got there with -update.
func Check(t testing.TB, path, got string) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run the test with -update to create it, then read it)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (rerun with -update and read the diff):\n%s", path, got)
	}
}
