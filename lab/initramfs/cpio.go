// Package initramfs builds the initramfs archives lab guests boot: newc
// cpio archives that are the same byte for byte for the same entries, a
// static busybox with a link for each of its applets, the kernel modules
// a guest loads with everything they depend on, and a cache of built
// archives keyed by their inputs. What goes into an archive is its
// caller's (the lab's guests, a Xen lab's domains).
package initramfs

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
)

// Archive collects the files of an initramfs and writes them as a
// "newc" cpio archive, the format the kernel unpacks. Entries are written
// sorted by path with fixed owners and timestamps, so the same inputs
// always give the same bytes.
type Archive struct {
	entries map[string]Entry
}

// Entry is one file of an archive.
type Entry struct {
	Mode         uint32 // type and permission bits
	Data         []byte // file contents or symlink target
	Major, Minor uint32 // device number for character devices
}

const (
	sIFDIR = 0o040000
	sIFREG = 0o100000
	sIFLNK = 0o120000
	sIFCHR = 0o020000
)

// New returns an empty archive.
func New() *Archive { return &Archive{entries: map[string]Entry{}} }

// add records an entry, creating its parent directories. A path added
// twice is an error in the caller's file list, so it panics.
func (a *Archive) add(path string, e Entry) {
	path = strings.Trim(path, "/")
	if _, dup := a.entries[path]; dup {
		panic("initramfs: duplicate path " + path)
	}
	for dir := parentDir(path); dir != ""; dir = parentDir(dir) {
		if _, ok := a.entries[dir]; !ok {
			a.entries[dir] = Entry{Mode: sIFDIR | 0o755}
		}
	}
	a.entries[path] = e
}

// Dir adds a directory, mode 0755, unless the archive has it.
func (a *Archive) Dir(path string) {
	if _, ok := a.entries[strings.Trim(path, "/")]; !ok {
		a.add(path, Entry{Mode: sIFDIR | 0o755})
	}
}

// File adds a regular file. File, Symlink and Chardev create the parent
// directories they need and panic on a path added before.
func (a *Archive) File(path string, perm uint32, data []byte) {
	a.add(path, Entry{Mode: sIFREG | perm, Data: data})
}

// Symlink adds a symbolic link to target.
func (a *Archive) Symlink(path, target string) {
	a.add(path, Entry{Mode: sIFLNK | 0o777, Data: []byte(target)})
}

// Chardev adds a character device.
func (a *Archive) Chardev(path string, perm, major, minor uint32) {
	a.add(path, Entry{Mode: sIFCHR | perm, Major: major, Minor: minor})
}

func (a *Archive) has(path string) bool {
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
func (a *Archive) WriteTo(w io.Writer) (int64, error) {
	names := make([]string, 0, len(a.entries))
	for n := range a.entries {
		names = append(names, n)
	}
	sort.Strings(names)
	cw := &countWriter{w: w}
	for i, n := range names {
		e := a.entries[n]
		nlink := uint32(1)
		if e.Mode&0o170000 == sIFDIR {
			nlink = 2
		}
		writeCpioHeader(cw, uint32(i+1), e, nlink, n)
		cw.Write(e.Data)
		cw.pad()
	}
	writeCpioHeader(cw, 0, Entry{}, 1, "TRAILER!!!")
	return cw.n, cw.err
}

func writeCpioHeader(cw *countWriter, ino uint32, e Entry, nlink uint32, name string) {
	fmt.Fprintf(cw, "070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		ino, e.Mode, 0, 0, nlink, 0, len(e.Data), 0, 0, e.Major, e.Minor, len(name)+1, 0)
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

// Parse reads a newc archive back into its entries by path, checking the
// format's magic, alignment and trailer as the kernel does.
func Parse(data []byte) (map[string]Entry, error) {
	out := map[string]Entry{}
	off := 0
	align := func(n int) int { return (n + 3) &^ 3 }
	for {
		if off+110 > len(data) || string(data[off:off+6]) != "070701" {
			return nil, fmt.Errorf("offset %d: no newc header", off)
		}
		var field [13]uint32
		for i := range field {
			v, err := strconv.ParseUint(string(data[off+6+8*i:off+14+8*i]), 16, 32)
			if err != nil {
				return nil, fmt.Errorf("offset %d: bad header field %d: %v", off, i, err)
			}
			field[i] = uint32(v)
		}
		mode, size, rmaj, rmin, nsize := field[1], int(field[6]), field[9], field[10], int(field[11])
		if nsize < 1 || off+110+nsize > len(data) {
			return nil, fmt.Errorf("offset %d: name of %d bytes past the end", off, nsize)
		}
		name := string(data[off+110 : off+110+nsize-1])
		body := align(off + 110 + nsize)
		if name == "TRAILER!!!" {
			return out, nil
		}
		if body+size > len(data) {
			return nil, fmt.Errorf("offset %d: %s: %d bytes past the end", off, name, size)
		}
		out[name] = Entry{Mode: mode, Data: data[body : body+size], Major: rmaj, Minor: rmin}
		off = align(body + size)
	}
}
