package aspect

import (
	"fmt"
	"sort"
	"strings"
)

// Position is a place in an aspect file, 1-based line and byte column,
// the way gcc and the Go toolchain print them. Line 0 is the whole file
// (a message about its encoding), printed as the file name alone.
type Position struct {
	Filename string
	Offset   int // byte offset into the file
	Line     int
	Col      int
}

func (p Position) String() string {
	if p.Line == 0 {
		return p.Filename
	}
	return fmt.Sprintf("%s:%d:%d", p.Filename, p.Line, p.Col)
}

// Diagnostic is one error found in an aspect file.
type Diagnostic struct {
	Pos Position
	Msg string
}

func (d Diagnostic) String() string { return d.Pos.String() + ": " + d.Msg }

// Diagnostics is a list of errors, sorted by position once complete. It
// implements error so that callers that only need "valid or not" can use
// it as one.
type Diagnostics []Diagnostic

func (ds Diagnostics) Error() string {
	var b strings.Builder
	for i, d := range ds {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(d.String())
	}
	return b.String()
}

// sortDedup orders diagnostics by position and drops exact repeats, which
// arise when one designator sits in several AND-groups of a pointcut.
func (ds Diagnostics) sortDedup() Diagnostics {
	sort.SliceStable(ds, func(i, j int) bool { return ds[i].Pos.Offset < ds[j].Pos.Offset })
	out := ds[:0]
	for i, d := range ds {
		if i > 0 && d.Pos.Offset == ds[i-1].Pos.Offset && d.Msg == ds[i-1].Msg {
			continue
		}
		out = append(out, d)
	}
	return out
}

// lineIndex turns byte offsets into line:column positions. A line ends
// at LF, at CR LF, or at a CR alone (old Mac files), as editors count
// them.
type lineIndex struct {
	filename string
	starts   []int // offset of the first byte of each line
}

func newLineIndex(filename string, src []byte) *lineIndex {
	li := &lineIndex{filename: filename, starts: []int{0}}
	for i, c := range src {
		if c == '\n' || c == '\r' && (i+1 == len(src) || src[i+1] != '\n') {
			li.starts = append(li.starts, i+1)
		}
	}
	return li
}

func (li *lineIndex) pos(off int) Position {
	line := sort.Search(len(li.starts), func(i int) bool { return li.starts[i] > off }) - 1
	if line < 0 {
		line = 0
	}
	return Position{Filename: li.filename, Offset: off, Line: line + 1, Col: off - li.starts[line] + 1}
}
