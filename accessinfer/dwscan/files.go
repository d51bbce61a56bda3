package dwscan

import (
	"path"

	"github.com/klasy/klasy/internal/bytereader"
)

// fileTable is a unit's line table's file names, read from the line
// program header (DWARF 2-5), each joined with its directory only when
// asked for: debug/dwarf's LineReader joined every file of every unit
// (the headers name hundreds each), and an inlined copy's call site
// names a few. The names are debug/dwarf's (LineFile.Name), for the
// Unix paths of the kernel's units; read returns false on anything
// else (DOS paths, forms it does not read) and the scan asks
// debug/dwarf.
type fileTable struct {
	dirs   []string
	names  [][]byte
	dirIdx []uint64
	v5     bool
	joined []string
	done   []bool
}

const (
	formString   = 0x08
	formStrp     = 0x0e
	formLineStrp = 0x1f
	formData1    = 0x0b
	formData2    = 0x05
	formData4    = 0x06
	formData8    = 0x07
	formData16   = 0x1e
	formUdata    = 0x0f
	formBlock    = 0x09
	lnctPath     = 1
	lnctDirIndex = 2
)

// read reads the header at off in line (str, lineStr: .debug_str,
// .debug_line_str) of a unit whose compilation directory is compDir.
func (ft *fileTable) read(line, str, lineStr []byte, off uint64, compDir string) bool {
	ft.dirs, ft.names, ft.dirIdx = ft.dirs[:0], ft.names[:0], ft.dirIdx[:0]
	if off >= uint64(len(line)) || isDOS(compDir) {
		return false
	}
	// The header's checks are debug/dwarf's: where it refuses a
	// table, the scan asks it and gets its answer (no files).
	r := bytereader.New(line[off:])
	n, dwarf64 := uint64(r.U32()), false
	if n == 0xffffffff {
		n, dwarf64 = r.U64(), true
	}
	end := uint64(r.Offset()) + n
	version := r.U16()
	if version < 2 || version > 5 || end > uint64(len(line))-off {
		return false
	}
	if version >= 5 {
		r.Skip(2) // address and segment selector sizes
	}
	var hl uint64
	if dwarf64 {
		hl = r.U64()
	} else {
		hl = uint64(r.U32())
	}
	if uint64(r.Offset())+hl > end {
		return false
	}
	r.Skip(1) // minimum instruction length
	if version >= 4 && r.U8() == 0 {
		return false // maximum operations per instruction
	}
	r.Skip(2) // default_is_stmt, line_base
	if r.U8() == 0 {
		return false // line_range
	}
	base := int(r.U8())
	for op := 1; op < base; op++ {
		if k, ok := knownOpLens[op]; ok && int(r.U8()) != k {
			return false
		} else if !ok {
			r.U8()
		}
	}
	ft.v5 = version >= 5
	if !ft.v5 {
		ft.dirs = append(ft.dirs, compDir)
		for {
			d := r.CString()
			if len(d) == 0 || r.Err() != nil {
				break
			}
			dir := string(d)
			if isDOS(dir) || dir[0] == '\\' {
				return false
			}
			if !isAbs(dir) {
				dir = join(compDir, dir)
			}
			ft.dirs = append(ft.dirs, dir)
		}
		// File numbering starts with 1: entry 0 has no name.
		ft.names, ft.dirIdx = append(ft.names, nil), append(ft.dirIdx, 0)
		for {
			name := r.CString()
			if len(name) == 0 || r.Err() != nil {
				break
			}
			if isDOS(string(name)) || name[0] == '\\' {
				return false
			}
			ft.names, ft.dirIdx = append(ft.names, name), append(ft.dirIdx, r.ULEB128())
			r.ULEB128() // mtime
			r.ULEB128() // length
		}
	} else {
		var dirIdx uint64
		entries := func(isDir bool) bool {
			type lf struct{ lnct, form uint64 }
			var fmts [8]lf
			nf := int(r.U8())
			if nf > len(fmts) {
				return false
			}
			for i := 0; i < nf; i++ {
				fmts[i] = lf{r.ULEB128(), r.ULEB128()}
			}
			count := r.ULEB128()
			for k := uint64(0); k < count && r.Err() == nil; k++ {
				var name []byte
				hasDir := false
				for _, f := range fmts[:nf] {
					var b []byte
					var v uint64
					switch f.form {
					case formString:
						b = r.CString()
					case formStrp, formLineStrp:
						sec := str
						if f.form == formLineStrp {
							sec = lineStr
						}
						var o uint64
						if dwarf64 {
							o = r.U64()
						} else {
							o = uint64(r.U32())
						}
						if o >= uint64(len(sec)) {
							return false
						}
						sr := bytereader.New(sec[o:])
						if b = sr.CString(); sr.Err() != nil {
							return false
						}
					case formData1:
						v = uint64(r.U8())
					case formData2:
						v = uint64(r.U16())
					case formData4:
						v = uint64(r.U32())
					case formData8:
						v = r.U64()
					case formData16:
						r.Skip(16)
					case formUdata:
						v = r.ULEB128()
					case formBlock:
						r.Skip(r.ULEB128())
					default:
						return false
					}
					switch f.lnct {
					case lnctPath:
						name = b
					case lnctDirIndex:
						dirIdx, hasDir = v, true
					}
				}
				if isDir {
					if hasDir || isDOS(string(name)) {
						return false
					}
					ft.dirs = append(ft.dirs, string(name))
					continue
				}
				if !hasDir {
					dirIdx = ^uint64(0) // no directory: the name alone
				} else if dirIdx >= uint64(len(ft.dirs)) {
					return false
				}
				ft.names, ft.dirIdx = append(ft.names, name), append(ft.dirIdx, dirIdx)
			}
			return true
		}
		if !entries(true) || !entries(false) {
			return false
		}
	}
	if r.Err() != nil || !ft.valid() {
		return false
	}
	ft.joined = grow(ft.joined, len(ft.names))
	ft.done = grow(ft.done, len(ft.names))
	return true
}

