package elfimage

import (
	"bytes"
	"debug/dwarf"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/klasy/klasy/internal/boundedread"
	"github.com/klasy/klasy/internal/mmapfile"
	"github.com/klasy/klasy/internal/testenv"
	"golang.org/x/arch/x86/x86asm"
)

// image is a small program with debug info, compiled as the kernel
// compiles C (DWARF 5), linked into an executable like a vmlinux.
const image = `struct point { int x, y; };
int scale(struct point *p, int k) { return p->x * k + p->y; }
int main(void) { struct point p = {1, 2}; return scale(&p, 3); }
`

func needTools(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"gcc", "objcopy", "readelf"} {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.Need(t, "binutils", fmt.Errorf("%s not found: apt install gcc binutils", tool))
		}
	}
}

// compile builds src with gcc and args into dir/name.
func compile(t *testing.T, dir, name, src string, args ...string) string {
	t.Helper()
	needTools(t)
	c := filepath.Join(dir, name+".c")
	if err := os.WriteFile(c, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, name)
	args = append(args, "-o", out, c)
	testenv.GCC(t, args...)
	return out
}

var exeFlags = []string{"-O2", "-g", "-gdwarf-5", "-nostdlib", "-Wl,-e,main", "-Wl,--build-id"}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	exe := compile(t, dir, "exe", image, exeFlags...)
	stripped := filepath.Join(dir, "stripped")
	if b, err := exec.Command("objcopy", "--strip-debug", exe, stripped).CombinedOutput(); err != nil {
		t.Fatalf("objcopy: %v %s", err, b)
	}
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	data, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	// A bzImage has "HdrS" at 0x202 (Documentation/x86/boot.rst).
	bz := make([]byte, 0x400)
	copy(bz[0x202:], "HdrS")
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	notFile := errors.New("a *boundedread.NotFileError")
	for _, c := range []struct {
		path string
		is   error
		want string
	}{
		{stripped, ErrNoDebugInfo, "CONFIG_DEBUG_INFO_DWARF5"},
		{write("truncated", data[:len(data)*2/3]), ErrTruncated, "truncated"},
		{write("empty", nil), ErrTruncated, "empty"},
		{write("notelf", []byte("#!/bin/sh\necho hi\n")), nil, "not an ELF file"},
		{write("bzImage", bz), nil, "compressed boot image"},
		{filepath.Join(dir, "missing"), os.ErrNotExist, "no such file"},
		// Special files are refused by name; a FIFO does not block.
		{fifo, notFile, fifo + ": a FIFO, not a regular file"},
		{dir, notFile, dir + ": a directory, not a regular file"},
		{"/dev/zero", notFile, "/dev/zero: a character device, not a regular file"},
	} {
		img, err := Open(c.path)
		if err == nil {
			img.Close()
		}
		var nf *boundedread.NotFileError
		if c.is == notFile && !errors.As(err, &nf) {
			t.Errorf("Open(%s) = %v, want a *boundedread.NotFileError", filepath.Base(c.path), err)
			continue
		}
		if err == nil || (c.is != nil && c.is != notFile && !errors.Is(err, c.is)) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Open(%s) = %v, want %v mentioning %q", filepath.Base(c.path), err, c.is, c.want)
		}
	}
	img, err := Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer img.Close()
	if img.Rel || len(img.Section(".debug_info")) == 0 || img.Section(".debug_nosuch") != nil {
		t.Errorf("exe: Rel %v, %d bytes of .debug_info", img.Rel, len(img.Section(".debug_info")))
	}
}

// TestBuildID reads the build-id as readelf -n prints it.
func TestBuildID(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name, flag string
	}{{"sha1", "-Wl,--build-id=sha1"}, {"md5", "-Wl,--build-id=md5"}, {"none", "-Wl,--build-id=none"}} {
		exe := compile(t, dir, c.name, image, "-g", "-nostdlib", "-Wl,-e,main", c.flag)
		out, err := exec.Command("readelf", "-n", exe).Output()
		if err != nil {
			t.Fatal(err)
		}
		var want string
		if m := regexp.MustCompile(`Build ID: ([0-9a-f]+)`).FindSubmatch(out); m != nil {
			want = string(m[1])
		}
		img, err := Open(exe)
		if err != nil {
			t.Fatal(err)
		}
		if img.BuildID != want || (c.name != "none") != (want != "") {
			t.Errorf("%s: build-id %q, readelf says %q", c.name, img.BuildID, want)
		}
		img.Close()
	}
}

