package traceview

import (
	"strings"
	"testing"

	"github.com/klasy/klasy/weaver/records"
)

// A record of an access join point says which kind of access it was;
// one of another join point says nothing of the kind.
func TestLineAccessKind(t *testing.T) {
	r := records.TraceRecord{Aspect: "a", Advice: 1, CPU: 0, PID: 7, Comm: "dd", PC: "0xffffffff81230090",
		Function: "vfs_setpos", File: "fs/read_write.c", Line: 62, Access: "write", Values: records.Ints(5)}
	if got := Line(r); !strings.Contains(got, "fs/read_write.c:62 (write) 0xffffffff81230090 5") {
		t.Errorf("Line = %q, want the access kind after file:line", got)
	}
	r.Access = ""
	if got := Line(r); strings.Contains(got, "(") {
		t.Errorf("Line = %q for an execution join point: want no kind", got)
	}
}
