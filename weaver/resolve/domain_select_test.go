package resolve

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/klasy/klasy/aspect"
	"github.com/klasy/klasy/dwarfmap"
	"github.com/klasy/klasy/internal/testenv"
)

// twoFuncs compiles testdata/domains/two.c (f_a, f_b) and indexes it.
func twoFuncs(t *testing.T) *dwarfmap.Index {
	t.Helper()
	obj := filepath.Join(t.TempDir(), "two.o")
	args := []string{"-O2", "-g", "-gdwarf-5", "-c", "-o", obj, filepath.Join("testdata", "domains", "two.c")}
	testenv.GCC(t, args...)
	x, _, err := dwarfmap.Load(obj, dwarfmap.Options{NoCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Close() })
	return x
}

// TestAdviceDomains: each advice goes to the domains its @ qualifiers
// allow, and in each domain is resolved with only the AND-groups that go
// there: the functions resolved per domain are checked against the
// compiled fixture's.
func TestAdviceDomains(t *testing.T) {
	x := twoFuncs(t)
	doms := []string{"a", "b"}
	for _, tc := range []struct {
		pc   string
		want map[string][]string // domain -> functions hooked; absent: the advice does not go there
		err  string
	}{
		{pc: "execution(f_b)", want: map[string][]string{"a": {"f_b"}, "b": {"f_b"}}},
		{pc: "execution(f_%) AND within_file(%two.c@a)", want: map[string][]string{"a": {"f_a", "f_b"}}},
		{pc: "execution(f_%) AND within_function(f_b@B)", want: map[string][]string{"b": {"f_b"}}},
		{pc: "execution(f_a) OR (execution(f_b) AND within_file(%two.c@b))", want: map[string][]string{"a": {"f_a"}, "b": {"f_a", "f_b"}}},
		{pc: "(execution(f_a) AND within_file(%two.c@a)) OR (execution(f_b) AND within_file(%two.c@b))", want: map[string][]string{"a": {"f_a"}, "b": {"f_b"}}},
		{pc: "execution(f_a) AND within_file(%two.c@a) AND within_function(f_a@b)", err: "x.klasy:3:11: advice 1 goes to no domain"},
		{pc: "execution(f_a) AND within_file(%two.c@c)", err: "x.klasy:3:49: domain c: the domains file has no such domain (it has a, b)"},
	} {
		t.Run(tc.pc, func(t *testing.T) {
			src := fmt.Sprintf("<aspect>\n<advice>\n<pointcut>%s</pointcut>\n<before>STORE_DATA(1);</before>\n</advice>\n</aspect>\n", tc.pc)
			f, diags := aspect.Load("x.klasy", []byte(src))
			if len(diags) > 0 {
				t.Fatal(diags)
			}
			per, diags := aspect.AdviceDomains(f, doms)
			var err error
			if len(diags) > 0 {
				err = diags
			}
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("AdviceDomains: %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var gotDoms, wantDoms []string
			for d := range tc.want {
				wantDoms = append(wantDoms, d)
			}
			slices.Sort(wantDoms)
			gotDoms = per[0]
			if !slices.Equal(gotDoms, wantDoms) {
				t.Errorf("advice goes to %v, want %v", gotDoms, wantDoms)
			}
			for _, d := range gotDoms {
				jps, err := Resolve(f, x, ResolveOptions{Domain: d})
				if err != nil {
					t.Fatalf("domain %s: %v", d, err)
				}
				var fns []string
				for _, jp := range jps {
					fns = append(fns, jp.Function)
				}
				slices.Sort(fns)
				if !slices.Equal(fns, tc.want[d]) {
					t.Errorf("domain %s hooks %v, want %v", d, fns, tc.want[d])
				}
			}
			// Without a domains file a qualifier is refused.
			if strings.Contains(tc.pc, "@") {
				if _, err := Resolve(f, x, ResolveOptions{}); err == nil || !strings.Contains(err.Error(), "needs a domains file") {
					t.Errorf("Resolve without a domain: %v", err)
				}
			}
		})
	}
}

// TestDomainQualifierEveryKind: block(...) and <replace> groups take
// @ qualifiers as execution and access groups do: resolved in their
// domain, dropped in another, refused without a domains file.
func TestDomainQualifierEveryKind(t *testing.T) {
	x := twoFuncs(t)
	load := func(when, pc string) *aspect.File {
		t.Helper()
		body := "STORE_DATA(1);"
		if when == aspect.Replace {
			body = "return 0;"
		}
		src := fmt.Sprintf("<aspect>\n<advice>\n<pointcut>%s</pointcut>\n<%s>%s</%s>\n</advice>\n</aspect>\n", pc, when, body, when)
		f, diags := aspect.Load("x.klasy", []byte(src))
		if len(diags) > 0 {
			t.Fatal(diags)
		}
		return f
	}

	blocks := load("before", "block(f_b) AND within_file(%two.c@a)")
	jps, err := Resolve(blocks, x, ResolveOptions{Domain: "a"})
	if err != nil || len(jps) == 0 {
		t.Fatalf("block(f_b) in domain a: %d join points, %v", len(jps), err)
	}
	for _, jp := range jps {
		if jp.Function != "f_b" {
			t.Errorf("block(f_b) in domain a hooks %s", jp.Function)
		}
	}
	if jps, err := Resolve(blocks, x, ResolveOptions{Domain: "b"}); err != nil || len(jps) != 0 {
		t.Errorf("block(f_b) of domain a resolved in domain b: %d join points, %v", len(jps), err)
	}

	repl := load(aspect.Replace, "execution(f_b) AND within_file(%two.c@a)")
	if jps, err := Resolve(repl, x, ResolveOptions{Domain: "b"}); err != nil || len(jps) != 0 {
		t.Errorf("<replace> of domain a resolved in domain b: %d join points, %v", len(jps), err)
	}
	if _, err := Resolve(repl, x, ResolveOptions{Domain: "a"}); err != nil && strings.Contains(err.Error(), "domain") {
		t.Errorf("<replace> in its own domain refused for its qualifier: %v", err)
	}

	for _, f := range []*aspect.File{blocks, repl} {
		if _, err := Resolve(f, x, ResolveOptions{}); err == nil || !strings.Contains(err.Error(), "a domain (@a) needs a domains file") {
			t.Errorf("%s without a domains file: %v", f.Advice[0].When, err)
		}
	}
}
