package main

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klasy/klasy/domains"
)

// TestDomainsErrors: the --domains forms of weave, list, unweave and
// status refuse a bad file at FILE:LINE, the one-kernel options beside
// it, an aspect naming a domain the file lacks or an advice no domain
// gets (at the aspect's FILE:LINE:COL), and a domain whose agent does not
// answer, naming it, before anything is woven.
func TestDomainsErrors(t *testing.T) {
	t.Setenv("KLASY_LAB_DIR", t.TempDir())
	dir := t.TempDir()
	write := func(name, text string) string { return writeFile(t, dir, name, text) }
	img := write("vmlinux", "")
	os.Mkdir(filepath.Join(dir, "build"), 0o755)
	bad := write("bad.yaml", "domains:\n  - name: a\n    lab: x\n    kernel: y\n")
	dup := write("dup.yaml", "domains:\n  - name: a\n    lab: x\n  - name: A\n    lab: y\n")
	noimg := write("noimg.yaml", "domains:\n  - name: a\n    lab: x\n    vmlinux: none\n")
	// c's agent is a port nothing listens on: the keys are real, the
	// answer never comes.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	unreachable := "ca: {cert: keys/ca.crt, key: keys/ca.key}\ncontroller: {cert: keys/c.crt, key: keys/c.key}\ndomains:\n" +
		"  - name: c\n    address: " + addr + "\n    vmlinux: " + img + "\n    headers: " + filepath.Join(dir, "build") + "\n"
	unr := write("unr.yaml", unreachable)
	f, err := domains.Parse(unr, []byte(unreachable))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := domains.GenerateKeys(f); err != nil {
		t.Fatal(err)
	}
	two := write("two.yaml", "domains:\n  - name: a\n    lab: x\n  - name: b\n    lab: y\n")
	asp := func(name, pc string) string {
		return write(name+".klasy", "<aspect>\n  <advice>\n    <pointcut>"+pc+"</pointcut>\n    <before>STORE_DATA(1);</before>\n  </advice>\n</aspect>\n")
	}
	plain := asp("plain", "execution(ksys_read)")
	other := asp("other", "execution(ksys_read) AND within_file(%read_write.c@c)")
	none := asp("none", "execution(ksys_read) AND within_file(%read_write.c@a) AND within_function(ksys_read@b)")
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"weave", "--domains", bad, plain}, bad + `:4: unknown key "kernel"`},
		{[]string{"status", "--domains", dup}, dup + ":4: domain A is named twice (first at line 2)"},
		{[]string{"unweave", "--domains", noimg, "plain"}, noimg + ":4: domain a vmlinux " + filepath.Join(dir, "none") + ": no such file"},
		{[]string{"list", "--domains", noimg, plain}, noimg + ":4: domain a vmlinux"},
		{[]string{"weave", "--domains", two, "--lab", "x", plain}, "give no --lab, --vmlinux, --headers or --module"},
		{[]string{"list", "--domains", two, "--vmlinux", img, plain}, "give no --lab"},
		{[]string{"weave", "--domains", unr, plain}, "domain c: its agent at " + addr + ": "},
		{[]string{"status", "--domains", unr}, "domain c: its agent at " + addr},
	} {
		var errb bytes.Buffer
		err := run(&stdio{In: strings.NewReader(""), Out: &bytes.Buffer{}, Err: &errb}, tt.args)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("klasy %s: error %v, want it to contain %q", strings.Join(tt.args, " "), err, tt.want)
		}
	}
	// Diagnostics come at the aspect's FILE:LINE:COL, on standard error.
	for _, tt := range []struct {
		file, want string
	}{
		{other, other + ":3:66: domain c: the domains file has no such domain (it has a, b)"},
		{none, none + ":3:15: advice 1 goes to no domain"},
	} {
		for _, cmd := range []string{"weave", "list"} {
			var errb bytes.Buffer
			err := run(&stdio{In: strings.NewReader(""), Out: &bytes.Buffer{}, Err: &errb}, []string{cmd, "--domains", two, tt.file})
			if err == nil || !strings.Contains(errb.String(), tt.want) {
				t.Errorf("klasy %s --domains two.yaml %s: %v, stderr %q; want %q", cmd, filepath.Base(tt.file), err, errb.String(), tt.want)
			}
		}
	}
}

// writeFile writes text to dir/name and returns its path.
func writeFile(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
