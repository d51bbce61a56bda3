package kbuild

import (
	"reflect"
	"testing"
)

func TestParseLog(t *testing.T) {
	const dir = "/tmp/klasy-kbuild-1"
	tests := []struct {
		line string
		want []Diagnostic // nil: not a diagnostic
	}{
		{"/tmp/klasy-kbuild-1/m.c:2:34: error: 'x' undeclared (first use in this function)",
			[]Diagnostic{{File: "m.c", Line: 2, Col: 34, Severity: "error", Msg: "'x' undeclared (first use in this function)"}}},
		{"aspects/a.klasy:13:9: warning: unused variable 'u' [-Wunused-variable]",
			[]Diagnostic{{File: "aspects/a.klasy", Line: 13, Col: 9, Severity: "warning", Msg: "unused variable 'u' [-Wunused-variable]"}}},
		{"/home/u/a.klasy:7: note: no column", []Diagnostic{{File: "/home/u/a.klasy", Line: 7, Severity: "note", Msg: "no column"}}},
		{"/tmp/klasy-kbuild-1/sub/m.c:1:10: fatal error: nosuch.h: No such file or directory",
			[]Diagnostic{{File: "sub/m.c", Line: 1, Col: 10, Severity: "fatal error", Msg: "nosuch.h: No such file or directory"}}},
		{"m.c:5:1: internal compiler error: Segmentation fault", []Diagnostic{{File: "m.c", Line: 5, Col: 1, Severity: "internal compiler error", Msg: "Segmentation fault"}}},
		{"cc1: error: cannot load plugin /x.so", []Diagnostic{{File: "cc1", Severity: "error", Msg: "cannot load plugin /x.so"}}},
		{"/tmp/klasy-kbuild-1/m.o: warning: objtool: f()+0x1a: unreachable instruction",
			[]Diagnostic{{File: "m.o", Severity: "warning", Msg: "objtool: f()+0x1a: unreachable instruction"}}},
		{"ld: warning: orphan section `.x' from `/tmp/klasy-kbuild-1/m.o' being placed in section `.x'",
			[]Diagnostic{{File: "ld", Severity: "warning", Msg: "orphan section `.x' from `m.o' being placed in section `.x'"}}},
		{`ERROR: modpost: "f" [/tmp/klasy-kbuild-1/u.ko] undefined!`, []Diagnostic{{File: "modpost", Severity: "error", Msg: `"f" [u.ko] undefined!`}}},
		{"WARNING: modpost: missing MODULE_LICENSE() in /tmp/klasy-kbuild-1/u.o", []Diagnostic{{File: "modpost", Severity: "warning", Msg: "missing MODULE_LICENSE() in u.o"}}},
		{"/tmp/klasy-kbuild-1/m.c: In function 'f':", nil},
		{"    2 | static int f(void) { return x; }", nil},
		{"In file included from /tmp/klasy-kbuild-1/m.c:3:", nil},
		{"make[1]: *** [/usr/src/linux-headers-6.1.0-56-common/scripts/Makefile.build:255: /tmp/klasy-kbuild-1/m.o] Error 1", nil},
		{"make: *** [/usr/src/linux-headers-6.1.0-56-common/Makefile:2065: /tmp/klasy-kbuild-1] Error 2", nil},
		{"Skipping BTF generation for /tmp/klasy-kbuild-1/m.ko due to unavailability of vmlinux", nil},
		{"", nil},
	}
	for _, tt := range tests {
		if got := ParseLog([]byte(tt.line+"\r\n"), dir); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ParseLog(%q) = %#v, want %#v", tt.line, got, tt.want)
		}
	}
}

func TestDiagnosticString(t *testing.T) {
	tests := []struct {
		d    Diagnostic
		want string
	}{
		{Diagnostic{File: "a.klasy", Line: 3, Col: 5, Severity: "error", Msg: "m"}, "a.klasy:3:5: error: m"},
		{Diagnostic{File: "a.klasy", Line: 3, Severity: "warning", Msg: "m"}, "a.klasy:3: warning: m"},
		{Diagnostic{File: "modpost", Severity: "error", Msg: "m"}, "modpost: error: m"},
	}
	for _, tt := range tests {
		if got := tt.d.String(); got != tt.want {
			t.Errorf("%#v.String() = %q, want %q", tt.d, got, tt.want)
		}
		// What String prints, ParseLog reads back.
		if got := ParseLog([]byte(tt.d.String()), ""); len(got) != 1 || got[0] != tt.d {
			t.Errorf("ParseLog(%q) = %v, want %v", tt.d.String(), got, tt.d)
		}
	}
}

func FuzzParseLog(f *testing.F) {
	f.Add([]byte("/tmp/d/m.c:2:34: error: 'x' undeclared\nERROR: modpost: \"f\" [/tmp/d/u.ko] undefined!\ncc1: error: x\n"), "/tmp/d")
	f.Fuzz(func(t *testing.T, log []byte, dir string) {
		for _, d := range ParseLog(log, dir) {
			if d.File == "" || d.Line < 0 || d.Col < 0 || d.Severity == "" {
				t.Errorf("malformed %#v", d)
			}
		}
	})
}
