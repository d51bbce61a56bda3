package domains

import (
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const good = `# two domains
ca:
  cert: keys/ca.crt
  key: keys/ca.key
controller:
  cert: keys/controller.crt
  key: keys/controller.key
domains:
  - name: dom0
    address: 127.0.0.1:7070
    cert: keys/dom0.crt
    key: keys/dom0.key
  - name: domU1
    address: "[::1]:7071"
    cert: /abs/domU1.crt
    key: keys/domU1.key
`

func TestParse(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d.yaml")
	f, err := Parse(path, []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(path)
	if f.CA.Cert != filepath.Join(dir, "keys/ca.crt") || f.Controller.Key != filepath.Join(dir, "keys/controller.key") {
		t.Errorf("relative paths not resolved against the file's directory: %+v %+v", f.CA, f.Controller)
	}
	if len(f.Domains) != 2 {
		t.Fatalf("got %d domains, want 2", len(f.Domains))
	}
	d := f.Domains[1]
	if d.Name != "domU1" || d.Address != "[::1]:7071" || d.Cert != "/abs/domU1.crt" || d.Key != filepath.Join(dir, "keys/domU1.key") || d.Line != 13 {
		t.Errorf("domain 2 = %+v", d)
	}
	if _, err := f.Domain("domU2"); err == nil || !strings.Contains(err.Error(), "dom0, domU1") {
		t.Errorf("Domain(domU2) = %v, want an error listing the domains", err)
	}
}

// TestParseErrors: every bad file fails at the line of its mistake.
func TestParseErrors(t *testing.T) {
	base := strings.SplitAfter(good, "\n")
	edit := func(line int, repl string) string { // 1-based
		l := append([]string(nil), base...)
		l[line-1] = repl
		return strings.Join(l, "")
	}
	for _, tc := range []struct {
		name, text string
		want       []string // ":LINE: message" fragments, in order
	}{
		{"unknown top key", edit(1, "cas: x\n"), []string{":1: unknown key \"cas\""}},
		{"unknown domain key", edit(11, "    kernel: vmlinux\n"), []string{":11: unknown key \"kernel\""}},
		{"unknown key in ca", edit(4, "  pass: x\n"), []string{":4: unknown key \"pass\""}},
		{"key twice", edit(11, "    address: 127.0.0.1:1\n"), []string{":11: mapping key \"address\" already defined at line 10"}},
		{"name twice", edit(14, "  - name: dom0\n"), []string{":14: domain dom0 is named twice (first at line 9)"}},
		{"name twice by case", edit(14, "  - name: DOM0\n"), []string{":14: domain DOM0 is named twice"}},
		{"bad name", edit(9, "  - name: dom_0\n"), []string{":9: domain name \"dom_0\""}},
		{"misspelt key", edit(10, "    cert2: x\n"), []string{":10: unknown key \"cert2\""}},
		{"missing address", strings.Replace(good, "    address: 127.0.0.1:7070\n", "", 1), []string{":9: domain dom0: lab or address: missing"}},
		{"lab and address", edit(11, "    lab: a\n"), []string{":11: domain dom0: lab and address: give one"}},
		{"lab with keys", strings.Replace(good, "    address: 127.0.0.1:7070\n", "    lab: a\n", 1), []string{":11: domain dom0: cert and key are an agent's"}},
		{"modules not a list", edit(11, "    modules: a.ko\n"), []string{":11: cannot unmarshal"}},
		{"bad port", edit(10, "    address: 127.0.0.1:99999\n"), []string{":10: domain dom0: address \"127.0.0.1:99999\": port"}},
		{"no port", edit(10, "    address: localhost\n"), []string{":10: domain dom0: address \"localhost\": want host:port"}},
		{"missing controller key", strings.Replace(good, "  key: keys/controller.key\n", "", 1), []string{":6: controller.key: missing"}},
		{"no domains", strings.Split(good, "domains:")[0] + "domains: []\n", []string{":8: domains: none listed"}},
		{"syntax", edit(10, "    address: [\n"), []string{"did not find expected"}},
		{"wrong type", edit(10, "    address: {a: 1}\n"), []string{":10: cannot unmarshal"}},
		{"not a mapping", "- a\n- b\n", []string{":1: want a mapping"}},
		{"empty", "", []string{"empty domains file"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "d.yaml")
			_, err := Parse(path, []byte(tc.text))
			if err == nil {
				t.Fatalf("no error for:\n%s", tc.text)
			}
			var es Errors
			if !errors.As(err, &es) {
				t.Fatalf("error %T %v is not Errors", err, err)
			}
			msg := err.Error()
			for _, w := range tc.want {
				if !strings.Contains(msg, path+w) && !strings.Contains(msg, w) {
					t.Errorf("error\n%s\nlacks %q", msg, w)
				}
			}
			if !strings.HasPrefix(msg, path) {
				t.Errorf("error %q does not start with the file's path", msg)
			}
		})
	}
}

// TestLoadMissingFiles: Load names each missing file at its line.
func TestLoadMissingFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "d.yaml")
	text := strings.Replace(good, "/abs/domU1.crt", "keys/domU1.crt", 1)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path)
	if err == nil {
		t.Fatal("Load of a file whose keys do not exist succeeded")
	}
	for _, w := range []string{":3: ca.cert " + filepath.Join(dir, "keys/ca.crt") + ": no such file", ":7: controller.key", ":11: domain dom0 cert", ":16: domain domU1 key", "klasy agent keys"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("Load error\n%v\nlacks %q", err, w)
		}
	}
	f, err := Parse(path, []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := GenerateKeys(f); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err != nil {
		t.Errorf("Load after GenerateKeys: %v", err)
	}
	if _, err := Load(filepath.Join(dir, "none.yaml")); err == nil || !strings.Contains(err.Error(), "none.yaml") {
		t.Errorf("Load of a missing file: %v", err)
	}
}

