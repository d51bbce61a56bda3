// Package funcnames finds the functions a pointcut names in an image
// beyond the names its DWARF gives them: an ELF alias of a function at
// its entry (__x64_sys_getppid is __do_sys_getppid, the body of
// SYSCALL_DEFINE0(getppid); __x64_sys_read is __se_sys_read), and, for a
// name that selects nothing, the nearest names there are (did you mean).
package funcnames

import (
	"path"
	"strings"

	"github.com/klasy/klasy/dwarfmap"
	"github.com/klasy/klasy/internal/suggest"
	"github.com/klasy/klasy/pattern"
	"github.com/klasy/klasy/weaver/resolve/linecode"
)

// Match returns the names of the functions p matches, each once, sorted.
// A literal name no DWARF function has that an ELF symbol gives the
// entry of a DWARF function selects that function, and alias says so
// ("__x64_sys_getppid is __do_sys_getppid ..."). A pattern with %
// matches DWARF names only.
func Match(x *dwarfmap.Index, p *pattern.Pattern) (names []string, alias string) {
	// MatchFuncs sorts by name: static functions of one name are next to
	// each other.
	for _, fi := range x.MatchFuncs(p) {
		if len(names) == 0 || names[len(names)-1] != fi.Name {
			names = append(names, fi.Name)
		}
	}
	if len(names) > 0 {
		return names, ""
	}
	name, ok := p.Literal()
	if !ok {
		return nil, ""
	}
	fi, ok := Alias(x, name)
	if !ok {
		return nil, ""
	}
	return []string{fi.Name}, name + " is " + fi.Name + " (the ELF symbol " + name + " is an alias of its entry; the DWARF knows it only as " + fi.Name + ")"
}

// Alias returns the out-of-line function whose entry the ELF function
// symbol name is at, when no DWARF function is called name: the
// syscall's __x64_sys_X is __do_sys_X or __se_sys_X. Modules have none.
func Alias(x *dwarfmap.Index, name string) (dwarfmap.FuncInfo, bool) {
	if len(x.Funcs(name)) > 0 || x.Image() == nil {
		return dwarfmap.FuncInfo{}, false
	}
	syms, err := x.Image().FuncSymbols()
	addr, ok := syms[name]
	if err != nil || !ok {
		return dwarfmap.FuncInfo{}, false
	}
	fi, ok := x.FuncAt(addr)
	if !ok || fi.Entry != addr || fi.InlineOnly || fi.Name == name {
		return dwarfmap.FuncInfo{}, false
	}
	return fi, true
}

// Unknown is the message for a name or pattern that selects no function
// of x: "no function is called NAME in IMAGE; did you mean ...?".
func Unknown(x *dwarfmap.Index, name string) string {
	if strings.ContainsRune(name, '%') {
		return "no function matches " + name + " in " + ImageName(x)
	}
	msg := "no function is called " + name + " in " + ImageName(x)
	if fi, ok := Alias(x, name); ok {
		return msg + " to the DWARF: the ELF symbol " + name + " is an alias of " + fi.Name + "; name " + fi.Name
	}
	return msg + Nearest(x, name)
}

// ImageName is the path of x's image, or its build-id if it has none.
func ImageName(x *dwarfmap.Index) string {
	if img := x.Image(); img != nil && img.Path != "" {
		return img.Path
	}
	return x.BuildID
}

// Nearest names the functions of x closest to name, DWARF names and
// ELF aliases, as "; did you mean F?", or "" if none is close.
func Nearest(x *dwarfmap.Index, name string) string {
	return suggest.DidYouMean(name, Names(x))
}

// Names are the names of x's functions: DWARF's (out of line or only
// inlined) and its ELF function symbols'.
func Names(x *dwarfmap.Index) []string {
	var names []string
	for _, fi := range x.MatchFuncs(pattern.MustCompile("%", pattern.Pointcut)) {
		names = append(names, fi.Name)
	}
	if img := x.Image(); img != nil {
		syms, _ := img.FuncSymbols()
		for n := range syms {
			names = append(names, n)
		}
	}
	return names
}

// NearestFiles names the source files closest to spec, a path or a tail
// of one (fs/raed_write.c), among files, comparing spec with the tail of
// each that has as many path elements: "; did you mean fs/read_write.c?".
func NearestFiles(spec string, files []string) string {
	n := strings.Count(spec, "/") + 1
	var tails []string
	for _, f := range files {
		f = path.Clean(f)
		parts := strings.Split(f, "/")
		if len(parts) > n {
			parts = parts[len(parts)-n:]
		}
		tails = append(tails, strings.Join(parts, "/"))
	}
	return suggest.DidYouMean(spec, tails)
}

// Unselected is a hint for within_function(F) that selected nothing,
// for the first F of within that hints at something: the nearest to F
// of holders, the functions holding the code; else, for an F no function
// of x is called, its ELF alias or the nearest names of x. "" if none.
func Unselected(x *dwarfmap.Index, holders, within []string) string {
	for _, f := range within {
		if h := suggest.DidYouMean(f, holders); h != "" {
			return h
		}
		if strings.ContainsRune(f, '%') || len(x.Funcs(f)) > 0 {
			continue
		}
		if fi, ok := Alias(x, f); ok {
			return "; " + f + " is " + fi.Name + " to the DWARF: within_function(" + fi.Name + ")"
		}
		if h := Nearest(x, f); h != "" {
			return h
		}
	}
	return ""
}

// NearestFileIn is NearestFiles among the source files of the line
// tables of imgs; "" for a spec with %.
func NearestFileIn(spec string, imgs []*linecode.Image) string {
	if strings.ContainsRune(spec, '%') {
		return ""
	}
	var files []string
	for _, im := range imgs {
		if b, err := im.Batch(); err == nil {
			files = append(files, b.FileNames(func(string) bool { return true })...)
		}
	}
	return NearestFiles(spec, files)
}
