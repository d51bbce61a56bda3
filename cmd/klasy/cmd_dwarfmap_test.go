package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klasy/klasy/internal/testenv"
)

// fixtureImage compiles testdata/fixture.c into an executable.
func fixtureImage(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "fixture")
	args := []string{"-O2", "-g", "-fno-asynchronous-unwind-tables", "-nostdlib", "-Wl,--build-id", "-Wl,-e,main",
		"-Wl,--unresolved-symbols=ignore-all", "-o", out, "testdata/fixture.c"}
	testenv.GCC(t, args...)
	return out
}

func runKlasy(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	err := run(&stdio{Out: &out, Err: &errb}, args)
	return out.String(), errb.String(), err
}

// jsonLines decodes one object per line.
func jsonLines(t *testing.T, s string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not one JSON object per line: %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

func TestDwarfmapCommands(t *testing.T) {
	t.Setenv("KLASY_CACHE", t.TempDir())
	img := fixtureImage(t)

	out, errs, err := runKlasy(t, "lines", "--json", img, "process")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(errs, "indexed") {
		t.Errorf("first query should report building the index, stderr %q", errs)
	}
	for _, m := range jsonLines(t, out) {
		addrs, _ := m["addrs"].([]any)
		if m["function"] != "process" || !strings.HasSuffix(m["file"].(string), "fixture.c") || m["line"].(float64) <= 0 || len(addrs) == 0 ||
			!strings.HasPrefix(addrs[0].(string), "0x") {
			t.Errorf("lines object %v", m)
		}
	}
	// The second query loads the saved index silently.
	out, errs, err = runKlasy(t, "lines", img, "fixture.c", "--json")
	if err != nil || errs != "" || len(jsonLines(t, out)) < 10 {
		t.Errorf("lines fixture.c: %v, stderr %q, %d objects", err, errs, len(jsonLines(t, out)))
	}

	out, _, err = runKlasy(t, "vars", "--json", img, "process")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]map[string]any{}
	for _, m := range jsonLines(t, out) {
		got[m["name"].(string)] = m
	}
	if p := got["p"]; p == nil || p["kind"] != "param" || p["type"] != "struct packet *" || p["location"] != "register rdi" || p["available"] != true {
		t.Errorf("vars p: %v", p)
	}
	if i := got["i"]; i == nil || i["kind"] != "local" || i["location"] != "optimized out" {
		t.Errorf("vars i: %v", i)
	}

	out, _, err = runKlasy(t, "vars", img, "helper+0")
	if err != nil || !strings.Contains(out, "constant 3") || !strings.Contains(out, "[inline scale]") {
		t.Errorf("vars helper+0: %v\n%s", err, out)
	}

	out, _, err = runKlasy(t, "struct", img, "packet")
	if err != nil || !strings.Contains(out, "unsigned char flag_b:3;") || !strings.Contains(out, "void (*done)(struct packet *);") {
		t.Errorf("struct packet: %v\n%s", err, out)
	}

	out, _, err = runKlasy(t, "funcs", "--inlined", "--json", img, "scale")
	if err != nil {
		t.Fatal(err)
	}
	if ins := jsonLines(t, out); len(ins) != 2 || ins[0]["caller"] != "helper" || ins[0]["call_line"].(float64) <= 0 {
		t.Errorf("funcs --inlined scale: %v", ins)
	}

	// helper's own lines, then (with --inlined) those of scale inlined
	// into it, marked.
	out, _, err = runKlasy(t, "lines", "--json", img, "helper")
	if err != nil {
		t.Fatal(err)
	}
	own := jsonLines(t, out)
	for _, m := range own {
		if _, ok := m["inlined"]; ok {
			t.Errorf("lines helper without --inlined: %v", m)
		}
	}
	out, _, err = runKlasy(t, "lines", "--inlined", img, "helper")
	if ls := strings.Split(strings.TrimSpace(out), "\n"); err != nil || len(ls) <= len(own) ||
		!strings.HasSuffix(ls[len(ls)-1], "(inlined scale)") || strings.Contains(ls[0], "inlined") {
		t.Errorf("lines --inlined helper: %v\n%s", err, out)
	}

	out, _, err = runKlasy(t, "funcs", img, "pro%")
	if err != nil || !strings.Contains(out, "process") || !strings.Contains(out, "global") {
		t.Errorf("funcs pro%%: %v\n%s", err, out)
	}
}

