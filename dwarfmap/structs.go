package dwarfmap

import (
	"debug/dwarf"
	"errors"
	"fmt"
	"runtime/debug"
	"sort"
	"strings"

	"github.com/klasy/klasy/dwarfmap/dwtype"
	"github.com/klasy/klasy/internal/mmapfile"
)

// Struct returns the layout of the struct or union called name ("sk_buff",
// "struct sk_buff" or "union ...").
func (x *Index) Struct(name string) (l *dwtype.Layout, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			if err = mmapfile.FaultError(r); err == nil {
				err = fmt.Errorf("malformed debug info for %s: %v", name, r)
			}
		}
		if err != nil {
			l, err = nil, x.explain(err)
		}
	}()
	if err := x.needImage(); err != nil {
		return nil, err
	}
	x, err = x.use(structSecs)
	if err != nil {
		return nil, err
	}
	name = strings.TrimSpace(name)
	want := uint32(0)
	if n, ok := strings.CutPrefix(name, "struct "); ok {
		name, want = strings.TrimSpace(n), KindStruct
	} else if n, ok := strings.CutPrefix(name, "union "); ok {
		name, want = strings.TrimSpace(n), KindUnion
	}
	i := sort.Search(len(x.t.Structs), func(i int) bool { return x.t.Str(x.t.Structs[i].Name) >= name })
	var typedef *Struct
	for ; i < len(x.t.Structs) && x.t.Str(x.t.Structs[i].Name) == name; i++ {
		s := x.t.Structs[i]
		if s.Kind == KindTypedef {
			if want == 0 {
				typedef = &s
			}
			continue
		}
		if want != 0 && s.Kind != want {
			continue
		}
		return x.layout(s)
	}
	if typedef != nil {
		return x.layout(*typedef)
	}
	return nil, fmt.Errorf("no struct or union %q in the debug info", name)
}

func (x *Index) layout(s Struct) (*dwtype.Layout, error) {
	u := x.t.Units[s.Unit]
	d, err := x.img.UnitDWARF(u.Off, u.End)
	if err != nil {
		return nil, err
	}
	l, err := dwtype.LayoutOf(d, dwarf.Offset(s.DIE-u.Off))
	if errors.Is(err, dwtype.ErrNoDIE) {
		return nil, fmt.Errorf("struct %s: no DIE at %#x", x.t.Str(s.Name), s.DIE)
	}
	return l, err
}
