package srcpath

import "testing"

func TestRel(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"/root/.cache/klasy/linux-source-6.1/src/fs/read_write.c", "fs/read_write.c"},
		{"/usr/src/linux-headers-6.1.0-56-common/include/linux/skbuff.h", "include/linux/skbuff.h"},
		{"/build/linux-6.1.192/drivers/net/ethernet/intel/e100.c", "drivers/net/ethernet/intel/e100.c"},
		{"/home/u/.cache/klasy/lab-kernel/9a5b/build/include/generated/autoconf.h", "include/generated/autoconf.h"},
		{"./arch/x86/include/asm/current.h", "arch/x86/include/asm/current.h"},
		{"fs/namei.c", "fs/namei.c"},
		{"/tmp/klasy-kbuild-12/klasy_counter.c", "/tmp/klasy-kbuild-12/klasy_counter.c"},
		{"/lib/x.c", "/lib/x.c"},
		{"/src/fs", "/src/fs"}, // a directory, no file under it
		{"", ""},
	} {
		if got := Rel(tt.in); got != tt.want {
			t.Errorf("Rel(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
