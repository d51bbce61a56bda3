// Package taskfilter is which tasks an aspect's advice runs for, decided
// in the kernel at each hit before anything else: klasy weave's --pid
// (one thread group) and --comm (one command name), and klasy's own
// process in the target (the agent serving the weave, or klasy itself
// on this machine, with all its threads) left out unless --include-self.
// The weaver finds that process's thread group id through the target
// (Self) and the generator writes the test as C (C) at the top of every
// handler of the advice module.
package taskfilter

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
)

// CommLen is the kernel's TASK_COMM_LEN, the terminating NUL included.
const CommLen = 16

// Filter is what klasy weave was asked for.
type Filter struct {
	PID         int    // --pid: only this thread group (0: any)
	Comm        string // --comm: only tasks of this command name ("": any)
	IncludeSelf bool   // --include-self: klasy's own process too
	// SelfTGID is the thread group id of klasy's own process in the
	// target, left out unless IncludeSelf (0: not known, none left out).
	SelfTGID int
}

// Check refuses what no task can match.
func (f Filter) Check() error {
	if f.PID < 0 {
		return fmt.Errorf("--pid %d: want a process id from 1 up", f.PID)
	}
	if len(f.Comm) >= CommLen {
		return fmt.Errorf("--comm %q: the kernel keeps %d bytes of a command name, so no task is called that; give its first %d bytes (%q)", f.Comm, CommLen-1, CommLen-1, f.Comm[:CommLen-1])
	}
	if strings.ContainsRune(f.Comm, 0) {
		return fmt.Errorf("--comm %q: a command name has no NUL byte", f.Comm)
	}
	return nil
}

// Empty says whether the filter lets every task through.
func (f Filter) Empty() bool {
	return f.PID == 0 && f.Comm == "" && (f.IncludeSelf || f.SelfTGID == 0)
}

// SelfStat is the file whose first field is the thread group id of the
// process that reads it: read through the target, klasy's own process
// there.
const SelfStat = "/proc/self/stat"

// Self is the thread group id of the process that serves reads of the
// target, from its /proc/self/stat as read reads it.
func Self(ctx context.Context, read func(ctx context.Context, path string) ([]byte, error)) (int, error) {
	b, err := read(ctx, SelfStat)
	if err != nil {
		return 0, fmt.Errorf("finding klasy's own process in the target: %w", err)
	}
	f, _, _ := bytes.Cut(b, []byte(" "))
	tgid, err := strconv.Atoi(string(f))
	if err != nil || tgid <= 0 {
		return 0, fmt.Errorf("finding klasy's own process in the target: %s begins %q, not a process id", SelfStat, f)
	}
	return tgid, nil
}

// Func is the name of the C function C writes.
const Func = "klasy_skip"

// C is the C of Func: true when the advice does not run for the current
// task. Empty for a filter that lets every task through.
func (f Filter) C() string {
	if f.Empty() {
		return ""
	}
	var b strings.Builder
	b.WriteString("/* The tasks advice runs for: klasy weave")
	if f.PID != 0 {
		fmt.Fprintf(&b, " --pid %d", f.PID)
	}
	if f.Comm != "" {
		fmt.Fprintf(&b, " --comm %s", strings.ReplaceAll(f.Comm, "*/", "* /"))
	}
	if !f.IncludeSelf && f.SelfTGID != 0 {
		fmt.Fprintf(&b, ", klasy's own process (%d) left out", f.SelfTGID)
	}
	b.WriteString(". */\n")
	fmt.Fprintf(&b, "static __always_inline bool %s(void)\n{\n", Func)
	if !f.IncludeSelf && f.SelfTGID != 0 {
		fmt.Fprintf(&b, "\tif (current->tgid == %d)\n\t\treturn true;\n", f.SelfTGID)
	}
	if f.PID != 0 {
		fmt.Fprintf(&b, "\tif (current->tgid != %d)\n\t\treturn true;\n", f.PID)
	}
	if f.Comm != "" {
		// The name and the NUL after it: the kernel pads comm with NULs.
		// Compared byte by byte, no memcmp: the test runs before the
		// handler's recursion guard (klasy_enter), and memcmp may be a
		// hooked function.
		fmt.Fprintf(&b, "\t{\n\t\tstatic const char want[%d] = \"", len(f.Comm)+1)
		for i := 0; i < len(f.Comm); i++ {
			fmt.Fprintf(&b, "\\x%02x", f.Comm[i])
		}
		fmt.Fprintf(&b, "\";\n\t\tunsigned int i;\n\n\t\tfor (i = 0; i < %d; i++)\n\t\t\tif (READ_ONCE(current->comm[i]) != want[i])\n\t\t\t\treturn true;\n\t}\n", len(f.Comm)+1)
	}
	b.WriteString("\treturn false;\n}")
	return b.String()
}
