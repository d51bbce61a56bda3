package resolve

import (
	"errors"
	"strings"
	"testing"

	"github.com/klasy/klasy/aspect"
	"github.com/klasy/klasy/dwarfmap"
	"github.com/klasy/klasy/weaver/internal/weavertest"
)

// TestReplaceResolveErrors: what a <replace> cannot replace in Debian's
// 6.1 vmlinux is refused at the pointcut, saying why.
func TestReplaceResolveErrors(t *testing.T) {
	x := weavertest.DebianIndex(t)
	tests := []struct{ pc, want string }{
		{"execution(ksys_pread64)", "x.klasy:1:37: execution(ksys_pread64): ksys_pread64 is also inlined (2 inlined copies in __ia32_sys_pread64, __x64_sys_pread64): those calls run the inlined copy"},
		{"execution(skb_put_data)", "skb_put_data exists only inlined (6 inlined copies in "},
		{"execution(m_show)", "execution(m_show): 2 functions are called m_show (kernel/module/procfs.c:65, fs/namespace.c:1402): a replacement replaces one; choose it with within_file(FILE)"},
		{"execution(m_show) AND within_file(fs/nosuch.c)", "execution(m_show): no out-of-line body of m_show is selected by within_file(...)"},
		{"execution(no_such_function_at_all)", "execution(no_such_function_at_all): no function is called no_such_function_at_all"},
		{"execution(__x64_sys_getppid)", "no function is called __x64_sys_getppid in " + x.Image().Path + " to the DWARF: the ELF symbol __x64_sys_getppid is an alias of __do_sys_getppid; name __do_sys_getppid"},
		{"execution(start_thread_common)", "the out-of-line body of start_thread_common at 0xffffffff8103" /* ... */},
		{"execution(start_thread_common)", "is GCC's clone start_thread_common.constprop.0"},
		{"execution(xen_timer_resume)", "xen_timer_resume has no ftrace call site at its entry"},
		{"execution(current_time)", "current_time returns struct timespec64, which does not come back in one register"},
		{"execution(start_kernel)", "the kernel refuses a kprobe at the entry of start_kernel: in .init.text"},
		{"execution(ksys_lseek) AND argument(nosuch, p)", "argument(nosuch, p): ksys_lseek has no parameter nosuch"},
	}
	for _, tt := range tests {
		src := "<aspect><advice><pointcut>" + tt.pc + "</pointcut><replace>return 0;</replace></advice></aspect>\n"
		f, diags := aspect.Load("x.klasy", []byte(src))
		if len(diags) > 0 {
			t.Fatalf("%s: %v", tt.pc, diags)
		}
		_, err := Resolve(f, x, ResolveOptions{})
		var re *ResolveError
		if !errors.As(err, &re) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want a resolve error containing %q", tt.pc, err, tt.want)
		}
	}

	src := "<aspect>\n<advice><pointcut>execution(ksys_lseek)</pointcut><replace>return 0;</replace></advice>\n" +
		"<advice><pointcut>execution(ksys_lseek)</pointcut><replace>return 1;</replace></advice>\n</aspect>\n"
	f, diags := aspect.Load("x.klasy", []byte(src))
	if len(diags) > 0 {
		t.Fatal(diags)
	}
	if _, err := Resolve(f, x, ResolveOptions{}); err == nil || !strings.Contains(err.Error(), "x.klasy:3:") || !strings.Contains(err.Error(), "advice 1 already replaces ksys_lseek") {
		t.Errorf("two replacements of ksys_lseek: %v, want the second refused at line 3", err)
	}
}

// TestReturnTypes: the C type a replacement returns, from the DWARF of
// functions of each class in Debian's vmlinux, spelled to need no
// header but linux/types.h.
func TestReturnTypes(t *testing.T) {
	x := weavertest.DebianIndex(t)
	tests := []struct {
		fn      string
		class   dwarfmap.ReturnClass
		c, decl string
	}{
		{"tcp_send_delayed_ack", dwarfmap.ReturnVoid, "void", "void"},
		{"ksys_lseek", dwarfmap.ReturnInt, "long int", "off_t"},
		{"capable", dwarfmap.ReturnInt, "_Bool", "bool"},
		{"ktime_get", dwarfmap.ReturnInt, "long long int", "ktime_t"},
		{"skb_clone", dwarfmap.ReturnPointer, "struct sk_buff *", "struct sk_buff *"},
		{"kstrdup_const", dwarfmap.ReturnPointer, "const char *", "const char *"},
		{"kmalloc_trace", dwarfmap.ReturnPointer, "void *", "void *"},
		{"current_time", dwarfmap.ReturnOther, "", "struct timespec64"},
	}
	for _, tt := range tests {
		fs := x.Funcs(tt.fn)
		if len(fs) != 1 || fs[0].InlineOnly {
			t.Fatalf("%s: %d functions, want one out-of-line", tt.fn, len(fs))
		}
		r, err := x.ReturnType(fs[0])
		if err != nil {
			t.Fatalf("%s: %v", tt.fn, err)
		}
		if r.Class != tt.class || r.C != tt.c || r.Declared != tt.decl {
			t.Errorf("%s returns class %d %q (declared %q), want class %d %q (declared %q)", tt.fn, r.Class, r.C, r.Declared, tt.class, tt.c, tt.decl)
		}
	}
}

// TestRegArgs: which functions of Debian's vmlinux take every argument
// in a register and return in rax, the after hooks the runtime may put on
// its direct trampoline (fexit); the others stay kretprobes.
func TestRegArgs(t *testing.T) {
	x := weavertest.DebianIndex(t)
	tests := []struct {
		fn   string
		want bool
	}{
		{"ksys_lseek", true},           // three integers, long
		{"do_renameat2", true},         // five, int
		{"hrtimer_nanosleep", true},    // ktime_t, enums
		{"tcp_send_delayed_ack", true}, // a pointer, void
		{"current_time", false},        // returns a struct
		{"set_pte_vaddr", false},       // a pte_t, a struct, by value
		{"do_mmap", false},             // nine arguments: three on the stack
		{"_printk", false},             // variadic
	}
	for _, tt := range tests {
		fs := x.Funcs(tt.fn)
		if len(fs) == 0 {
			t.Fatalf("%s: no function", tt.fn)
		}
		r, err := x.ReturnType(fs[0])
		if err != nil {
			t.Fatalf("%s: %v", tt.fn, err)
		}
		if r.RegArgs != tt.want {
			t.Errorf("%s: RegArgs %v, want %v", tt.fn, r.RegArgs, tt.want)
		}
	}
}
