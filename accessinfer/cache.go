package accessinfer

import (
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/klasy/klasy/dwarfmap/elfimage"
	"github.com/klasy/klasy/internal/atomicfile"
	"github.com/klasy/klasy/internal/cachedir"
)

// cacheFormat changes whenever what Infer finds for the same image may
// change: a file of another format is inferred again.
const cacheFormat = 2

var (
	memMu sync.Mutex
	mem   = map[string]*Result{}
)

// Cached is Infer of the whole image, kept by build-id under
// $KLASY_CACHE/accessinfer and in this process, as dwarfmap keeps its
// index: inferring a whole vmlinux takes seconds, reading it back
// milliseconds. progress, if not nil, is told when inference runs.
func Cached(img *elfimage.Image, progress func(format string, args ...any)) (*Result, error) {
	if img.BuildID == "" {
		return nil, fmt.Errorf("%s has no build-id to keep its inferred accesses by", img.Path)
	}
	key := fmt.Sprintf("%s-v%d", img.BuildID, cacheFormat)
	memMu.Lock()
	defer memMu.Unlock()
	if r := mem[key]; r != nil {
		return r, nil
	}
	path := filepath.Join(cachedir.Root(), "accessinfer", key+".gob")
	if r, err := readCache(path); err == nil {
		mem[key] = r
		return r, nil
	}
	if progress != nil {
		progress("inferring the struct member accesses of %s from its DWARF and code (no .debug_klasy; once per build)", img.Path)
	}
	r, err := Infer(img, Options{})
	if err != nil {
		return nil, err
	}
	if progress != nil {
		progress("inferred %d member accesses in %d functions in %.1fs", len(r.Accesses), r.Funcs, (r.Scan + r.Track).Seconds())
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err == nil {
		// A cache: failing to keep it only costs inferring again.
		atomicfile.Write(path, func(w io.Writer) error { return gob.NewEncoder(w).Encode(r) })
	}
	mem[key] = r
	return r, nil
}

func readCache(path string) (*Result, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var r Result
	if err := gob.NewDecoder(f).Decode(&r); err != nil {
		return nil, err
	}
	if r.Accesses == nil && r.Funcs == 0 {
		return nil, errors.New("empty")
	}
	return &r, nil
}
