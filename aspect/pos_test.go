package aspect

import (
	"strings"
	"testing"
	"time"
)

// TestLineIndex: LF, CR LF and a CR alone each end a line.
func TestLineIndex(t *testing.T) {
	src := "ab\rcd\r\nef\ngh\r\r\nij\n\rkl"
	li := newLineIndex("x", []byte(src))
	for _, c := range []struct {
		at        string // the text at the offset
		line, col int
	}{
		{"ab", 1, 1}, {"b\r", 1, 2}, {"\rcd", 1, 3}, {"cd", 2, 1}, {"\r\nef", 2, 3}, {"\nef", 2, 4},
		{"ef", 3, 1}, {"gh", 4, 1}, {"\r\r\n", 4, 3}, {"\r\nij", 5, 1}, {"ij", 6, 1}, {"\rkl", 7, 1}, {"kl", 8, 1},
	} {
		off := strings.Index(src, c.at)
		if p := li.pos(off); p.Line != c.line || p.Col != c.col {
			t.Errorf("offset %d (%q): %d:%d, want %d:%d", off, c.at, p.Line, p.Col, c.line, c.col)
		}
	}
}

// TestLineEnds: an error on the fourth line is reported there whatever
// the file's line ends, including old Mac files with a CR alone.
func TestLineEnds(t *testing.T) {
	lines := []string{
		"<aspect>",
		"  <advice>",
		"    <pointcut>access(sk_buff.len) AND",
		"      within_file(a.c) AND cflow(x)</pointcut>",
		"    <before>f();</before>",
		"  </advice>",
		"</aspect>",
	}
	for name, eol := range map[string]string{"LF": "\n", "CR LF": "\r\n", "CR": "\r"} {
		src := strings.Join(lines, eol) + eol
		_, diags := Load("x.klasy", []byte(src))
		if len(diags) != 1 {
			t.Errorf("%s: %d diagnostics, want 1: %v", name, len(diags), diags)
			continue
		}
		col := strings.Index(lines[3], "cflow") + 1
		if p := diags[0].Pos; p.Line != 4 || p.Col != col || !strings.Contains(diags[0].Msg, "unknown pointcut designator cflow") {
			t.Errorf("%s: %v, want x.klasy:4:%d: unknown pointcut designator cflow", name, diags[0], col)
		}
	}
}