// TestSections: compressed debug sections (-gz) are inflated, and
// ReadText finds the code of a function at its link-time address.
func TestSections(t *testing.T) {
	dir := t.TempDir()
	plain := compile(t, dir, "plain", image, exeFlags...)
	gz := filepath.Join(dir, "gz")
	if b, err := exec.Command("objcopy", "--compress-debug-sections=zlib", plain, gz).CombinedOutput(); err != nil {
		t.Fatalf("objcopy: %v %s", err, b)
	}
	a, err := Open(plain)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Open(gz)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.ELF.Section(".debug_info").Flags&elf.SHF_COMPRESSED == 0 {
		t.Fatal("objcopy did not compress .debug_info")
	}
	for _, name := range debugSections {
		if !bytes.Equal(a.Section(name), b.Section(name)) {
			t.Errorf("%s: %d bytes inflated, %d in the uncompressed image", name, len(b.Section(name)), len(a.Section(name)))
		}
	}
	syms, err := a.ELF.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range syms {
		if s.Name != "scale" {
			continue
		}
		text := a.ELF.Section(".text")
		data, err := text.Data()
		if err != nil {
			t.Fatal(err)
		}
		want := data[s.Value-text.Addr : s.Value-text.Addr+s.Size]
		if got := a.ReadText(s.Value, s.Size); !bytes.Equal(got, want) {
			t.Errorf("ReadText(scale) = % x, .text has % x", got, want)
		}
		if a.ReadText(text.Addr+text.Size-1, 2) != nil {
			t.Error("ReadText past the end of .text returned bytes")
		}
		return
	}
	t.Fatal("no symbol scale")
}

func TestModuleMismatch(t *testing.T) {
	dir := t.TempDir()
	// A minimal "module" and "vmlinux": what matters is the vermagic in
	// .modinfo and the linux_banner in .rodata.
	mod := compile(t, dir, "mod.ko", `__attribute__((section(".modinfo"), used)) static const char vm[] = "vermagic=6.1.0-56-amd64 SMP preempt mod_unload modversions ";
int init_module(void) { return 0; }`, "-g", "-c")
	same := compile(t, dir, "vmlinux-same", `const char linux_banner[] = "Linux version 6.1.0-56-amd64 (debian-kernel@lists.debian.org) #1 SMP\n"; int f(void) { return 1; }`, "-g", "-c")
	unknown := compile(t, dir, "vmlinux-unknown", image, "-g", "-c")
	other := compile(t, dir, "vmlinux-other", `const char linux_banner[] = "Linux version 6.1.0-99-amd64 (debian-kernel@lists.debian.org) #1 SMP\n"; int f(void) { return 1; }`, "-g", "-c")
	m, err := Open(mod)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if r := m.Release(); r != "6.1.0-56-amd64" {
		t.Errorf("module release %q", r)
	}
	for _, c := range []struct {
		vm      string
		wantErr string
	}{{same, ""}, {other, "built for Linux 6.1.0-56-amd64 but"}, {unknown, "cannot tell which kernel"}} {
		v, err := Open(c.vm)
		if err != nil {
			t.Fatal(err)
		}
		err = CheckModuleMatches(m, v)
		v.Close()
		if c.wantErr == "" && err != nil || c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)) {
			t.Errorf("CheckModuleMatches(mod, %s) = %v, want %q", filepath.Base(c.vm), err, c.wantErr)
		}
	}
}

