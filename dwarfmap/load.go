package dwarfmap

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"runtime/debug"
	"time"

	"github.com/klasy/klasy/dwarfmap/cachefile"
	"github.com/klasy/klasy/dwarfmap/elfimage"
	"github.com/klasy/klasy/dwarfmap/tablebuild"
	"github.com/klasy/klasy/internal/mmapfile"
)

// Options control Load.
type Options struct {
	// CacheDir holds index files; "" means CacheDir(). NoCache skips it.
	CacheDir string
	NoCache  bool
	// Rebuild ignores an existing cache file.
	Rebuild bool
	// Log receives progress and notices (a stale cache being rebuilt);
	// nil discards them.
	Log func(format string, args ...any)
}

// LoadInfo says how Load got its index.
type LoadInfo struct {
	CachePath string
	FromCache bool
	Built     time.Duration // build time when not from cache
}

// Load opens the image at path and returns its index, from the cache when
// a valid one exists for the image's build-id and size, else by building
// it (and then saving it). The Index keeps the image open for the
// queries that decode DWARF lazily; Close it when done.
func Load(path string, opt Options) (_ *Index, info LoadInfo, err error) {
	var img *elfimage.Image
	defer func() {
		if err != nil && img != nil {
			img.Close()
		}
	}()
	defer mmapfile.Catch(&err, debug.SetPanicOnFault(true))
	logf := opt.Log
	if logf == nil {
		logf = func(string, ...any) {}
	}
	img, err = elfimage.Open(path)
	if err != nil {
		return nil, info, err
	}
	dir := opt.CacheDir
	if dir == "" {
		dir = CacheDir()
	}
	if !opt.NoCache {
		info.CachePath = filepath.Join(dir, cachefile.Name(img))
	}
	if info.CachePath != "" && !opt.Rebuild {
		f, h, err := cachefile.Open(info.CachePath)
		switch {
		case err == nil && h.BuildID == img.BuildID && h.ImageSize == img.Size:
			x := fromCache(f, h)
			x.img = img
			x.release = chain(x.release, img.Close)
			f.Rebuild = func(cause error) error {
				logf("cache %s unusable (%v): rebuilding", info.CachePath, cause)
				y, err := build(img, info.CachePath, logf)
				if err != nil {
					return err
				}
				x.rebuilt.Store(y)
				return nil
			}
			info.FromCache = true
			return x, info, nil
		case err == nil:
			f.Close()
			logf("cache %s is for another image (build-id %q, %d bytes): rebuilding", info.CachePath, h.BuildID, h.ImageSize)
		case errors.Is(err, fs.ErrNotExist):
		default:
			logf("cache %s unusable (%v): rebuilding", info.CachePath, err)
		}
	}
	start := time.Now()
	x, err := build(img, info.CachePath, logf)
	if err != nil {
		return nil, info, err
	}
	info.Built = time.Since(start)
	x.release = img.Close
	return x, info, nil
}

// build indexes img with progress to logf and saves the index at
// cachePath (unless "").
func build(img *elfimage.Image, cachePath string, logf func(string, ...any)) (*Index, error) {
	if cachePath != "" {
		for _, name := range cachefile.RemoveStale(filepath.Dir(cachePath)) {
			logf("removed %s, left by an interrupted build", name)
		}
	}
	last := time.Now()
	x, err := Build(img, func(done, total int) {
		if time.Since(last) > time.Second || done == total {
			logf("indexing %s: %d/%d units", filepath.Base(img.Path), done, total)
			last = time.Now()
		}
	})
	if err != nil {
		return nil, err
	}
	if cachePath != "" {
		if err := cachefile.Write(cachePath, x.t, x.BuildID, img.Size); err != nil {
			// The index is still good; only the next run pays again.
			logf("cannot save index to %s: %v", cachePath, err)
		}
	}
	return x, nil
}

// Progress is called from Build as units finish.
type Progress = tablebuild.Progress

// Build indexes img without a cache file (tablebuild.Build): an image
// that changes while it is read gives a *mmapfile.ChangedError, never an
// index.
func Build(img *elfimage.Image, progress Progress) (*Index, error) {
	t, err := tablebuild.Build(img, progress)
	if err != nil {
		return nil, err
	}
	return &Index{BuildID: img.BuildID, t: t, img: img}, nil
}

func chain(fns ...func() error) func() error {
	return func() error {
		var errs []error
		for _, f := range fns {
			if f != nil {
				errs = append(errs, f())
			}
		}
		return errors.Join(errs...)
	}
}

// Image returns the image the index was loaded for.
func (x *Index) Image() *elfimage.Image { return x.img }

// explain blames err on the image if it changed under x
// (elfimage.Image.Explain).
func (x *Index) explain(err error) error {
	if err == nil || x.img == nil {
		return err
	}
	return x.img.Explain(err)
}

func (x *Index) needImage() error {
	if x.img == nil {
		return fmt.Errorf("index has no image attached")
	}
	return nil
}
