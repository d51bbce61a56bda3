package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/klasy/klasy/internal/testenv"
)

// klasy check -D: a parameter in a pointcut, and an error after it on
// the same line reported at its column as written, not as expanded.
func TestCheckParams(t *testing.T) {
	const src = "<aspect>\n  <advice>\n    <pointcut>execution(${FUNC}) AND nosuch(x)</pointcut>\n    <before>;</before>\n  </advice>\n</aspect>\n"
	path := writeAspect(t, "p.klasy", src)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"-D", "FUNC=a_function_name_much_longer_than_its_parameter"}, path + ":3:38: unknown pointcut designator nosuch"},
		{nil, path + ":3:25: ${FUNC} has no value: give -D FUNC=VALUE"},
		{[]string{"-D", "FUNC=f", "-D", "PID=1"}, path + ": -D PID: the aspect has no ${PID}"},
	} {
		var out, errb bytes.Buffer
		err := run(&stdio{In: strings.NewReader(""), Out: &out, Err: &errb}, append(append([]string{"check"}, tt.args...), path))
		if err == nil || !strings.Contains(errb.String(), tt.want) {
			t.Errorf("klasy check %s: %v\n%s\nwant a diagnostic starting %q", strings.Join(tt.args, " "), err, errb.String(), tt.want)
		}
	}
	var out, errb bytes.Buffer
	if err := run(&stdio{In: strings.NewReader(""), Out: &out, Err: &errb}, []string{"check", "-D", "X=a<b", path}); err == nil ||
		!strings.Contains(err.Error(), "may not hold <") {
		t.Errorf("klasy check -D X=a<b: %v, want the value refused", err)
	}
}

// klasy list -D on Debian's vmlinux: the pointcut's parameters chose the
// function and the file.
func TestListParams(t *testing.T) {
	if testing.Short() {
		t.Skip("reads Debian's vmlinux")
	}
	vmlinux := testenv.DebianVmlinux(t)
	const src = "<aspect>\n  <advice>\n    <pointcut>execution(${FUNC}) AND within_file(${FILE})</pointcut>\n    <before>STORE_DATA(${VALUE});</before>\n  </advice>\n</aspect>\n"
	path := writeAspect(t, "p.klasy", src)
	var out, errb bytes.Buffer
	err := run(&stdio{In: strings.NewReader(""), Out: &out, Err: &errb}, []string{"list", "--vmlinux", vmlinux, "--json",
		"-D", "FUNC=vfs_read", "-D", "FILE=fs/read_write.c", "-D", "VALUE=current->pid", path})
	if err != nil {
		t.Fatalf("klasy list -D: %v\n%s", err, errb.String())
	}
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var jp struct {
			Function string `json:"function"`
			File     string `json:"file"`
		}
		if err := json.Unmarshal([]byte(line), &jp); err != nil || jp.Function == "" {
			continue
		}
		if jp.Function != "vfs_read" || !strings.HasSuffix(jp.File, "fs/read_write.c") {
			t.Errorf("join point in %s (%s), want vfs_read in fs/read_write.c", jp.Function, jp.File)
		}
		n++
	}
	if n == 0 {
		t.Errorf("no join point of vfs_read listed:\n%s\n%s", out.String(), errb.String())
	}
}
