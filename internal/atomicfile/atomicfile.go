// Package atomicfile writes a file whole or not at all: through a
// temporary file in the same directory, renamed over the path once
// complete, so that a concurrent reader sees the old file or the new
// one, never a part.
package atomicfile

import (
	"bufio"
	"io"
	"os"
	"path/filepath"
)

// Write writes what fn writes to path. The temporary file is created
// with mode 0600 and removed when anything fails.
func Write(path string, fn func(io.Writer) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	w := bufio.NewWriter(tmp)
	err = fn(w)
	if err == nil {
		err = w.Flush()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
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
