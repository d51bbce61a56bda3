// Package boundedread reads a whole input into memory with a bound on
// its size, so that /dev/zero, /dev/urandom or an endless pipe given
// where a file belongs ends in one clear error instead of reading until
// the kernel kills klasy.
//
// File opens regular files and pipes (a named FIFO, a shell's <(cmd) or
// /dev/stdin on a pipe) and refuses other special files, such as devices
// and directories, before reading them. Opening a FIFO waits for a
// writer, as cat does; what the writer sends is bounded like the rest.
// Reader bounds any io.Reader, such as standard input.
//
// OpenRegular is the one open for files that klasy maps or seeks in
// rather than reads through, such as kernel images: it takes regular
// files only, and never blocks on a FIFO.
package boundedread

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// TooLargeError is an input with more than Limit bytes.
type TooLargeError struct {
	Name  string // the file, or how the caller calls the input (<stdin>)
	Limit int64
	What  string // what the input is, for the message: "an aspect"
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("%s: larger than the %s limit for %s", e.Name, Size(e.Limit), e.What)
}

// NotFileError is a path that names neither a regular file nor a pipe,
// or (from OpenRegular) no regular file.
type NotFileError struct {
	Name    string
	Kind    string // "a directory", "a character device", "a FIFO", ...
	Regular bool   // only a regular file would do (OpenRegular)
}

func (e *NotFileError) Error() string {
	if e.Regular {
		return fmt.Sprintf("%s: %s, not a regular file", e.Name, e.Kind)
	}
	return fmt.Sprintf("%s: %s, not a regular file or a pipe", e.Name, e.Kind)
}

// Size prints a limit as people write it: 1 MiB, 64 KiB, 100 bytes.
func Size(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// File reads the file at path, which must hold at most limit bytes; what
// says what the file is, for the error.
func File(path string, limit int64, what string) ([]byte, error) {
	// Stat first, so that devices are refused without opening them and a
	// FIFO only after its type is known.
	fi, err := stat(path)
	if err != nil {
		return nil, err
	}
	if err := check(path, fi, limit, what); err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// Check what was opened: path may have changed since the Stat.
	if fi, err = f.Stat(); err != nil {
		return nil, err
	}
	if err := check(path, fi, limit, what); err != nil {
		return nil, err
	}
	return read(path, f, limit, what, fi.Size())
}

// OpenRegular opens path for reading if it is a regular file, and
// returns what it opened with its FileInfo. Anything else is refused
// with a *NotFileError: devices, directories and sockets before they are
// opened, a FIFO (which would wait for a writer forever) either then or,
// should path have changed since, right after a non-blocking open.
func OpenRegular(path string) (*os.File, fs.FileInfo, error) {
	fi, err := stat(path)
	if err != nil {
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, nil, &NotFileError{Name: path, Kind: kind(fi.Mode()), Regular: true}
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	if fi, err = f.Stat(); err != nil {
		f.Close()
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, &NotFileError{Name: path, Kind: kind(fi.Mode()), Regular: true}
	}
	return f, fi, nil
}

// stat is os.Stat, with its error said as os.Open says it: "open FILE:
// no such file or directory".
func stat(path string) (fs.FileInfo, error) {
	fi, err := os.Stat(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			pe.Op = "open"
		}
		return nil, err
	}
	return fi, nil
}

// check refuses special files and regular files over the limit.
func check(path string, fi fs.FileInfo, limit int64, what string) error {
	m := fi.Mode()
	switch {
	case m.IsRegular():
		if fi.Size() > limit {
			return &TooLargeError{Name: path, Limit: limit, What: what}
		}
		return nil
	case m&fs.ModeNamedPipe != 0:
		return nil
	}
	return &NotFileError{Name: path, Kind: kind(m)}
}

// kind says what a file that is not regular is.
func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	}
	return "a special file"
}

// Reader reads r to its end, at most limit bytes; name says what r is
// (<stdin>) and what what it holds, for the error.
func Reader(name string, r io.Reader, limit int64, what string) ([]byte, error) {
	return read(name, r, limit, what, 0)
}

// read reads r with a buffer of size+1 bytes to start with, as
// os.ReadFile does, so that a regular file is read without copies.
func read(name string, r io.Reader, limit int64, what string, size int64) ([]byte, error) {
	b := make([]byte, 0, min(max(size+1, 512), limit+1))
	lr := io.LimitReader(r, limit+1)
	for {
		n, err := lr.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)] // grow
		}
	}
	if int64(len(b)) > limit {
		return nil, &TooLargeError{Name: name, Limit: limit, What: what}
	}
	return b, nil
}
