package dwtype

import (
	"bufio"
	"bytes"
	"debug/dwarf"
	"debug/elf"
	"errors"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/klasy/klasy/internal/testenv"
)

// program is testdata/types.c built with flags, its debug info, and what
// it printed: sizeof of each variable and offsetof of each member.
type program struct {
	d       *dwarf.Data
	sizes   map[string]int64
	offsets map[string]int64
}

func build(t *testing.T, flags ...string) program {
	t.Helper()
	exe := filepath.Join(t.TempDir(), "types")
	args := append(append([]string{"-g"}, flags...), "-o", exe, "testdata/types.c")
	testenv.GCC(t, args...)
	out, err := exec.Command(exe).Output()
	if err != nil {
		t.Fatalf("running types: %v", err)
	}
	p := program{sizes: map[string]int64{}, offsets: map[string]int64{}}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		n, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			t.Fatalf("types printed %q", sc.Text())
		}
		if m, ok := strings.CutPrefix(f[0], "."); ok {
			p.offsets[m] = n
		} else {
			p.sizes[f[0]] = n
		}
	}
	ef, err := elf.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer ef.Close()
	if p.d, err = ef.DWARF(); err != nil {
		t.Fatal(err)
	}
	return p
}

// globals returns the type of each global variable and the offset of
// each named type, by name.
func globals(t *testing.T, d *dwarf.Data) (vars, types map[string]dwarf.Offset) {
	vars, types = map[string]dwarf.Offset{}, map[string]dwarf.Offset{}
	r := d.Reader()
	for {
		e, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		if e == nil {
			return vars, types
		}
		name, _ := e.Val(dwarf.AttrName).(string)
		switch e.Tag {
		case dwarf.TagVariable:
			if typ, ok := e.Val(dwarf.AttrType).(dwarf.Offset); ok {
				vars[name] = typ
			}
		case dwarf.TagStructType, dwarf.TagTypedef:
			if decl, _ := e.Val(dwarf.AttrDeclaration).(bool); name != "" && !decl {
				types[name] = e.Offset
			}
		}
		if e.Tag == dwarf.TagSubprogram {
			r.SkipChildren()
		}
	}
}

var dwarfVersions = [][]string{{"-gdwarf-5"}, {"-gdwarf-4"}, {"-gdwarf-2", "-gstrict-dwarf"}}

func TestNamesAndSizes(t *testing.T) {
	want := map[string]string{
		"v_int":         "int",
		"v_string":      "const char *",
		"v_node":        "struct node *",
		"v_sock":        "struct sock *",
		"v_union":       "union value",
		"v_enum":        "enum color",
		"v_u32":         "u32[4]",
		"v_matrix":      "int[2][3]",
		"v_ptr_array":   "char(*)[8]",
		"v_fn":          "void (*)(int, const char *)",
		"v_fn_ret_ptr":  "int (*)(void)",
		"v_fn_variadic": "int (*)(const char *, ...)",
		"v_volatile":    "volatile long unsigned int",
		"v_lock":        "lock_t",
		"v_layout":      "struct layout",
		"v_void_ptr":    "void *",
		"v_long_double": "long double",
		"v_bool":        "_Bool",
	}
	for _, flags := range dwarfVersions {
		t.Run(strings.Join(flags, " "), func(t *testing.T) {
			p := build(t, flags...)
			vars, _ := globals(t, p.d)
			n := NewNamer(p.d)
			for _, v := range slices.Sorted(maps.Keys(want)) {
				spelled := want[v]
				typ, ok := vars[v]
				if !ok {
					t.Fatalf("no variable %s in the debug info", v)
				}
				if got := n.Name(typ); got != spelled {
					t.Errorf("%s: type %q, want %q", v, got, spelled)
				}
			}
			for v, size := range p.sizes {
				if got := n.Size(vars[v]); got != size {
					t.Errorf("%s: size %d, gcc says %d", v, got, size)
				}
			}
		})
	}
}

func TestLayoutOf(t *testing.T) {
	// Bitfields, hand-checked against the x86-64 ABI: flag_a and flag_b
	// share the byte at 16, wide takes the 20 bits after them in the
	// unsigned int at 16.
	bits := map[string][3]int64{"flag_a": {16, 0, 1}, "flag_b": {16, 1, 3}, "wide": {16, 4, 20}}
	for _, flags := range dwarfVersions {
		t.Run(strings.Join(flags, " "), func(t *testing.T) {
			p := build(t, flags...)
			_, types := globals(t, p.d)
			l, err := LayoutOf(p.d, types["layout"])
			if err != nil {
				t.Fatal(err)
			}
			if l.Kind != "struct" || l.Name != "layout" || l.Size != p.sizes["v_layout"] || l.Line == 0 || !strings.HasSuffix(l.File, "types.c") {
				t.Errorf("layout: %s %s size %d at %s:%d", l.Kind, l.Name, l.Size, l.File, l.Line)
			}
			seen := map[string]bool{}
			for _, m := range l.Members {
				seen[m.Name] = true
				if b, ok := bits[m.Name]; ok {
					if got := [3]int64{m.Offset, m.BitOffset, m.BitSize}; got != b {
						t.Errorf("%s: offset, bit offset, bits %v, want %v", m.Name, got, b)
					}
				} else if off, ok := p.offsets[m.Name]; ok && m.Offset != off {
					t.Errorf("%s: offset %d, gcc says %d", m.Name, m.Offset, off)
				}
			}
			for name := range p.offsets {
				if !seen[name] {
					t.Errorf("no member %s in %+v", name, l.Members)
				}
			}
			// The anonymous union and the struct in it come before their
			// members, one level deeper each.
			depth := map[string]int{}
			for _, m := range l.Members {
				depth[m.Name] = m.Depth
			}
			if depth["addr"] != 1 || depth["port"] != 2 || depth["len"] != 0 {
				t.Errorf("depths %v", depth)
			}

			td, err := LayoutOf(p.d, types["lock_t"])
			if err != nil || td.Typedef != "struct {...}" || td.Name != "lock_t" || td.Size != 4 || len(td.Members) != 1 || td.Members[0].Name != "locked" {
				t.Errorf("lock_t: %+v, %v", td, err)
			}
			if _, err := LayoutOf(p.d, types["u32"]); err == nil || !strings.Contains(err.Error(), "u32 is a typedef of unsigned int") {
				t.Errorf("u32: %v, want a typedef of unsigned int", err)
			}
			if _, err := LayoutOf(p.d, 1<<30); !errors.Is(err, ErrNoDIE) {
				t.Errorf("no DIE: %v", err)
			}
		})
	}
}

func TestDeclare(t *testing.T) {
	for _, tt := range []struct{ typ, name, want string }{
		{"int", "x", "int x"},
		{"struct sock *", "sk", "struct sock *sk"},
		{"char[48]", "cb", "char cb[48]"},
		{"int[2][3]", "m", "int m[2][3]"},
		{"void (*)(int)", "fn", "void (*fn)(int)"},
		{"int (**)(void)", "pp", "int (**pp)(void)"},
		{"const char *", "s", "const char *s"},
	} {
		if got := Declare(tt.typ, tt.name); got != tt.want {
			t.Errorf("Declare(%q, %q) = %q, want %q", tt.typ, tt.name, got, tt.want)
		}
	}
}