// TestEncoding: an aspect is UTF-8 without NUL bytes. UTF-16 and UTF-32
// are named for the whole file; a NUL or a byte that is not UTF-8 is
// reported where it is.
func TestEncoding(t *testing.T) {
	valid := advice("access(sk_buff.len)")
	utf16 := func(s string, bigEndian, bom bool) string {
		var b []byte
		if bom {
			b = []byte{0xff, 0xfe}
			if bigEndian {
				b = []byte{0xfe, 0xff}
			}
		}
		for i := 0; i < len(s); i++ {
			if bigEndian {
				b = append(b, 0, s[i])
			} else {
				b = append(b, s[i], 0)
			}
		}
		return string(b)
	}
	for _, c := range []struct {
		name string
		src  string // » marks where the diagnostic points; none: the whole file
		want string
	}{
		{"UTF-16 LE with BOM", utf16(valid, false, true), "UTF-16 text; save the aspect as UTF-8"},
		{"UTF-16 BE with BOM", utf16(valid, true, true), "UTF-16 text; save the aspect as UTF-8"},
		{"UTF-16 LE without BOM", utf16(valid, false, false), "UTF-16 text; save the aspect as UTF-8"},
		{"UTF-16 BE without BOM", utf16(valid, true, false), "UTF-16 text; save the aspect as UTF-8"},
		{"UTF-32 LE", "\xff\xfe\x00\x00<\x00\x00\x00", "UTF-32 text; save the aspect as UTF-8"},
		{"NUL in advice", strings.Replace(valid, "f();", "f();»\x00", 1), "NUL byte: an aspect is UTF-8 text without NUL bytes"},
		{"NUL in a pointcut", strings.Replace(valid, "len", "l»\x00en", 1), "NUL byte"},
		{"Latin-1 in advice", strings.Replace(valid, "f();", "printk(\"caf»\xe9\");", 1), "invalid UTF-8 (byte 0xe9): save the aspect as UTF-8"},
		{"truncated sequence", strings.Replace(valid, "f();", "x»\xe2\x82;", 1), "invalid UTF-8 (byte 0xe2)"},
		{"invalid before a NUL", strings.Replace(valid, "f();", "»\xff\x00", 1), "invalid UTF-8 (byte 0xff)"},
	} {
		src, offs := unmark(c.src)
		_, diags := Load("x.klasy", []byte(src))
		if len(diags) != 1 || !strings.Contains(diags[0].Msg, c.want) {
			t.Errorf("%s: %v, want one diagnostic %q", c.name, diags, c.want)
			continue
		}
		d := diags[0]
		if len(offs) == 0 {
			if d.Pos != (Position{Filename: "x.klasy"}) || d.String() != "x.klasy: "+d.Msg {
				t.Errorf("%s: at %+v (%s), want the whole file", c.name, d.Pos, d)
			}
			continue
		}
		want := (&File{lines: newLineIndex("x.klasy", []byte(src))}).Position(offs[0])
		if d.Pos.Line != want.Line || d.Pos.Col != want.Col {
			t.Errorf("%s: at %d:%d, want %d:%d", c.name, d.Pos.Line, d.Pos.Col, want.Line, want.Col)
		}
	}
	// UTF-8 text beyond ASCII, with or without a BOM, is fine.
	for _, src := range []string{"\xef\xbb\xbf" + valid, strings.Replace(valid, "f();", `printk("café ✓");`, 1)} {
		if _, diags := Load("x.klasy", []byte(src)); len(diags) > 0 {
			t.Errorf("%q: %v", src, diags)
		}
	}
}

// TestPointcutLimit: a pointcut of MaxPointcut bytes is parsed, one
// byte more is refused at its first character before it is parsed, and
// a pointcut of megabytes is refused at once.
func TestPointcutLimit(t *testing.T) {
	first, term := "access(sk_buff.len)", " AND within_file(a.c)"
	body := first + strings.Repeat(term, (MaxPointcut-len(first))/len(term))
	body += strings.Repeat(" ", MaxPointcut-len(body)-1) // with the leading newline: MaxPointcut
	at := func(pc string) string {
		return "<aspect>\n  <advice>\n    <pointcut>\n»" + pc + "</pointcut>\n    <before>f();</before>\n  </advice>\n</aspect>\n"
	}
	src, _ := unmark(at(body))
	if _, diags := Load("x.klasy", []byte(src)); len(diags) > 0 {
		t.Errorf("pointcut of %d bytes: %v", MaxPointcut, diags[0])
	}
	for _, pc := range []string{body + " ", body + strings.Repeat(term, 4<<20/len(term))} {
		src, offs := unmark(at(pc))
		start := time.Now()
		_, diags := Load("x.klasy", []byte(src))
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("pointcut of %d bytes refused after %v", len(pc)+1, d)
		}
		if len(diags) != 1 || !strings.Contains(diags[0].Msg, "longer than the 64 KiB limit: split it into several <advice>") {
			t.Errorf("pointcut of %d bytes: %v, want it refused", len(pc)+1, diags)
			continue
		}
		want := (&File{lines: newLineIndex("x.klasy", []byte(src))}).Position(offs[0])
		if p := diags[0].Pos; p.Line != want.Line || p.Col != want.Col {
			t.Errorf("pointcut of %d bytes refused at %d:%d, want %d:%d", len(pc)+1, p.Line, p.Col, want.Line, want.Col)
		}
	}
}
