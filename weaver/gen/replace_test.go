package gen

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/klasy/klasy/aspect"
	"github.com/klasy/klasy/internal/cachedir"
	"github.com/klasy/klasy/kbuild"
	"github.com/klasy/klasy/weaver/internal/weavertest"
	"github.com/klasy/klasy/weaver/joinpoint"
	"github.com/klasy/klasy/weaver/resolve"
	"github.com/klasy/klasy/weaver/runtime"
)

// TestReplaceMustReturn: a replacement that does not return on every
// path, returns a value from a void function or none from a non-void
// one does not compile, and each error is at the aspect's own line and
// column: the closing </replace> for a path that reaches the end, the
// return statement for the others. Built against Debian's headers.
func TestReplaceMustReturn(t *testing.T) {
	x := weavertest.DebianIndex(t)
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
	jps, err := resolve.Resolve(f, x, resolve.ResolveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	joinpoint.SortJoinPoints(jps)
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
