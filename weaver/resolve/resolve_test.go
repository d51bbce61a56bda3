package resolve

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klasy/klasy/aspect"
	"github.com/klasy/klasy/internal/cachedir"
	"github.com/klasy/klasy/internal/golden"
	"github.com/klasy/klasy/weaver/internal/weavertest"
	"github.com/klasy/klasy/weaver/joinpoint"
)

// TestResolveGolden keeps the join points of the test aspects in
// Debian's 6.1.0-56 vmlinux, with where every argument is read, in
// testdata/golden (one case per line, as x86asm's decode.txt).
func TestResolveGolden(t *testing.T) {
	x := weavertest.DebianIndex(t)
	var b strings.Builder
	for _, p := range weavertest.GoldenAspects {
		jps, err := Resolve(weavertest.LoadAspect(t, p), x, ResolveOptions{})
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		joinpoint.SortJoinPoints(jps)
		fmt.Fprintf(&b, "# %s\n%s", filepath.Base(p), weavertest.FormatJoinPoints(jps))
	}
	golden.Check(t, "testdata/resolve.golden", b.String())
}

// TestResolveErrors: designators that select nothing, or that this
// weaver cannot weave, fail at their position in the aspect.
func TestResolveErrors(t *testing.T) {
	x := weavertest.DebianIndex(t)
	tests := []struct{ pc, want string }{
		{"execution(no_such_function_at_all)", "x.klasy:1:37: execution(no_such_function_at_all): no function is called no_such_function_at_all"},
		{"execution(m_show) AND within_file(fs/nosuch.c)", "x.klasy:1:37: execution(m_show): no body or inlined copy of m_show is selected by within_file(...)"},
		{"execution(ksys_pread64) AND within_function(nosuch)", "no body or inlined copy of ksys_pread64 is selected by within_function(...)"},
		{"execution(m_show) AND execution(ksys_read)", "is selected by"},
		{"access(sk_buf.len)", "access(sk_buf.len): no struct or union sk_buf in " + filepath.Join(cachedir.Root(), "debian", "current", "vmlinux") + "; did you mean sk_buff"},
		{"execution(m_show) AND within_file(fs/namespace.c@dom0)", "a domain (@dom0) needs a domains file"},
		// A line without code names the nearest lines with code.
		{"line(fs/namei.c:4174)", "x.klasy:1:27: line(fs/namei.c:4174): fs/namei.c:4174 has no code (the compiler merged or removed it, or it holds no statement); the nearest lines with code are 4173 above and 4176 below"},
		{"line(fs/nosuch.c:12)", "x.klasy:1:27: line(fs/nosuch.c:12): no source file is called fs/nosuch.c in the line tables of"},
		{"line(fs/namei.c:4176) AND within_function(path_openat)", "line(fs/namei.c:4176): its code is in do_mkdirat, none of them selected by within_function(...)"},
		{"line(fs/namei.c:4176) AND local_var(no_such_var, v)", "line(fs/namei.c:4176): no_such_var is in scope at none of its 1 copies of code"},
		{"block(no_such_function_at_all)", "x.klasy:1:27: block(no_such_function_at_all): no function is called no_such_function_at_all"},
		{"block(mode_strip_umask)", "block(mode_strip_umask): mode_strip_umask is only ever inlined"},
		// Every unknown name gets the nearest names there are.
		{"execution(vfs_raed)", "x.klasy:1:37: execution(vfs_raed): no function is called vfs_raed in " + x.Image().Path + "; did you mean vfs_read?"},
		{"execution(__x64_sys_getppdi)", "; did you mean __x64_sys_getpid, __x64_sys_getppid"},
		{"block(vfs_raed)", "block(vfs_raed): no function is called vfs_raed in " + x.Image().Path + "; did you mean vfs_read?"},
		{"execution(ksys_pread64) AND within_function(ksys_prad64)", "is selected by within_function(...); did you mean ksys_pread64?"},
		{"execution(getppid_x) AND within_function(__x64_sys_getppid)", "no function is called getppid_x"},
		{"execution(task_tgid_vnr) AND within_function(__x64_sys_getppid)", "; __x64_sys_getppid is __do_sys_getppid to the DWARF: within_function(__do_sys_getppid)"},
		{"line(fs/namei.c:4176) AND within_function(do_mkdirt)", "none of them selected by within_function(...); did you mean do_mkdirat?"},
		{"line(fs/naemi.c:12)", "line(fs/naemi.c:12): no source file is called fs/naemi.c in the line tables of " + x.Image().Path + "; did you mean fs/namei.c?"},
		{"block(do_mkdirat) AND within_file(fs/open.c)", "block(do_mkdirat): no out-of-line body of it is in the file within_file(...) names"},
	}
	for _, tt := range tests {
		src := "<aspect><advice><pointcut>" + tt.pc + "</pointcut><before>STORE_DATA(1);</before></advice></aspect>\n"
		f, diags := aspect.Load("x.klasy", []byte(src))
		if len(diags) > 0 {
			t.Fatalf("%s: %v", tt.pc, diags)
		}
		_, err := Resolve(f, x, ResolveOptions{})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want %q", tt.pc, err, tt.want)
		}
	}
}

// TestResolveSyscallAlias: execution(__x64_sys_getppid), the name the
// kernel's symbol table and every tracer give the syscall, is the body
// the DWARF calls __do_sys_getppid, and a warning says so; a pattern
// with % matches DWARF names only.
func TestResolveSyscallAlias(t *testing.T) {
	x := weavertest.DebianIndex(t)
	for _, pc := range []string{"execution(__x64_sys_getppid)", "block(__x64_sys_getppid)"} {
		src := "<aspect><advice><pointcut>" + pc + "</pointcut><before>STORE_DATA(1);</before></advice></aspect>\n"
		f, diags := aspect.Load("x.klasy", []byte(src))
		if len(diags) > 0 {
			t.Fatalf("%s: %v", pc, diags)
		}
		var warns []string
		jps, err := Resolve(f, x, ResolveOptions{Warn: func(w joinpoint.Warning) { warns = append(warns, w.String()) }})
		if err != nil {
			t.Fatalf("%s: %v", pc, err)
		}
		if len(jps) == 0 {
			t.Fatalf("%s: no join points", pc)
		}
		for _, jp := range jps {
			if jp.Function != "__do_sys_getppid" || jp.Skipped != "" {
				t.Errorf("%s: join point in %s at %#x (skipped: %q), want __do_sys_getppid's", pc, jp.Function, jp.Addr, jp.Skipped)
			}
		}
		if want := "__x64_sys_getppid is __do_sys_getppid"; len(warns) != 1 || !strings.Contains(warns[0], want) {
			t.Errorf("%s: warnings %q, want one saying %q", pc, warns, want)
		}
	}
	src := "<aspect><advice><pointcut>execution(__x64_sys_getppi%)</pointcut><before>STORE_DATA(1);</before></advice></aspect>\n"
	f, _ := aspect.Load("x.klasy", []byte(src))
	if _, err := Resolve(f, x, ResolveOptions{}); err == nil || !strings.Contains(err.Error(), "no function matches __x64_sys_getppi%") {
		t.Errorf("execution(__x64_sys_getppi%%): %v, want no function matches", err)
	}
}
