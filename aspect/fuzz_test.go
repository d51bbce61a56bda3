package aspect

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

var pointcutSeeds = []string{
	"access(inode.i_uid) AND within_function(inode_change_ok) AND target(inode_value);",
	"execution(check_free_space())",
	"execution(vfs_%) AND argument(file, f)",
	"access(sk_buff.%) AND target(skb) AND xflow(netflow, skb, id)",
	"access(netif_tx_request.flags) AND within_file(drivers/xen/netfront/netfront.c@linuxU)",
	"access(a.b) AND (within_file(x.c) OR within_function(f@dom0)) OR access(%.%) AND local_var(n, np)",
	"cflow(x) AND access(a.*)",
}

// FuzzPointcut: the parser never panics, and whatever it accepts prints
// in a canonical form that parses back to the same form.
func FuzzPointcut(f *testing.F) {
	for _, s := range pointcutSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e, perr := parsePointcut(s)
		if perr != nil {
			if perr.off < 0 || perr.off > len(s) {
				t.Fatalf("error offset %d outside the pointcut (len %d)", perr.off, len(s))
			}
			return
		}
		canon := e.String()
		e2, perr := parsePointcut(canon)
		if perr != nil {
			t.Fatalf("canonical form %q of %q does not parse: %s", canon, s, perr.msg)
		}
		if e2.String() != canon {
			t.Fatalf("canonical form is not stable: %q -> %q", canon, e2.String())
		}
		Groups(e)
		// The checker must cope with anything the parser accepts.
		pc := &Pointcut{Expr: e, Text: PlainText(s)}
		c := &checker{f: &File{Name: "fuzz"}, flows: map[string]*Flow{}}
		c.pointcut(pc, nil)
	})
}

// FuzzLoad: the XML layer and the checks never panic, every diagnostic
// points inside the file, and a valid aspect prints to an aspect that is
// valid and prints the same again.
func FuzzLoad(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/*/*.klasy")
	for _, p := range seeds {
		if src, err := os.ReadFile(p); err == nil {
			f.Add(src)
		}
	}
	for _, s := range pointcutSeeds {
		f.Add([]byte(advice(s)))
	}
	f.Add([]byte("<aspect><advice><pointcut>access(a.b)</pointcut><before><![CDATA[a<b&&c]]>&lt;&#x41;&#65;</before></advice></aspect>"))
	f.Fuzz(func(t *testing.T, src []byte) {
		file, diags := Load("fuzz.klasy", src)
		for _, d := range diags {
			if d.Pos == (Position{Filename: "fuzz.klasy"}) {
				continue // about the whole file
			}
			if d.Pos.Offset < 0 || d.Pos.Offset > len(src) || d.Pos.Line < 1 || d.Pos.Col < 1 {
				t.Fatalf("diagnostic outside the file: %v (len %d)", d, len(src))
			}
		}
		if file == nil || len(diags) > 0 {
			return
		}
		var out bytes.Buffer
		if err := Format(&out, file); err != nil {
			t.Fatal(err)
		}
		again, diags := Load("again.klasy", out.Bytes())
		if len(diags) > 0 {
			t.Fatalf("printed aspect is invalid: %v\ninput:\n%q\nprinted:\n%s", diags, src, out.String())
		}
		var out2 bytes.Buffer
		Format(&out2, again)
		if out.String() != out2.String() {
			t.Fatalf("printing is not a fixed point:\n%s\n---\n%s", out.String(), out2.String())
		}
	})
}