func TestDwarfmapCommandErrors(t *testing.T) {
	t.Setenv("KLASY_CACHE", t.TempDir())
	img := fixtureImage(t)
	stripped := filepath.Join(t.TempDir(), "stripped")
	if b, err := exec.Command("objcopy", "--strip-debug", img, stripped).CombinedOutput(); err != nil {
		t.Fatalf("objcopy: %v %s", err, b)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"lines", img}, "want 2 arguments"},
		{[]string{"lines", "--bogus", img, "process"}, "flag provided but not defined"},
		{[]string{"lines", stripped, "process"}, "linux-image-<abi>-dbg"},
		{[]string{"lines", img, "nosuch_function"}, `no function "nosuch_function"`},
		{[]string{"lines", img, "fixture.c:0"}, "bad line number"},
		{[]string{"lines", "--inlined", img, "fixture.c"}, "--inlined applies to the lines of a function"},
		{[]string{"vars", img, "process:99999"}, "no code"},
		{[]string{"struct", img, "nosuch"}, `no struct or union "nosuch"`},
		{[]string{"funcs", img, "zz%"}, "no function matches"},
		{[]string{"lines", filepath.Join(t.TempDir(), "missing"), "f"}, "no such file"},
	} {
		_, _, err := runKlasy(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("klasy %s: %v, want an error mentioning %q", strings.Join(c.args, " "), err, c.want)
		}
	}
}

// TestQueryLab: lines, vars, struct, funcs and accesses take --lab NAME
// for IMAGE, the vmlinux the lab's record names (no agent is reached: a
// record is written here, no QEMU runs); a lab with no record, or an
// image given twice or not at all, is a clear error.
func TestQueryLab(t *testing.T) {
	t.Setenv("KLASY_CACHE", t.TempDir())
	t.Setenv("KLASY_LAB_DIR", t.TempDir())
	img := fixtureImage(t)
	dir := filepath.Join(os.Getenv("KLASY_LAB_DIR"), "fix")
	rec, _ := json.Marshal(map[string]any{"name": "fix", "pid": 1 << 30, "kernel": map[string]string{"Flavor": "debian", "Vmlinux": img}})
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "lab.json"), rec, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"lines", "process"}, {"vars", "helper+0"}, {"struct", "packet"}, {"funcs", "pro%"},
	} {
		want, _, err := runKlasy(t, append([]string{args[0], img}, args[1:]...)...)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		got, _, err := runKlasy(t, append([]string{args[0], "--lab", "fix"}, args[1:]...)...)
		if err != nil || got != want {
			t.Errorf("klasy %s --lab fix %s: %v\n%s\nwant, as with the image:\n%s", args[0], args[1], err, got, want)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"lines", "--lab", "nosuch", "process"}, "lab nosuch: no such lab (start it with: klasy lab up nosuch)"},
		{[]string{"funcs", "--lab", "fix", img, "pro%"}, "--lab fix names the image, and so does " + img + ": give IMAGE or --lab NAME, not both"},
		{[]string{"struct", "packet"}, "want 2 arguments, got 1: name the image, as IMAGE or with --lab NAME"},
		{[]string{"vars", "--lab", "fix"}, "want 1 arguments besides --lab NAME, got 0"},
		{[]string{"lines", "--lab", "../x", "process"}, "lab name"},
		{[]string{"accesses", "--lab", "nosuch", "sk_buff.len"}, "lab nosuch: no such lab"},
		{[]string{"accesses", "--lab", "fix", img, "sk_buff.len"}, "not both"},
		{[]string{"accesses", "sk_buff.len"}, "want BINARY and 'STRUCT.MEMBER', got 1 arguments (or name the lab whose vmlinux is BINARY: --lab NAME)"},
	} {
		_, _, err := runKlasy(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("klasy %s: %v, want an error mentioning %q", strings.Join(c.args, " "), err, c.want)
		} else if usage := strings.Contains(c.want, "want ") || strings.Contains(c.want, "not both"); usage && !strings.Contains(err.Error(), "for usage") {
			t.Errorf("klasy %s: %v is no usage error", strings.Join(c.args, " "), err)
		}
	}
}
