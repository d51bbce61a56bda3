// Package atomicfile writes a file whole or not at all: through a
// temporary file in the same directory, renamed over the path once
// complete, so that a concurrent reader sees the old file or the new
// one, never a part. A path that is not a regular file (a device such
// as /dev/null or /dev/full, a FIFO) is written through instead, as a
// shell's > would, and a symbolic link is followed: the file it points
// to is replaced, the link stays.
package atomicfile

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Resolve follows path's symbolic links to the file they name, and
// returns that path and its information, nil when there is no file
// there yet (a link that dangles names the file it would create).
func Resolve(path string) (string, fs.FileInfo, error) {
	for range 40 {
		fi, err := os.Lstat(path)
		if errors.Is(err, fs.ErrNotExist) {
			return path, nil, nil
		}
		if err != nil {
			return path, nil, err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			return path, fi, nil
		}
		to, err := os.Readlink(path)
		if err != nil {
			return path, nil, err
		}
		if !filepath.IsAbs(to) {
			to = filepath.Join(filepath.Dir(path), to)
		}
		path = to
	}
	return path, nil, &fs.PathError{Op: "open", Path: path, Err: unix.ELOOP}
}

// Check says whether Write could write path, without writing anything:
// not a directory, and when it is a regular file or none yet, in a
// directory that exists and can be written. A command that consumes
// what it writes checks its output first.
func Check(path string) error {
	p, fi, err := Resolve(path)
	if err != nil {
		return err
	}
	if fi != nil && fi.IsDir() {
		return &fs.PathError{Op: "write", Path: path, Err: unix.EISDIR}
	}
	if fi != nil && !fi.Mode().IsRegular() {
		return nil // written through
	}
	dir := filepath.Dir(p)
	di, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if !di.IsDir() {
		return &fs.PathError{Op: "write", Path: path, Err: fmt.Errorf("%s is not a directory", dir)}
	}
	if err := unix.Access(dir, unix.W_OK); err != nil {
		return &fs.PathError{Op: "write", Path: path, Err: fmt.Errorf("cannot create files in %s: %w", dir, err)}
	}
	return nil
}

// Write writes what fn writes to path. The temporary file is created
// with mode 0600 and removed when anything fails. A path that is a
// device or a FIFO (after its links) is opened and written through,
// and its write errors returned (ENOSPC on /dev/full).
func Write(path string, fn func(io.Writer) error) error {
	p, fi, err := Resolve(path)
	if err != nil {
		return err
	}
	if fi != nil && fi.IsDir() {
		return &fs.PathError{Op: "write", Path: path, Err: unix.EISDIR}
	}
	if fi != nil && !fi.Mode().IsRegular() {
		return writeThrough(p, fn)
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), filepath.Base(p)+".tmp*")
	if err != nil {
		return err
	}
	err = fill(tmp, fn)
	if err == nil {
		err = os.Rename(tmp.Name(), p)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

// writeThrough writes what fn writes to the device or FIFO at path.
func writeThrough(path string, fn func(io.Writer) error) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	return fill(f, fn)
}

// fill writes what fn writes to f, buffered, and closes f: the first
// error of the three.
func fill(f *os.File, fn func(io.Writer) error) error {
	w := bufio.NewWriter(f)
	err := fn(w)
	if err == nil {
		err = w.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// WriteFile writes data to path.
func WriteFile(path string, data []byte) error {
	return Write(path, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}
