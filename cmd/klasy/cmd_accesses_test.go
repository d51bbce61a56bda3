package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/klasy/klasy/cmd/klasy/internal/queryview"
	"github.com/klasy/klasy/debugklasy"
	"github.com/klasy/klasy/internal/testenv"
)

const fixture = "testdata/accesses.c"

// fixtureObject compiles testdata/accesses.c, with the plugin or without.
func fixtureObject(t *testing.T, withPlugin bool) string {
	t.Helper()
	args := []string{"-O2", "-g", "-c", "-o", filepath.Join(t.TempDir(), "accesses.o"), fixture}
	if withPlugin {
		so, err := filepath.Abs("../../gcc-patches/klasy.so")
		if err != nil {
			t.Fatal(err)
		}
		if _, err = os.Stat(so); err != nil {
			err = fmt.Errorf("gcc-patches/klasy.so not built: run make plugin")
		}
		testenv.Need(t, "plugin", err)
		args = append(args, "-fplugin="+so)
	}
	testenv.GCC(t, args...)
	return args[4]
}

func runAccessesCmd(args ...string) (string, string, error) {
	var out, errb bytes.Buffer
	err := run(&stdio{Out: &out, Err: &errb}, append([]string{"accesses"}, args...))
	return out.String(), errb.String(), err
}

func TestAccessesJSON(t *testing.T) {
	obj := fixtureObject(t, true)
	out, _, err := runAccessesCmd("--json", obj, "inner.f%")
	if err != nil {
		t.Fatal(err)
	}
	var recs []map[string]any
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("not one JSON object per line: %q: %v", sc.Text(), err)
		}
		recs = append(recs, m)
	}
	if len(recs) < 5 {
		t.Fatalf("%d records for inner.f%%, want at least 5:\n%s", len(recs), out)
	}
	for _, key := range []string{"struct", "member", "mode", "file", "line", "function", "base", "base_kind"} {
		if _, ok := recs[0][key]; !ok {
			t.Errorf("JSON lacks %q: %v", key, recs[0])
		}
	}
	var macro, multi map[string]any
	for _, r := range recs {
		switch r["function"] {
		case "macro_hidden":
			macro = r
		case "multi_line":
			multi = r
		}
	}
	if macro == nil || !strings.Contains(fmt.Sprint(macro["spelling"]), "accesses.h:") || !strings.HasSuffix(fmt.Sprint(macro["file"]), "accesses.c") {
		t.Errorf("macro-hidden access: want the hook in accesses.c and the spelling in accesses.h: %v", macro)
	}
	if macro != nil && (macro["base"] != "p->thread" || macro["base_kind"] != "param" || macro["mode"] != "read") {
		t.Errorf("macro-hidden access: %v", macro)
	}
	if multi == nil || multi["stmt_line"] == nil {
		t.Errorf("multi-line condition without stmt_line: %v", multi)
	}
}

func TestAccessesText(t *testing.T) {
	obj := fixtureObject(t, true)
	out, errOut, err := runAccessesCmd(obj, "task.count")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out, "LOCATION") || !strings.Contains(out, "call get_task()") || !strings.Contains(out, "task.count  rw") {
		t.Errorf("text output:\n%s", out)
	}
	if !strings.Contains(errOut, "match task.count") {
		t.Errorf("no summary on stderr: %q", errOut)
	}
}

// TestAccessesInferredInObject: an object or module built without the
// plugin has its accesses inferred, each at its section and offset (its
// code has no address until it is loaded).
func TestAccessesInferredInObject(t *testing.T) {
	plain := fixtureObject(t, false)
	out, errOut, err := runAccessesCmd(plain, "task.count")
	if err != nil {
		t.Fatalf("object without the plugin: %v\n%s", err, errOut)
	}
	if !regexp.MustCompile(`accesses\.c:\d+ +writes +task\.count +rw +\.text\+0x[0-9a-f]+ +var p`).MatchString(out) {
		t.Errorf("object without the plugin: want the rw of task.count in writes at .text+OFFSET:\n%s", out)
	}
	if !strings.Contains(errOut, "inferred") {
		t.Errorf("stderr does not say the accesses were inferred: %q", errOut)
	}
}

