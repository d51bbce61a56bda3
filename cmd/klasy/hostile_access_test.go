package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klasy/klasy/internal/cachedir"
	"github.com/klasy/klasy/internal/testenv"
	"github.com/klasy/klasy/lab"
)

// Hostile inputs to access join points (issue 10): modules that are not
// modules or were built without the plugin, structs and members that do
// not exist, pointcuts that select nothing. Each fails in one line, or
// for a pointcut that selects nothing, warns in one line.
func init() {
	aspectIn := func(t *testing.T, dir, pointcut string) string {
		p := filepath.Join(dir, "a.klasy")
		body := "<aspect>\n  <advice>\n    <pointcut>" + pointcut + "</pointcut>\n    <before>STORE_DATA(1);</before>\n  </advice>\n</aspect>\n"
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// builtVmlinux is the built lab kernel's image: the one with
	// .debug_klasy (make lab-kernel).
	builtVmlinux := func(t *testing.T) string {
		k, err := lab.FindKernel(lab.Built)
		testenv.Need(t, "lab-kernel", err)
		return k.Vmlinux
	}
	// fakeModule compiles C (with -g unless flags say otherwise) into
	// dir/name: .modinfo makes it look like a module to klasy, with no
	// .debug_klasy.
	fakeModule := func(t *testing.T, dir, name, src string, flags ...string) string {
		c := filepath.Join(dir, name+".c")
		if err := os.WriteFile(c, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, name)
		if flags == nil {
			flags = []string{"-g"}
		}
		args := append([]string{"-c", "-O2", "-o", out, c}, flags...)
		testenv.GCC(t, args...)
		return out
	}
	const modinfo = `__attribute__((section(".modinfo"), used)) static const char n[] = "name=fake";
struct counter { long value; };
long bump(struct counter *c) { return ++c->value; }
`
	// The image's index is the shared cache's (built once, by the first
	// test that needs it): a run prints no indexing progress then.
	warm := "KLASY_CACHE=" + cachedir.Root()
	list := func(t *testing.T, dir string, pointcut string, extra ...string) hostileRun {
		args := append([]string{"list", "--vmlinux", builtVmlinux(t)}, extra...)
		return hostileRun{args: append(args, aspectIn(t, dir, pointcut)), env: []string{warm}, timeout: 60 * time.Second}
	}
	hostileCases = append(hostileCases,
		hostileCase{
			name: "access-module-not-elf", class: "small", want: "notes.ko: not a kernel module: not an ELF file",
			setup: func(t *testing.T, dir string) hostileRun {
				p := filepath.Join(dir, "notes.ko")
				os.WriteFile(p, []byte("this is not a module\n"), 0o644)
				return list(t, dir, "access(sk_buff.len)", "--module", p)
			},
		},
		hostileCase{
			name: "access-module-object-not-module", class: "small", want: "not a kernel module",
			setup: func(t *testing.T, dir string) hostileRun {
				o := fakeModule(t, dir, "plain.o", "int f(int x) { return x + 1; }\n")
				return list(t, dir, "access(sk_buff.len)", "--module", o)
			},
		},
		hostileCase{
			// Without the plugin a module's accesses are inferred from
			// its DWARF: without DWARF there is nothing to go on.
			name: "access-module-without-debug-info", class: "small", want: "fake.ko: no DWARF debug info (this module was stripped",
			setup: func(t *testing.T, dir string) hostileRun {
				return list(t, dir, "access(counter.value)", "--module", fakeModule(t, dir, "fake.ko", modinfo, "-g0"))
			},
		},
		hostileCase{
			name: "access-module-missing", class: "small", want: "--module " + "nosuch.ko: no such file or directory",
			setup: func(t *testing.T, dir string) hostileRun {
				r := list(t, dir, "access(sk_buff.len)", "--module", "nosuch.ko")
				return r
			},
		},
		hostileCase{
			name: "access-no-such-struct", class: "small", want: "did you mean sk_buff",
			// The nearest struct names are suggested.
			setup: func(t *testing.T, dir string) hostileRun {
				return list(t, dir, "access(sk_buf.len)")
			},
		},
		hostileCase{
			name: "access-no-such-member", class: "small", want: "access(sk_buff.lenn): struct sk_buff has no member lenn; did you mean len",
			setup: func(t *testing.T, dir string) hostileRun {
				return list(t, dir, "access(sk_buff.lenn)")
			},
		},
		hostileCase{
			name: "access-selects-nothing", class: "small",
			setup: func(t *testing.T, dir string) hostileRun {
				r := list(t, dir, "access(sk_buff.len) AND within_file(no/such/file.c)")
				r.exitOK = true
				r.after = func(t *testing.T, stdout []byte) {
					if !strings.HasPrefix(string(stdout), "a: 0 join points") {
						t.Errorf("stdout %q, want 0 join points", stdout)
					}
				}
				r.afterErr = func(t *testing.T, stderr string) {
					want := "klasy: warning: " + filepath.Join(dir, "a.klasy") + ":3:15: access(sk_buff.len) AND within_file(no/such/file.c) selects no join point: none of the"
					if strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, want) {
						t.Errorf("stderr %q, want one line starting %q", stderr, want)
					}
				}
				return r
			},
		},
		hostileCase{
			name: "access-module-twice", class: "small", want: "is given twice",
			setup: func(t *testing.T, dir string) hostileRun {
				k, err := lab.FindKernel(lab.Built)
				testenv.Need(t, "lab-kernel", err)
				var mods []string
				filepath.WalkDir(k.ModulesDir, func(p string, d os.DirEntry, err error) error {
					if err == nil && strings.HasSuffix(p, ".ko") {
						mods = append(mods, p)
					}
					return nil
				})
				if len(mods) == 0 {
					testenv.Need(t, "lab-kernel", fmt.Errorf("no module in %s", k.ModulesDir))
				}
				return list(t, dir, "access(sk_buff.len)", "--module", mods[0], "--module", mods[0])
			},
		},
	)
}