func TestGenerateKeys(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "d.yaml")
	f, err := Parse(path, []byte(strings.Replace(good, "/abs/domU1.crt", "keys/domU1.crt", 1)))
	if err != nil {
		t.Fatal(err)
	}
	wrote, err := GenerateKeys(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(wrote) != 8 {
		t.Errorf("wrote %d files, want 8 (CA, controller, 2 domains; certificate and key each): %v", len(wrote), wrote)
	}
	ca, err := readCert(f.CA.Cert)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	for _, c := range []struct {
		path  string
		usage x509.ExtKeyUsage
		dns   string
	}{
		{f.Controller.Cert, x509.ExtKeyUsageClientAuth, ""},
		{f.Domains[0].Cert, x509.ExtKeyUsageServerAuth, "dom0"},
		{f.Domains[1].Cert, x509.ExtKeyUsageServerAuth, "domU1"},
	} {
		cert, err := readCert(c.path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{c.usage}, DNSName: c.dns}); err != nil {
			t.Errorf("%s: %v", c.path, err)
		}
		// A domain's certificate is no client's, the controller's no server's.
		other := x509.ExtKeyUsageServerAuth
		if c.usage == other {
			other = x509.ExtKeyUsageClientAuth
		}
		if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{other}}); err == nil {
			t.Errorf("%s also verifies for %v", c.path, other)
		}
	}
	for _, k := range []string{f.CA.Key, f.Controller.Key, f.Domains[0].Key} {
		if fi, err := os.Stat(k); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, %v; want 0600", k, fi.Mode(), err)
		}
	}

	// Again: nothing to do, nothing replaced.
	before, _ := os.ReadFile(f.Domains[0].Key)
	if wrote, err := GenerateKeys(f); err != nil || len(wrote) != 0 {
		t.Errorf("second GenerateKeys wrote %v, %v", wrote, err)
	}
	if after, _ := os.ReadFile(f.Domains[0].Key); string(after) != string(before) {
		t.Error("second GenerateKeys replaced a key")
	}
	// A domain whose pair went missing gets a new one from the same CA.
	os.Remove(f.Domains[1].Cert)
	os.Remove(f.Domains[1].Key)
	if wrote, err := GenerateKeys(f); err != nil || len(wrote) != 2 {
		t.Errorf("GenerateKeys after removing domU1's pair wrote %v, %v", wrote, err)
	}
	// Half a pair is refused, not replaced.
	os.Remove(f.Domains[1].Cert)
	if _, err := GenerateKeys(f); err == nil || !strings.Contains(err.Error(), "domU1.key exists") {
		t.Errorf("GenerateKeys with a key and no certificate: %v", err)
	}
	// A certificate of another file's CA is refused.
	g, err := Parse(filepath.Join(t.TempDir(), "e.yaml"), []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	g.Domains = g.Domains[:1]
	if _, err := GenerateKeys(g); err != nil {
		t.Fatal(err)
	}
	os.Remove(f.Domains[1].Key)
	copyFile(t, g.Domains[0].Cert, f.Domains[1].Cert)
	copyFile(t, g.Domains[0].Key, f.Domains[1].Key)
	if _, err := GenerateKeys(f); err == nil || !strings.Contains(err.Error(), "was not issued by the CA") {
		t.Errorf("GenerateKeys with another CA's certificate: %v", err)
	}
	// No CA key: nothing can be issued.
	f.CA.Key = ""
	if _, err := GenerateKeys(f); err == nil {
		t.Error("GenerateKeys without a CA key succeeded")
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// FuzzParse: no input makes Parse panic, and what it accepts has named,
// addressed, distinct domains.
func FuzzParse(f *testing.F) {
	f.Add([]byte(good))
	f.Add([]byte("ca: {cert: a}\ncontroller: {cert: b, key: c}\ndomains: [{name: x, address: 'h:1'}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse("/d/f.yaml", data)
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, d := range file.Domains {
			if d.Name == "" || (d.Address == "") == (d.Lab == "") || seen[strings.ToLower(d.Name)] {
				t.Fatalf("accepted domain %+v", d)
			}
			seen[strings.ToLower(d.Name)] = true
		}
	})
}

// labs is a domains file of two labs and an agent reached by address:
// no key material is needed for the labs, the kernels' pieces are
// checked where they are given.
const labs = `domains:
  - name: a
    lab: klasy-a
  - name: b
    lab: klasy-b
    vmlinux: img/vmlinux
    headers: img/build
    modules:
      - img/one.ko
      - /abs/two.ko
`

func TestParseLabs(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "d.yaml")
	f, err := Parse(path, []byte(labs))
	if err != nil {
		t.Fatal(err)
	}
	b := f.Domains[1]
	if b.Lab != "klasy-b" || b.Vmlinux != filepath.Join(dir, "img/vmlinux") || b.Headers != filepath.Join(dir, "img/build") ||
		len(b.Modules) != 2 || b.Modules[0] != filepath.Join(dir, "img/one.ko") || b.Modules[1] != "/abs/two.ko" {
		t.Errorf("domain b = %+v", b)
	}
	for _, d := range f.Domains {
		if err := f.NeedKernel(&d); err != nil {
			t.Errorf("NeedKernel(%s) = %v; a lab knows its kernel", d.Name, err)
		}
	}
	if _, err := f.ClientTLS("a"); err == nil || !strings.Contains(err.Error(), ":2: domain a is lab klasy-a") {
		t.Errorf("ClientTLS of a lab domain: %v", err)
	}

	// Load checks every file at its line: the missing image, the
	// headers that are a file, the missing module.
	os.MkdirAll(filepath.Join(dir, "img"), 0o755)
	os.WriteFile(filepath.Join(dir, "img/build"), nil, 0o644)
	os.WriteFile(filepath.Join(dir, "img/one.ko"), nil, 0o644)
	os.WriteFile(path, []byte(labs), 0o644)
	_, err = Load(path)
	for _, w := range []string{
		path + ":6: domain b vmlinux " + filepath.Join(dir, "img/vmlinux") + ": no such file",
		path + ":7: domain b headers " + filepath.Join(dir, "img/build") + ": not a directory",
		path + ":10: domain b module /abs/two.ko: no such file",
	} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("Load error\n%v\nlacks %q", err, w)
		}
	}
	if err != nil && strings.Contains(err.Error(), "one.ko") {
		t.Errorf("Load complains of a module that exists: %v", err)
	}

	// An agent reached by address needs the controller's keys, and a
	// weave its kernel.
	addr := labs + "  - name: c\n    address: 127.0.0.1:7070\n"
	if _, err := Parse(path, []byte(addr)); err == nil || !strings.Contains(err.Error(), "ca.cert: missing") {
		t.Errorf("an address domain without ca: %v", err)
	}
	g, err := Parse(path, []byte("ca: {cert: ca.crt}\ncontroller: {cert: c.crt, key: c.key}\n"+addr))
	if err != nil {
		t.Fatal(err)
	}
	if err := g.NeedKernel(&g.Domains[2]); err == nil || err.Error() != path+":13: domain c: vmlinux and headers: missing; weaving into a domain reached by address needs its kernel image and headers (only a lab knows its kernel)" {
		t.Errorf("NeedKernel of an address domain without a kernel: %v", err)
	}
}

