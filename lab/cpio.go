package lab

import (
	"fmt"
	"io"
	"sort"
	"strings"
)

// cpioArchive collects the files of an initramfs and writes them as a
// "newc" cpio archive, the format the kernel unpacks. Entries are written
// sorted by path with fixed owners and timestamps, so the same inputs
// always give the same bytes.
type cpioArchive struct {
	entries map[string]cpioEntry
}

type cpioEntry struct {
	mode         uint32 // type and permission bits
	data         []byte // file contents or symlink target
	major, minor uint32 // device number for character devices
}

const (
	sIFDIR = 0o040000
	sIFREG = 0o100000
	sIFLNK = 0o120000
	sIFCHR = 0o020000
)

func newCpio() *cpioArchive { return &cpioArchive{entries: map[string]cpioEntry{}} }

// add records an entry, creating its parent directories. A path added
// twice is an error in the caller's file list, so it panics.
func (a *cpioArchive) add(path string, e cpioEntry) {
	path = strings.Trim(path, "/")
	if _, dup := a.entries[path]; dup {
		panic("initramfs: duplicate path " + path)
	}
	for dir := parentDir(path); dir != ""; dir = parentDir(dir) {
		if _, ok := a.entries[dir]; !ok {
			a.entries[dir] = cpioEntry{mode: sIFDIR | 0o755}
		}
	}
	a.entries[path] = e
}

func (a *cpioArchive) dir(path string) {
	if _, ok := a.entries[strings.Trim(path, "/")]; !ok {
		a.add(path, cpioEntry{mode: sIFDIR | 0o755})
	}
}
func (a *cpioArchive) file(path string, perm uint32, data []byte) {
	a.add(path, cpioEntry{mode: sIFREG | perm, data: data})
}
func (a *cpioArchive) symlink(path, target string) {
	a.add(path, cpioEntry{mode: sIFLNK | 0o777, data: []byte(target)})
}
func (a *cpioArchive) chardev(path string, perm, major, minor uint32) {
	a.add(path, cpioEntry{mode: sIFCHR | perm, major: major, minor: minor})
}

func (a *cpioArchive) has(path string) bool {
	_, ok := a.entries[strings.Trim(path, "/")]
	return ok
}

func parentDir(p string) string {
	if i := strings.LastIndexByte(p, '/'); i > 0 {
		return p[:i]
	}
	return ""
}

// WriteTo writes the archive. Directories sort before their contents
// because a parent path is a prefix of its children.
func (a *cpioArchive) WriteTo(w io.Writer) (int64, error) {
	names := make([]string, 0, len(a.entries))
	for n := range a.entries {
		names = append(names, n)
	}
	sort.Strings(names)
	cw := &countWriter{w: w}
	for i, n := range names {
		e := a.entries[n]
		nlink := uint32(1)
		if e.mode&0o170000 == sIFDIR {
			nlink = 2
		}
		writeCpioHeader(cw, uint32(i+1), e, nlink, n)
		cw.Write(e.data)
		cw.pad()
	}
	writeCpioHeader(cw, 0, cpioEntry{}, 1, "TRAILER!!!")
	return cw.n, cw.err
}

func writeCpioHeader(cw *countWriter, ino uint32, e cpioEntry, nlink uint32, name string) {
	fmt.Fprintf(cw, "070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		ino, e.mode, 0, 0, nlink, 0, len(e.data), 0, 0, e.major, e.minor, len(name)+1, 0)
	cw.Write([]byte(name))
	cw.Write([]byte{0})
	cw.pad()
}

// countWriter keeps the first error and the offset, for the 4-byte
// alignment newc needs after headers and data.
type countWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (c *countWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	c.err = err
	return n, err
}

func (c *countWriter) pad() {
	if r := c.n % 4; r != 0 {
		c.Write(make([]byte, 4-r))
	}
}
