package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeAspect(t *testing.T, name, src string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const validAspect = `<aspect>
  <xflow name="netflow">
    <start><pointcut>access(sk_buff.data) AND within_function(__alloc_skb)</pointcut></start>
    <transit>
      <pointcut>access(sk_buff.head) AND within_function(skb_clone)</pointcut>
      <copy from="skb" to="n"/>
    </transit>
    <quit><pointcut>access(sk_buff.%) AND within_function(kfree_skbmem)</pointcut></quit>
  </xflow>
  <advice>
    <pointcut>access(sk_buff.len) AND target(skb) AND xflow(netflow, skb, id)</pointcut>
    <before>if (id &lt; 100) printk("flow %d\n", id);</before>
  </advice>
</aspect>
`

const invalidAspect = `<aspect>
  <advice>
    <pointcut>
      access(sk_buff.len) AND
      execution(skb_clone) OR within_file(dev.c)
    </pointcut>
    <before>f();</before>
  </advice>
</aspect>
`

func TestCheckCommand(t *testing.T) {
	good := writeAspect(t, "good.klasy", validAspect)
	bad := writeAspect(t, "bad.klasy", invalidAspect)

	var out, errb bytes.Buffer
	if err := run(&stdio{Out: &out, Err: &errb}, []string{"check", good}); err != nil {
		t.Fatalf("check of a valid aspect: %v\n%s", err, errb.String())
	}
	if out.Len()+errb.Len() != 0 {
		t.Errorf("check of a valid aspect printed %q %q", out.String(), errb.String())
	}

	out.Reset()
	errb.Reset()
	err := run(&stdio{Out: &out, Err: &errb}, []string{"check", good, bad})
	var ee exitError
	if !errors.As(err, &ee) || ee.Code != 1 {
		t.Fatalf("check with an invalid aspect = %v, want exit status 1", err)
	}
	lines := strings.Split(strings.TrimSpace(errb.String()), "\n")
	want := []string{
		bad + ":5:7: access and execution cannot be joined by AND",
		bad + ":5:31: within_file(dev.c): every AND-group",
	}
	if len(lines) != len(want) {
		t.Fatalf("got %d diagnostic lines, want %d:\n%s", len(lines), len(want), errb.String())
	}
	for i := range want {
		if !strings.HasPrefix(lines[i], want[i]) {
			t.Errorf("line %d = %q, want prefix %q", i, lines[i], want[i])
		}
	}

	out.Reset()
	errb.Reset()
	run(&stdio{Out: &out, Err: &errb}, []string{"check", "--json", bad})
	var d struct {
		File    string `json:"file"`
		Line    int    `json:"line"`
		Col     int    `json:"col"`
		Message string `json:"message"`
	}
	first := strings.Split(out.String(), "\n")[0]
	if err := json.Unmarshal([]byte(first), &d); err != nil || d.File != bad || d.Line != 5 || d.Col != 7 {
		t.Errorf("--json line %q: %+v, %v", first, d, err)
	}
}

func TestCheckUsage(t *testing.T) {
	for _, args := range [][]string{{"check"}, {"check", "--frob", "x"}, {"translate"}, {"translate", "a", "b"}} {
		err := run(&stdio{Out: &bytes.Buffer{}, Err: &bytes.Buffer{}}, args)
		if err == nil || !strings.Contains(err.Error(), "klasy help "+args[0]) {
			t.Errorf("%q: error %v, want a usage error pointing at the help", args, err)
		}
	}
	var errb bytes.Buffer
	err := run(&stdio{Out: &bytes.Buffer{}, Err: &errb}, []string{"check", "/nonexistent.klasy"})
	if err == nil || !strings.Contains(errb.String(), "reading aspect") {
		t.Errorf("missing file: %v, stderr %q", err, errb.String())
	}
}

// TestTranslateRoundTrip: what klasy translate prints, klasy check accepts.
func TestTranslateRoundTrip(t *testing.T) {
	in := writeAspect(t, "flow.klasy", validAspect)
	var out, errb bytes.Buffer
	if err := run(&stdio{Out: &out, Err: &errb}, []string{"translate", in}); err != nil {
		t.Fatalf("translate: %v\n%s", err, errb.String())
	}
	for _, want := range []string{"get_new_flowid()", "register_flowid(netflow,", "get_flowid(netflow, skb)", "remove_flowid(netflow,"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("translation lacks %s:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "<xflow") || strings.Contains(out.String(), "xflow(") {
		t.Errorf("translation still uses xflow:\n%s", out.String())
	}
	translated := writeAspect(t, "translated.klasy", out.String())
	errb.Reset()
	if err := run(&stdio{Out: &bytes.Buffer{}, Err: &errb}, []string{"check", translated}); err != nil {
		t.Fatalf("klasy check rejects the translation: %v\n%s\n%s", err, errb.String(), out.String())
	}

	// A file with errors: diagnostics, exit 1, nothing on stdout.
	bad := writeAspect(t, "bad.klasy", invalidAspect)
	out.Reset()
	errb.Reset()
	err := run(&stdio{Out: &out, Err: &errb}, []string{"translate", bad})
	var ee exitError
	if !errors.As(err, &ee) || ee.Code != 1 || out.Len() != 0 || !strings.Contains(errb.String(), bad+":5:7:") {
		t.Errorf("translate of an invalid aspect: err %v, stdout %q, stderr %q", err, out.String(), errb.String())
	}
}

// TestCheckStdin: '-' reads the aspect from standard input, as an editor
// or a pipeline gives it, and names it <stdin> in diagnostics.
func TestCheckStdin(t *testing.T) {
	var out, errb bytes.Buffer
	err := run(&stdio{In: strings.NewReader(invalidAspect), Out: &out, Err: &errb}, []string{"check", "-"})
	var ee exitError
	if !errors.As(err, &ee) || ee.Code != 1 || !strings.HasPrefix(errb.String(), "<stdin>:5:7: access and execution") {
		t.Errorf("check - of an invalid aspect: err %v, stderr %q", err, errb.String())
	}
	out.Reset()
	errb.Reset()
	if err := run(&stdio{In: strings.NewReader(validAspect), Out: &out, Err: &errb}, []string{"translate", "-"}); err != nil || !strings.Contains(out.String(), "register_flowid(netflow,") {
		t.Errorf("translate - of a valid aspect: err %v, stdout %q, stderr %q", err, out.String(), errb.String())
	}
}

// TestCheckUnreadableFile: a file that cannot be read is reported like
// an invalid one, and the other files are still checked.
func TestCheckUnreadableFile(t *testing.T) {
	bad := writeAspect(t, "bad.klasy", invalidAspect)
	missing := filepath.Join(t.TempDir(), "missing.klasy")
	var out, errb bytes.Buffer
	err := run(&stdio{Out: &out, Err: &errb}, []string{"check", missing, bad})
	var ee exitError
	if !errors.As(err, &ee) || ee.Code != 1 {
		t.Fatalf("check with a missing file = %v, want exit status 1", err)
	}
	for _, want := range []string{"klasy: reading aspect: open " + missing + ": no such file", bad + ":5:7: "} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, errb.String())
		}
	}
}
