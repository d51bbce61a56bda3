package kstack

import (
	"strings"
	"testing"
)

// Without the image no frame is known to be klasy's: all stay, as
// addresses.
func TestStackWithoutImage(t *testing.T) {
	fs := New(nil, 0).Stack([]uint64{0xffffffffc0001234, 0xffffffff81000010})
	if len(fs) != 2 || fs[0].Name() != "0xffffffffc0001234" || fs[1].Func != "" {
		t.Errorf("frames %+v: want both addresses", fs)
	}
	if got := Folded(fs); got != "0xffffffff81000010;0xffffffffc0001234" {
		t.Errorf("folded %q: want the root first", got)
	}
}

func TestLines(t *testing.T) {
	fs := []Frame{
		{Addr: 1, Func: "do_sys_open", File: "fs/open.c", Line: 1330, Inlined: true},
		{Addr: 1, Func: "__x64_sys_openat", Offset: 103, File: "fs/open.c", Line: 1346},
		{Addr: 2, Func: "do_syscall_64", Offset: 56},
	}
	want := "\tdo_sys_open fs/open.c:1330 (inlined)\n\t__x64_sys_openat+103 fs/open.c:1346\n\tdo_syscall_64+56\n"
	if got := Lines(fs, "\t"); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if got := Folded(fs); got != strings.Join([]string{"do_syscall_64", "__x64_sys_openat", "do_sys_open"}, ";") {
		t.Errorf("folded %q", got)
	}
}