// name is file i's name as debug/dwarf gives it ("" if none).
func (ft *fileTable) name(i int) string {
	if ft.done[i] {
		return ft.joined[i]
	}
	ft.done[i] = true
	n, d := string(ft.names[i]), ft.dirIdx[i]
	switch {
	case ft.v5:
		// debug/dwarf joins a DWARF 5 file with its directory even
		// when the file's path is absolute.
		if d < uint64(len(ft.dirs)) && ft.dirs[d] != "" && n != "" {
			n = join(ft.dirs[d], n)
		}
	case i > 0 && !isAbs(n):
		n = join(ft.dirs[d], n) // valid: d is a directory
	}
	ft.joined[i] = n
	return n
}

// valid reports whether every DWARF 2-4 file's directory exists, as
// debug/dwarf requires of the whole table.
func (ft *fileTable) valid() bool {
	if ft.v5 {
		return true
	}
	for i := 1; i < len(ft.names); i++ {
		if !isAbs(string(ft.names[i])) && ft.dirIdx[i] >= uint64(len(ft.dirs)) {
			return false
		}
	}
	return true
}

// knownOpLens are the standard opcodes' argument counts debug/dwarf
// checks a header against.
var knownOpLens = map[int]int{1: 0, 2: 1, 3: 1, 4: 1, 6: 0, 7: 0, 8: 0, 10: 0, 11: 0, 12: 1}

func isAbs(p string) bool { return len(p) > 0 && (p[0] == '/' || p[0] == '\\') }

// isDOS: a drive letter or a UNC path, which debug/dwarf joins its own
// way.
func isDOS(p string) bool {
	if len(p) >= 2 && p[1] == ':' {
		return true
	}
	return len(p) > 3 && (p[0] == '\\' || p[0] == '/') && (p[1] == '\\' || p[1] == '/')
}

// join is debug/dwarf's pathJoin for a Unix directory.
func join(dir, file string) string {
	if dir == "" {
		return file
	}
	return path.Join(dir, file)
}

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	s = s[:n]
	clear(s)
	return s
}
