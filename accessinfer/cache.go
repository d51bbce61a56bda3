package accessinfer

import (
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/klasy/klasy/dwarfmap/elfimage"
	"github.com/klasy/klasy/internal/atomicfile"
	"github.com/klasy/klasy/internal/cachedir"
)

// cacheFormat changes whenever what Infer finds for the same image may
// change: a file of another format is inferred again.
const cacheFormat = 50

// cacheHeader starts a cache file; the accesses follow one by one, so
// that a reader keeps only those it selects.
type cacheHeader struct {
	BuildID  string
	Accesses int
	Funcs    int
}

// Select returns the accesses of the whole image whose struct and member
// keep selects. Infer runs once per build: its accesses are kept by
// build-id under $KLASY_CACHE/accessinfer, as dwarfmap keeps its index
// (an image without a build-id is inferred each time), and read back
// one by one (a vmlinux has some 400,000). progress, if
// not nil, is told when inference runs. total is how many accesses the
// image has.
func Select(img *elfimage.Image, keep func(st, member string) bool, progress func(format string, args ...any)) (sel []Access, total int, err error) {
	// A module's accesses are at the addresses elfimage lays it out at.
	layout := ""
	if img.Rel {
		layout = "-" + elfimage.ModuleLayout
	}
	path := filepath.Join(cachedir.Root(), "accessinfer", fmt.Sprintf("%s-v%d%s.gob", img.BuildID, cacheFormat, layout))
	if img.BuildID == "" {
		path = "" // nothing to keep them by: inferred each time
	} else if sel, total, err := readCache(path, img.BuildID, keep); err == nil {
		return sel, total, nil
	}
	if progress != nil {
		once := "once per build"
		if path == "" {
			once = "no build-id to keep them by"
		}
		progress("inferring the struct member accesses of %s from its DWARF and code (no .debug_klasy; %s)", img.Path, once)
	}
	r, err := Infer(img, Options{})
	if err != nil {
		return nil, 0, err
	}
	if progress != nil {
		progress("inferred %d member accesses in %d functions in %.1fs", len(r.Accesses), r.Funcs, (r.Scan + r.Track).Seconds())
	}
	if path != "" && os.MkdirAll(filepath.Dir(path), 0o755) == nil {
		// A cache: failing to keep it only costs inferring again.
		atomicfile.Write(path, func(w io.Writer) error {
			enc := gob.NewEncoder(w)
			if err := enc.Encode(cacheHeader{img.BuildID, len(r.Accesses), r.Funcs}); err != nil {
				return err
			}
			for i := range r.Accesses {
				if err := enc.Encode(&r.Accesses[i]); err != nil {
					return err
				}
			}
			return nil
		})
	}
	for _, a := range r.Accesses {
		if keep(a.Struct, a.Member) {
			sel = append(sel, a)
		}
	}
	return sel, len(r.Accesses), nil
}

func readCache(path, buildID string, keep func(st, member string) bool) ([]Access, int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	dec := gob.NewDecoder(f)
	var h cacheHeader
	if err := dec.Decode(&h); err != nil {
		return nil, 0, err
	}
	if h.BuildID != buildID {
		return nil, 0, errors.New("another build's accesses")
	}
	var sel []Access
	for i := 0; i < h.Accesses; i++ {
		var a Access
		if err := dec.Decode(&a); err != nil {
			return nil, 0, fmt.Errorf("%s: access %d of %d: %w", path, i, h.Accesses, err)
		}
		if keep(a.Struct, a.Member) {
			sel = append(sel, a)
		}
	}
	return sel, h.Accesses, nil
}
