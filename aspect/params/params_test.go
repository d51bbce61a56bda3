package params

import (
	"strings"
	"testing"

	"github.com/klasy/klasy/aspect"
)

func TestSet(t *testing.T) {
	for _, tt := range []struct {
		arg, err string
	}{
		{"PID=42", ""},
		{"FUNC=vfs_read", ""},
		{"COMM=\"dd\"", ""},
		{"EMPTY=", ""},
		{"PID", "want NAME=VALUE"},
		{"1X=2", "C identifier"},
		{"X=a<b", "may not hold <"},
		{"X=a&b", "may not hold <"},
		{"X=a\nb", "may not hold <"},
		{"X=" + strings.Repeat("v", MaxValue+1), "more than"},
	} {
		err := Set{}.Set(tt.arg)
		if (err == nil) != (tt.err == "") || err != nil && !strings.Contains(err.Error(), tt.err) {
			t.Errorf("Set(%.20q) = %v, want %q", tt.arg, err, tt.err)
		}
	}
	s := Set{}
	s.Set("A=1")
	if err := s.Set("A=2"); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("A given twice: %v", err)
	}
}

func TestExpand(t *testing.T) {
	src := "<aspect>\n  <pointcut>execution(${FUNC}) AND within_file(${FILE})</pointcut>\n  <before>if (current->pid == ${PID}) STORE_DATA(${PID});</before>\n</aspect>\n"
	s := Set{"FUNC": "vfs_read", "FILE": "fs/read_write.c", "PID": "4242"}
	got, e, diags := Expand("a.klasy", []byte(src), s)
	if len(diags) > 0 {
		t.Fatal(diags)
	}
	want := "<aspect>\n  <pointcut>execution(vfs_read) AND within_file(fs/read_write.c)</pointcut>\n  <before>if (current->pid == 4242) STORE_DATA(4242);</before>\n</aspect>\n"
	if string(got) != want {
		t.Fatalf("expanded\n%s\nwant\n%s", got, want)
	}
	// Columns in the expansion map back to the text as written.
	line2, line3 := strings.Split(want, "\n")[1], strings.Split(want, "\n")[2]
	w2, w3 := strings.Split(src, "\n")[1], strings.Split(src, "\n")[2]
	for _, tt := range []struct {
		line       int
		expanded   string // a word of the expansion ...
		in, writtn string // ... and where it is written
	}{
		{2, "AND", line2, "AND"},
		{2, "vfs_read", line2, "${FUNC}"},
		{2, "_read)", line2, "${FUNC}"}, // inside a value: its ${
		{2, ")</pointcut>", line2, ")</pointcut>"},
		{3, "STORE_DATA", line3, "STORE_DATA"},
		{3, "4242);", line3, "${PID});"},
	} {
		written := w2
		if tt.line == 3 {
			written = w3
		}
		c := strings.LastIndex(tt.in, tt.expanded) + 1
		if tt.expanded == "vfs_read" || tt.expanded == "_read)" {
			c = strings.Index(tt.in, tt.expanded) + 1
		}
		want := strings.LastIndex(written, tt.writtn) + 1
		if tt.writtn == "${FUNC}" {
			want = strings.Index(written, tt.writtn) + 1
		}
		d := e.Fix(aspect.Diagnostics{{Pos: aspect.Position{Filename: "a.klasy", Line: tt.line, Col: c}}})
		if d[0].Pos.Col != want {
			t.Errorf("line %d col %d (%q) maps to col %d, want %d (%q)", tt.line, c, tt.expanded, d[0].Pos.Col, want, tt.writtn)
		}
	}
}

func TestExpandErrors(t *testing.T) {
	src := "<aspect>\n <before>${PID} ${pid} ${1X}</before>\n</aspect>\n"
	_, _, diags := Expand("a.klasy", []byte(src), Set{"PID": "1", "UNUSED": "2"})
	var got []string
	for _, d := range diags {
		got = append(got, d.String())
	}
	want := []string{
		"a.klasy:2:17: ${pid} has no value: give -D pid=VALUE",
		"a.klasy:2:24: ${1X}: a parameter's name is a C identifier, as ${PID}",
		"a.klasy: -D UNUSED: the aspect has no ${UNUSED}",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("diagnostics\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func FuzzExpand(f *testing.F) {
	f.Add([]byte("<aspect>${A} ${B}\n${A}</aspect>"), "x", "yy")
	f.Fuzz(func(t *testing.T, src []byte, a, b string) {
		s := Set{}
		if s.Set("A="+a) != nil || s.Set("B="+b) != nil {
			return
		}
		out, e, diags := Expand("f", src, s)
		if len(diags) > 0 {
			return
		}
		if strings.Count(string(out), "\n") != strings.Count(string(src), "\n") {
			t.Fatalf("lines changed: %q → %q", src, out)
		}
		e.Fix(aspect.Diagnostics{{Pos: aspect.Position{Line: 1, Col: len(out)}}})
	})
}