// TestParseBounds: a second YAML document, a file over MaxFileSize, more
// than MaxDomains domains are errors; an error quotes at most MaxQuote
// characters of a value, however long the value.
func TestParseBounds(t *testing.T) {
	dir := t.TempDir()
	long := strings.Repeat("x", MaxFileSize-100)
	many := func(n int) string {
		var b strings.Builder
		b.WriteString("domains:\n")
		for i := range n {
			fmt.Fprintf(&b, "  - {name: d%d, lab: l%d}\n", i, i)
		}
		return b.String()
	}
	for _, tc := range []struct {
		name, text string
		want       string
	}{
		{"second document", good + "---\ndomains: []\n", ":17: a second YAML document (after ---): a domains file is one document"},
		{"empty second document", good + "---\n", "a second YAML document"},
		{"second document after a comment", "domains:\n  - {name: a, lab: a}\n---\n# nothing here\n", ":3: a second YAML document"},
		{"too large", good + "# " + strings.Repeat("c", MaxFileSize) + "\n", ": larger than the 1 MiB limit for a domains file"},
		{"too many domains", many(MaxDomains + 1), fmt.Sprintf(":%d: domain 1025: more than the limit of 1024 domains", MaxDomains+2)},
		{"long name", "domains:\n  - name: " + long + "\n    lab: a\n", `:2: domain name "` + strings.Repeat("x", MaxQuote) + `…": use a letter`},
		{"long address", "domains:\n  - name: a\n    address: " + long + "\n", `:3: domain a: address "` + strings.Repeat("x", MaxQuote) + `…": want host:port`},
		{"long port", "domains:\n  - name: a\n    address: a:" + long + "\n", `:3: domain a: address "a:`},
		{"long key", "domains:\n  - name: a\n    " + long[:1000] + ": 1\n", `:3: unknown key "` + strings.Repeat("x", MaxQuote) + `…"`},
		{"long key twice", "domains:\n  - name: a\n    " + long[:1000] + ": 1\n    " + long[:1000] + ": 1\n", `:4: mapping key "` + strings.Repeat("x", MaxQuote) + `…" already defined at line 3`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, "d.yaml")
			_, err := Parse(path, []byte(tc.text))
			if err == nil {
				t.Fatalf("no error")
			}
			if msg := err.Error(); !strings.Contains(msg, path+tc.want) && !strings.Contains(msg, tc.want) {
				t.Errorf("error\n%.500s\nlacks %q", msg, tc.want)
			}
			for _, line := range strings.Split(err.Error(), "\n") {
				if n := len(line); n > len(path)+250 {
					t.Errorf("error of %d bytes: %.500s…", n, line)
				}
			}
		})
	}
	// Load refuses a file over the bound before reading it, a path no
	// file can have without quoting it whole, and MaxDomains is a count
	// the file may hold.
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, []byte(good+"# "+strings.Repeat("c", MaxFileSize)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(big); err == nil || !strings.Contains(err.Error(), big+": larger than the 1 MiB limit for a domains file") {
		t.Errorf("Load of a file over the limit: %v", err)
	}
	longPath := filepath.Join(dir, "long.yaml")
	if err := os.WriteFile(longPath, []byte("domains:\n  - name: a\n    lab: a\n    vmlinux: /"+strings.Repeat("p", 8000)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(longPath); err == nil || !strings.Contains(err.Error(), ":4: domain a vmlinux \"/ppp") || len(err.Error()) > 400 {
		t.Errorf("Load of a too long path: %.500v", err)
	}
	if f, err := Parse(filepath.Join(dir, "d.yaml"), []byte(many(MaxDomains))); err != nil || len(f.Domains) != MaxDomains {
		t.Errorf("Parse of %d domains: %v", MaxDomains, err)
	}
	f, err := Parse(filepath.Join(dir, "d.yaml"), []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Domain(long); err == nil || len(err.Error()) > 400 {
		t.Errorf("Domain of a long name: %.500v", err)
	}
}
