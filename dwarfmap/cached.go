package dwarfmap

import (
	"io"
	"runtime/debug"

	"github.com/klasy/klasy/dwarfmap/cachefile"
	"github.com/klasy/klasy/internal/mmapfile"
)

// An index loaded from its cache file (package cachefile) reads the
// file's sections in place, each checked when a query first reads it.

// Sets of sections the queries read (cachefile.File.Need adds the core
// ones, names and files, which every query reads).
const (
	funcSecs   = 1<<cachefile.SecFuncs | 1<<cachefile.SecByName | 1<<cachefile.SecRanges | 1<<cachefile.SecInlSum
	inlineSecs = funcSecs | 1<<cachefile.SecInlines | 1<<cachefile.SecInlName | 1<<cachefile.SecInlRanges
	funcAtSecs = 1<<cachefile.SecSpans | 1<<cachefile.SecFuncs | 1<<cachefile.SecRanges
	// Lines of a function: its rows by address, less its inlined copies;
	// lines of a file: its rows by file, each with its function (FuncAt,
	// also used by the nearest-line rule).
	funcLineSecs = inlineSecs | funcAtSecs | 1<<cachefile.SecRows | 1<<cachefile.SecByAddr
	fileLineSecs = funcAtSecs | 1<<cachefile.SecRows | 1<<cachefile.SecByFile
	structSecs   = 1 << cachefile.SecStructs
	allSections  = 1<<cachefile.NumSections - 1
)

// ErrCacheInvalid is wrapped by the errors of a cache file that cannot
// be used.
var ErrCacheInvalid = cachefile.ErrInvalid

// CacheDir is where indexes are kept: $KLASY_CACHE/dwarfmap, with
// KLASY_CACHE defaulting as in scripts/lib.sh.
func CacheDir() string { return cachefile.Dir() }

// fromCache returns the index of the tables of the cache file f, which
// it closes when closed; they are checked when first used.
func fromCache(f *cachefile.File, h cachefile.Header) *Index {
	return &Index{BuildID: h.BuildID, t: f.Tables(), file: f, release: f.Close}
}

// use checks the sections in mask (see cachefile.File.Need) and returns
// the index to query: x, or the index rebuilt after damage was found.
// Every exported query starts with it, for all the sections it reads.
func (x *Index) use(mask uint32) (*Index, error) {
	if x.file == nil {
		return x, nil
	}
	if err := x.file.Need(mask); err != nil {
		return nil, err
	}
	if y := x.rebuilt.Load(); y != nil {
		return y, nil
	}
	return x, nil
}

// replaced returns the rebuilt index if damage was found (also during a
// query that was running on x, which then runs again on it), else nil.
func (x *Index) replaced() *Index {
	return x.rebuilt.Load()
}

// chunksOK checks the chunks holding elements [lo, hi) of chunked section
// sec, reporting false if one is damaged (x is then replaced).
func (x *Index) chunksOK(sec, lo, hi int) bool {
	return x.file == nil || x.file.ChunksOK(sec, lo, hi)
}

// Err returns the error that left x unable to answer (a damaged cache
// section that could not be rebuilt), nil normally. Queries without an
// error result return nothing then; callers check Err after them.
func (x *Index) Err() error {
	if x.file == nil {
		return nil
	}
	return x.file.Err()
}

// WriteTo writes x in cache format (cachefile.Encode).
func (x *Index) WriteTo(w io.Writer, imageSize int64) (_ int64, err error) {
	defer mmapfile.Catch(&err, debug.SetPanicOnFault(true))
	x, err = x.use(allSections)
	if err != nil {
		return 0, err
	}
	if !x.chunksOK(cachefile.SecRows, 0, len(x.t.Rows)) || !x.chunksOK(cachefile.SecByAddr, 0, len(x.t.ByAddr)) || !x.chunksOK(cachefile.SecByFile, 0, len(x.t.ByFile)) {
		return x.WriteTo(w, imageSize) // found damaged: x answers from a rebuild now
	}
	return cachefile.Encode(w, x.t, x.BuildID, imageSize)
}
