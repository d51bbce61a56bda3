package weaver

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/klasy/klasy/aspect"
	"github.com/klasy/klasy/dwarfmap"
	"github.com/klasy/klasy/internal/cachedir"
	"github.com/klasy/klasy/kbuild"
	"github.com/klasy/klasy/weaver/runtime"
)

// TestReplaceResolveErrors: what a <replace> cannot replace in Debian's
// 6.1 vmlinux is refused at the pointcut, saying why.
func TestReplaceResolveErrors(t *testing.T) {
	x := debianIndex(t)
	tests := []struct{ pc, want string }{
		{"execution(ksys_pread64)", "x.klasy:1:37: execution(ksys_pread64): ksys_pread64 is also inlined (2 inlined copies in __ia32_sys_pread64, __x64_sys_pread64): those calls run the inlined copy"},
		{"execution(skb_put_data)", "skb_put_data exists only inlined (6 inlined copies in "},
		{"execution(m_show)", "execution(m_show): 2 functions are called m_show (kernel/module/procfs.c:65, fs/namespace.c:1402): a replacement replaces one; choose it with within_file(FILE)"},
		{"execution(m_show) AND within_file(fs/nosuch.c)", "execution(m_show): no out-of-line body of m_show is selected by within_file(...)"},
		{"execution(no_such_function_at_all)", "execution(no_such_function_at_all): no function is called no_such_function_at_all"},
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
	x := debianIndex(t)
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

// TestReplaceMustReturn: a replacement that does not return on every
// path, returns a value from a void function or none from a non-void
// one does not compile, and each error is at the aspect's own line and
// column: the closing </replace> for a path that reaches the end, the
// return statement for the others. Built against Debian's headers.
func TestReplaceMustReturn(t *testing.T) {
	x := debianIndex(t)
	src := `<aspect>
  <advice>
    <pointcut>execution(ksys_lseek) AND argument(whence, w)</pointcut>
    <replace>
      if (*(unsigned int *)w == 0)
        return 0;
    </replace>
  </advice>
  <advice>
    <pointcut>execution(tcp_send_delayed_ack)</pointcut>
    <replace>return 1;</replace>
  </advice>
  <advice>
    <pointcut>execution(__do_sys_getppid)</pointcut>
    <replace>
      return;</replace>
  </advice>
</aspect>
`
	f, diags := aspect.Load("noreturn.klasy", []byte(src))
	if len(diags) > 0 {
		t.Fatal(diags)
	}
	jps, err := Resolve(f, x, ResolveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	SortJoinPoints(jps)
	m, err := Generate(f, jps, GenOptions{Path: "noreturn.klasy", RefAddr: x.Funcs(KASLRRef)[0].Entry})
	if err != nil {
		t.Fatal(err)
	}
	headers := filepath.Join(cachedir.Root(), "debian", "current", "headers")
	ctx := context.Background()
	rt, err := kbuild.Build(ctx, headers, runtime.Sources, kbuild.Options{})
	if err != nil {
		t.Fatalf("building the runtime: %v", err)
	}
	err = buildGenerated(ctx, headers, rt, m)
	var be *kbuild.BuildError
	if !errors.As(err, &be) {
		t.Fatalf("build: %v, want a build error", err)
	}
	got := m.AdviceDiagnostics(be.Diagnostics)
	want := []string{
		"noreturn.klasy:7:5: advice does not compile: control reaches end of non-void function",
		"noreturn.klasy:11:21: advice does not compile: 'return' with a value, in function returning void",
		"noreturn.klasy:16:7: advice does not compile: 'return' with no value, in function returning non-void",
	}
	var lines []string
	for _, d := range got {
		lines = append(lines, strings.NewReplacer("‘", "'", "’", "'").Replace(d.String()))
	}
	slices.Sort(lines)
	slices.Sort(want)
	if len(lines) != len(want) {
		t.Fatalf("diagnostics:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("diagnostic %d = %q, want %q...", i, lines[i], w)
		}
	}
}

// buildGenerated builds the advice module m against headers, with the
// symbols of the runtime rt built against them.
func buildGenerated(ctx context.Context, headers string, rt *kbuild.Result, m *Module) error {
	hdr, err := runtime.Sources.ReadFile(runtime.Header)
	if err != nil {
		return err
	}
	files := fstest.MapFS{runtime.Header: {Data: hdr}}
	for name, data := range m.Files {
		files[name] = &fstest.MapFile{Data: data}
	}
	_, err = kbuild.Build(ctx, headers, files, kbuild.Options{ExtraSymbols: [][]byte{rt.Symvers}})
	return err
}
