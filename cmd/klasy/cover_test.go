package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/klasy/klasy/weaver/cover"
)

func TestParseCoverSpec(t *testing.T) {
	for _, tt := range []struct{ in, fn, file, err string }{
		{"path_openat", "path_openat", "", ""},
		{"link_%", "link_%", "", ""},
		{"fs/namei.c", "", "fs/namei.c", ""},
		{"namei.c", "", "namei.c", ""},
		{"include/linux/fs.h", "", "include/linux/fs.h", ""},
		{"", "", "", "no function or file"},
		{"a b", "", "", "is not a function name"},
		{"fs/na mei.c", "", "", "is not a file name"},
		{"f</pointcut>", "", "", "is not a file name"},
		{"f<x>", "", "", "is not a function name"},
	} {
		got, err := cover.ParseCoverSpec(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%q: %v, want an error with %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || got.Func != tt.fn || got.File != tt.file {
			t.Errorf("%q: %+v, %v", tt.in, got, err)
		}
	}
}

// TestCoverUsage: bad command lines fail before any kernel is touched.
func TestCoverUsage(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"cover"}, "want a FUNC or FILE to cover"},
		{[]string{"cover", "--json"}, "want a FUNC or FILE to cover"},
		{[]string{"cover", "--for", "1s", "f", "--", "ls"}, "either --for DURATION or -- CMD"},
		{[]string{"cover", "--for", "-1s", "f"}, "positive duration"},
		{[]string{"cover", "--for", "0", "f"}, "positive duration"},
		{[]string{"cover", "f(x)"}, "is not a function name"},
	} {
		var out, errb bytes.Buffer
		err := run(&stdio{In: strings.NewReader(""), Out: &out, Err: &errb}, tt.args)
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "klasy help cover") {
			t.Errorf("klasy %s: %v, want a usage error with %q", strings.Join(tt.args, " "), err, tt.want)
		}
	}
}