// TestAccessesFlagAnywhere: like klasy lines and perf, --json may follow
// the arguments.
func TestAccessesFlagAnywhere(t *testing.T) {
	obj := fixtureObject(t, true)
	before, _, err := runAccessesCmd("--json", obj, "task.count")
	if err != nil {
		t.Fatal(err)
	}
	after, _, err := runAccessesCmd(obj, "task.count", "--json")
	if err != nil {
		t.Fatalf("--json after the arguments: %v", err)
	}
	if after != before {
		t.Errorf("--json after the arguments printed\n%s\nwant\n%s", after, before)
	}
	if _, _, err := runAccessesCmd(obj, "--", "task.count", "--json"); err == nil || !strings.Contains(err.Error(), "got 3") {
		t.Errorf("--json after --: %v, want it taken as a third argument", err)
	}
	_, _, err = runAccessesCmd(obj, "task.count", "extra")
	if err == nil || !strings.Contains(err.Error(), "got 3") {
		t.Errorf("three arguments: %v", err)
	}
}

func TestAccessesErrors(t *testing.T) {
	obj := fixtureObject(t, true)
	b, err := os.ReadFile(obj)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(b, []byte("KLSY\x01\x00"))
	if i < 0 {
		t.Fatal("no unit header in the object")
	}
	b[i+4] = 2
	newer := filepath.Join(t.TempDir(), "newer.o")
	if err := os.WriteFile(newer, b, 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err = runAccessesCmd(newer, "task.count")
	if err == nil || !strings.Contains(err.Error(), "version 2") || !strings.Contains(err.Error(), "version 1") {
		t.Errorf("newer format: %v", err)
	}

	missing := filepath.Join(t.TempDir(), "vmlinux")
	_, _, err = runAccessesCmd(missing, "task.count")
	if err == nil || !strings.Contains(err.Error(), "no such file") || strings.Count(err.Error(), missing) != 1 {
		t.Errorf("missing binary: %v, want the path named once", err)
	}

	_, _, err = runAccessesCmd(fixture, "task.count")
	if err == nil || !strings.Contains(err.Error(), "not an ELF object") {
		t.Errorf("C source as binary: %v", err)
	}

	_, _, err = runAccessesCmd(obj, "task")
	if err == nil || !strings.Contains(err.Error(), "STRUCT.MEMBER") || !strings.Contains(err.Error(), "klasy help accesses") {
		t.Errorf("bad pattern: %v", err)
	}
	_, _, err = runAccessesCmd(obj)
	if err == nil || !strings.Contains(err.Error(), "want BINARY") {
		t.Errorf("missing arguments: %v", err)
	}
	_, errOut, err := runAccessesCmd(obj, "nosuch.member")
	var ee exitError
	if !errors.As(err, &ee) || ee.Code != 1 || !strings.Contains(errOut, "no access matches nosuch.member") {
		t.Errorf("no match: err=%v stderr=%q", err, errOut)
	}
}

// TestAccessesJSONUnknownOffset: a member after a variable-length array has
// no constant offset; --json must not print it as offset 0.
func TestAccessesJSONUnknownOffset(t *testing.T) {
	for _, tt := range []struct {
		a    debugklasy.Access
		want string
	}{
		{debugklasy.Access{Member: "after", NoOffset: true, BitSize: 32}, `"offset_unknown":true,"bit_size":32}`},
		{debugklasy.Access{Member: "len", BitSize: 32}, `"bit_offset":0,"bit_size":32}`},
	} {
		b, err := json.Marshal(queryview.NewAccessJSON(&tt.a))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(string(b), tt.want) {
			t.Errorf("%s: %s, want it to end in %s", tt.a.Member, b, tt.want)
		}
	}
}

// TestAccessesInferred: on Debian's vmlinux, built without the plugin,
// klasy accesses lists the accesses inferred from its DWARF and code: an
// instruction each (gdb's info line of the same address is the line
// printed), and says they are inferred.
func TestAccessesInferred(t *testing.T) {
	vmlinux := testenv.DebianVmlinux(t)
	testenv.Need(t, "debian-kernel", nil)
	out, errOut, err := runAccessesCmd("--json", vmlinux, "sched_info.last_arrival")
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	if !strings.Contains(errOut, "inferred from DWARF") {
		t.Errorf("stderr does not say the accesses are inferred: %q", errOut)
	}
	var writes, reads int
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var a struct {
			Struct, Member, Mode, File, Function, InlinedIn, PC, Source string
			Line                                                        int
		}
		if err := json.Unmarshal([]byte(line), &a); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		if a.Struct != "sched_info" || a.Member != "last_arrival" || a.Source != "inferred" || a.File == "" || a.Line == 0 || !strings.HasPrefix(a.PC, "0xffffffff8") {
			t.Errorf("access %+v", a)
		}
		switch a.Mode {
		case "write":
			writes++
		case "read":
			reads++
		}
	}
	// sched_info_arrive stamps it, sched_info_depart reads it (both
	// inlined in __schedule).
	if writes == 0 || reads == 0 {
		t.Errorf("%d writes and %d reads of last_arrival, want both:\n%s", writes, reads, out)
	}
}