// An image truncated or written over while it is open: the calls that
// read the mapping say that it changed, naming it, instead of crashing
// on the fault (truncated) or reporting damage (written over).
func TestChangedWhileOpen(t *testing.T) {
	dir := t.TempDir()
	exe := compile(t, dir, "exe", image, exeFlags...)
	data, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		change func(p string) error
	}{
		{"truncated", func(p string) error { return os.Truncate(p, 0) }},
		{"written over", func(p string) error {
			// As a rebuild of the same size would: the DWARF becomes
			// garbage without any fault.
			return os.WriteFile(p, bytes.Repeat([]byte{0xff}, len(data)), 0o644)
		}},
	} {
		p := filepath.Join(dir, c.name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		img, err := Open(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := img.Changed(); err != nil {
			t.Fatalf("%s: Changed before any change: %v", c.name, err)
		}
		if err := c.change(p); err != nil {
			t.Fatal(err)
		}
		want := p + " changed while it was read"
		var ce *mmapfile.ChangedError
		if _, err := img.DWARF(); !errors.As(err, &ce) || err.Error() != want {
			t.Errorf("%s: DWARF() = %v, want %q", c.name, err, want)
		}
		img.Rel = true // as a module's: CheckModuleMatches reads the releases
		if err := CheckModuleMatches(img, img); !errors.As(err, &ce) || err.Error() != want {
			t.Errorf("%s: CheckModuleMatches = %v, want %q", c.name, err, want)
		}
		img.Close()
	}
}

// TestCodeDiscarded: a function is dead code outside the code sections,
// or without a symbol at its entry while its name is a global symbol
// elsewhere (an overridden __weak definition), unless the symbol table
// has lost its local symbols. (dwarfmap's TestDiscardedCode checks this
// on linked images.)
func TestCodeDiscarded(t *testing.T) {
	code := func(symbols bool) *Code {
		return &Code{text: [][2]uint64{{0x1000, 0x2000}}, symAt: map[uint64]bool{0x1000: true, 0x1100: true},
			global: map[string]bool{"arch_idle": true, "main": true}, symbols: symbols}
	}
	for _, c := range []struct {
		code  *Code
		entry uint64
		name  string
		want  bool
	}{
		{code(true), 0x1000, "arch_idle", false},
		{code(true), 0x1100, "helper", false},
		{code(true), 0x1200, "arch_idle", true},    // the overridden weak copy
		{code(true), 0x1200, "helper.isra", false}, // no global of that name
		{code(true), 0, "unused_fn", true},         // a discarded section
		{code(true), 0x2000, "main", true},         // just past the code
		{code(false), 0x1200, "arch_idle", false},  // stripped of local symbols
		{code(false), 0, "unused_fn", true},
		{nil, 0, "unused_fn", false}, // a module: section offsets
	} {
		if got := c.code.Discarded(c.entry, c.name); got != c.want {
			t.Errorf("Discarded(%#x, %s) with %+v = %v, want %v", c.entry, c.name, c.code, got, c.want)
		}
	}
	dir := t.TempDir()
	obj := compile(t, dir, "obj", image, "-O2", "-g", "-c")
	img, err := Open(obj)
	if err != nil {
		t.Fatal(err)
	}
	defer img.Close()
	if c, err := img.Code(); c != nil || err != nil {
		t.Errorf("Code() of a relocatable object = %+v, %v; want nil", c, err)
	}
	exe, err := Open(compile(t, dir, "exe", image, exeFlags...))
	if err != nil {
		t.Fatal(err)
	}
	defer exe.Close()
	c, err := exe.Code()
	if err != nil || c == nil || !c.symbols || len(c.text) == 0 || !c.global["scale"] {
		t.Errorf("Code() of an executable = %+v, %v", c, err)
	}
}

// TestModuleLayout: in a relocatable object every section starts at 0;
// Open lays the allocated ones out so that the functions of .text and
// .init.text get distinct DWARF addresses, SectionAt gives each back
// as its section and offset, and ReadText reads its code there (setup
// has no relocations: its bytes are the file's).
func TestModuleLayout(t *testing.T) {
	dir := t.TempDir()
	obj := compile(t, dir, "mod.o", `int counter;
int probe(int x) { counter += x; return counter * 3; }
__attribute__((section(".init.text"))) int setup(int x) { return x + 7; }
__attribute__((section(".exit.text"))) void teardown(void) { counter = 0; }
`, "-O2", "-g", "-gdwarf-5", "-c")
	img, err := Open(obj)
	if err != nil {
		t.Fatal(err)
	}
	defer img.Close()
	syms, err := img.ELF.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	d, err := img.DWARF()
	if err != nil {
		t.Fatal(err)
	}
	lowPC := map[string]uint64{}
	r := d.Reader()
	for {
		e, err := r.Next()
		if err != nil || e == nil {
			break
		}
		if name, ok := e.Val(dwarf.AttrName).(string); ok && e.Tag == dwarf.TagSubprogram {
			if pc, ok := e.Val(dwarf.AttrLowpc).(uint64); ok {
				lowPC[name] = pc
			}
		}
	}
	seen := map[uint64]string{}
	for _, fn := range []struct{ name, sec string }{{"probe", ".text"}, {"setup", ".init.text"}, {"teardown", ".exit.text"}} {
		pc, ok := lowPC[fn.name]
		if !ok {
			t.Fatalf("no DW_AT_low_pc for %s", fn.name)
		}
		if other, dup := seen[pc]; dup {
			t.Errorf("%s and %s share address %#x", fn.name, other, pc)
		}
		seen[pc] = fn.name
		sec, off, ok := img.SectionAt(pc)
		if !ok || sec != fn.sec {
			t.Errorf("SectionAt(%s at %#x) = %q, %v; want %s", fn.name, pc, sec, ok, fn.sec)
		}
		for _, s := range syms {
			if s.Name != fn.name {
				continue
			}
			if off != s.Value {
				t.Errorf("%s at %s+%#x, the symbol table says +%#x", fn.name, sec, off, s.Value)
			}
			es := img.ELF.Sections[s.Section]
			want, _ := es.Data()
			if got := img.ReadText(pc, s.Size); len(got) != int(s.Size) || fn.name == "setup" && !bytes.Equal(got, want[s.Value:s.Value+s.Size]) {
				t.Errorf("ReadText(%s) = % x, want its bytes % x", fn.name, got, want[s.Value:s.Value+s.Size])
			}
		}
	}
	if _, _, ok := img.SectionAt(0); ok {
		t.Error("SectionAt(0) found a section: the layout starts at ModuleBase")
	}
}

// TestModuleCodeRelocated: ReadText gives a module's code as the loader
// would relocate it at the layout's addresses: a call to a function of
// the module goes to it, a call out of the module leaves its sections,
// and a RIP-relative load reads the variable where DWARF puts it.
func TestModuleCodeRelocated(t *testing.T) {
	dir := t.TempDir()
	obj := compile(t, dir, "calls.o", `extern int outside(int);
int total;
static __attribute__((noinline)) int twice(int x) { return 2 * x + total; }
int entry(int x) { total = twice(x); return outside(total); }
`, "-O2", "-g", "-gdwarf-5", "-c", "-fno-pic", "-mcmodel=kernel")
	img, err := Open(obj)
	if err != nil {
		t.Fatal(err)
	}
	defer img.Close()
	syms, err := img.ELF.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	at := map[string]elf.Symbol{}
	addr := map[string]uint64{}
	for _, s := range syms {
		if s.Section != elf.SHN_UNDEF && int(s.Section) < len(img.ELF.Sections) {
			at[s.Name] = s
			addr[s.Name] = img.ELF.Sections[s.Section].Addr + s.Value
		}
	}
	e, ok := at["entry"]
	if !ok || addr["twice"] == 0 || addr["total"] == 0 {
		t.Fatalf("symbols %v", addr)
	}
	code := img.ReadText(addr["entry"], e.Size)
	var calls, rip []uint64
	for pc := addr["entry"]; len(code) > 0; {
		in, err := x86asm.Decode(code, 64)
		if err != nil {
			t.Fatalf("decoding entry at %#x: %v", pc, err)
		}
		next := pc + uint64(in.Len)
		for _, a := range in.Args {
			switch a := a.(type) {
			case x86asm.Rel:
				if in.Op == x86asm.CALL || in.Op == x86asm.JMP {
					calls = append(calls, uint64(int64(next)+int64(a)))
				}
			case x86asm.Mem:
				if a.Base == x86asm.RIP {
					rip = append(rip, uint64(int64(next)+a.Disp))
				}
			}
		}
		code, pc = code[in.Len:], next
	}
	var in, out int
	for _, c := range calls {
		if c == addr["twice"] {
			in++
		} else if _, _, ok := img.SectionAt(c); !ok {
			out++
		}
	}
	if in != 1 || out != 1 {
		t.Errorf("entry calls %#x: want one to twice at %#x and one out of the module", calls, addr["twice"])
	}
	if len(rip) == 0 || rip[0] != addr["total"] {
		t.Errorf("entry's RIP-relative operands at %#x, want total at %#x", rip, addr["total"])
	}
}

// TestFuncSymbols: an alias, as the kernel's __x64_sys_X of __do_sys_X,
// is a function symbol at its target's address; a module has none.
func TestFuncSymbols(t *testing.T) {
	dir := t.TempDir()
	src := image + "int __x64_scale(struct point *p, int k) __attribute__((alias(\"scale\")));\n"
	img, err := Open(compile(t, dir, "alias", src, exeFlags...))
	if err != nil {
		t.Fatal(err)
	}
	defer img.Close()
	syms, err := img.FuncSymbols()
	if err != nil {
		t.Fatal(err)
	}
	if syms["scale"] == 0 || syms["__x64_scale"] != syms["scale"] {
		t.Errorf("scale at %#x, __x64_scale at %#x: want one nonzero address", syms["scale"], syms["__x64_scale"])
	}
	obj, err := Open(compile(t, dir, "obj.o", image, "-c", "-g", "-O2"))
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Close()
	if syms, err := obj.FuncSymbols(); syms != nil || err != nil {
		t.Errorf("a relocatable object: %v, %v; want none", syms, err)
	}
}

// TestModuleSymbolAt: an address of a module is named as kallsyms will
// name it once loaded, symbol+offset, for code and for a static's
// member alike; a linked image is not a module.
func TestModuleSymbolAt(t *testing.T) {
	dir := t.TempDir()
	src := `static long pad = 1;
static struct { long a, b; } st = { 2, 3 };
long get(long x) { st.b += x; return st.a + pad++; }
`
	obj, err := Open(compile(t, dir, "mod.o", src, "-O2", "-g", "-c"))
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Close()
	syms, err := obj.ELF.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	at := map[string]uint64{} // each symbol's address as laid out
	for _, s := range syms {
		if s.Name != "" && s.Section != elf.SHN_UNDEF && int(s.Section) < len(obj.ELF.Sections) {
			at[s.Name] = obj.ELF.Sections[s.Section].Addr + s.Value
		}
	}
	for _, tt := range []struct {
		sym string
		off uint64
	}{{"st", 8}, {"st", 0}, {"pad", 0}, {"get", 1}} {
		a, ok := at[tt.sym]
		if !ok {
			t.Fatalf("no symbol %s in %v", tt.sym, at)
		}
		name, off, err := obj.ModuleSymbolAt(a + tt.off)
		if err != nil || name != tt.sym || off != tt.off {
			t.Errorf("ModuleSymbolAt(%s+%d) = %s+%d, %v", tt.sym, tt.off, name, off, err)
		}
	}
	if _, _, err := obj.ModuleSymbolAt(0); err == nil {
		t.Error("ModuleSymbolAt(0): no error, want one (in no section)")
	}
	exe, err := Open(compile(t, dir, "exe", image, exeFlags...))
	if err != nil {
		t.Fatal(err)
	}
	defer exe.Close()
	if _, _, err := exe.ModuleSymbolAt(0x401000); err == nil || !strings.Contains(err.Error(), "not a module") {
		t.Errorf("a linked image: %v, want not a module", err)
	}
}
