package kbuild

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Diagnostic is one message of the compiler or of kbuild's tools.
type Diagnostic struct {
	// File is the source file as the compiler named it: the name a
	// #line directive gave, or a path relative to the module's sources
	// for the module's own files. For a message without a location it is
	// the tool that printed it (cc1, modpost, ld) or the object it is
	// about (objtool's), and Line is 0.
	File string
	Line int
	Col  int // 0 when the compiler gave no column
	// Severity is what gcc printed: "error", "fatal error", "warning",
	// "note", "internal compiler error", "sorry, unimplemented".
	Severity string
	Msg      string
}

// String formats d as gcc does: file:line:col: severity: msg.
func (d Diagnostic) String() string {
	switch {
	case d.Line == 0:
		return fmt.Sprintf("%s: %s: %s", d.File, d.Severity, d.Msg)
	case d.Col == 0:
		return fmt.Sprintf("%s:%d: %s: %s", d.File, d.Line, d.Severity, d.Msg)
	}
	return fmt.Sprintf("%s:%d:%d: %s: %s", d.File, d.Line, d.Col, d.Severity, d.Msg)
}

// IsError reports whether d fails the build (warnings and notes do not).
func (d Diagnostic) IsError() bool {
	switch d.Severity {
	case "warning", "note":
		return false
	}
	return true
}

const severities = `error|fatal error|warning|note|internal compiler error|sorry, unimplemented`

var (
	// gcc: file:line:col: severity: msg, or file:line: when columns are off.
	located = regexp.MustCompile(`^(.+?):(\d+):(?:(\d+):)? (` + severities + `): (.*)$`)
	// gcc's driver and cc1, ld: tool: severity: msg; objtool names the
	// object: file.o: warning: objtool: msg.
	tool = regexp.MustCompile(`^([^\s:]+): (` + severities + `): (.*)$`)
	// modpost: ERROR: modpost: msg.
	modpost = regexp.MustCompile(`^(ERROR|WARNING): modpost: (.*)$`)
)

// ParseLog returns the diagnostics in a build log, in order. Paths under
// dir (the build directory) are made relative to it; other lines (make's
// own, gcc's source excerpts and "In function" context) are skipped.
func ParseLog(log []byte, dir string) []Diagnostic {
	var ds []Diagnostic
	prefix := strings.TrimSuffix(dir, "/") + "/"
	rel := func(s string) string {
		if dir == "" {
			return s
		}
		return strings.ReplaceAll(s, prefix, "")
	}
	relFile := func(s string) string {
		if r := strings.TrimPrefix(s, prefix); dir != "" && r != "" {
			return r
		}
		return s
	}
	for _, line := range strings.Split(string(log), "\n") {
		line = strings.TrimRight(line, "\r")
		if m := located.FindStringSubmatch(line); m != nil {
			d := Diagnostic{File: relFile(m[1]), Severity: m[4], Msg: rel(m[5])}
			d.Line, _ = strconv.Atoi(m[2])
			d.Col, _ = strconv.Atoi(m[3])
			ds = append(ds, d)
		} else if m := modpost.FindStringSubmatch(line); m != nil {
			ds = append(ds, Diagnostic{File: "modpost", Severity: strings.ToLower(m[1]), Msg: rel(m[2])})
		} else if m := tool.FindStringSubmatch(line); m != nil {
			ds = append(ds, Diagnostic{File: relFile(m[1]), Severity: m[2], Msg: rel(m[3])})
		}
	}
	return ds
}
