package runtime_test

// Parts of the runtime that only the kernel runs, in user space: the
// functions of klasy_core.c and klasy_agg.c under test are taken out of
// the embedded source by name (cPart) and compiled with
// testdata/unit/kern_user.h standing in for the kernel, into
// core_harness.c and agg_harness.c, which run scripts of operations
// (documented at their top) and check what the functions do.

import (
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/klasy/klasy/internal/testenv"
	"github.com/klasy/klasy/weaver/runtime"
)

// cPart is the definition of name in the C source src: a function (its
// whole body), a struct, a #define or a file-scope static variable; ""
// if src has none.
func cPart(src, name string) string {
	q := regexp.QuoteMeta(name)
	for _, re := range []string{
		`(?ms)^[a-z][^\n;]*[ *]` + q + `\([^;{]*\)\n\{\n.*?^\}\n`,      // function
		`(?ms)^struct ` + q + ` \{\n.*?^\};\n`,                         // struct
		`(?m)^#define ` + q + `\b.*\n`,                                 // #define
		`(?m)^static [^(\n]*[ *]` + q + `(\[[^]]*\])?( = [^;]*)?;.*\n`, // variable
		`(?m)^static DEFINE_MUTEX\(` + q + `\);\n`,
	} {
		if m := regexp.MustCompile(re).FindString(src); m != "" {
			return m
		}
	}
	return ""
}

// unitSource reads the runtime's file name (src, when not nil, instead)
// and returns the parts named, in order; a name it lacks is left out.
func unitSource(t testing.TB, name string, src []byte, parts ...string) string {
	t.Helper()
	if src == nil {
		var err error
		if src, err = fs.ReadFile(runtime.Sources, name); err != nil {
			t.Fatal(err)
		}
	}
	var b strings.Builder
	for _, p := range parts {
		if c := cPart(string(src), p); c != "" {
			fmt.Fprintf(&b, "/* %s: %s */\n%s\n", name, p, c)
		}
	}
	return b.String()
}

// unitHarness compiles testdata/unit/HARNESS.c with extract as the
// file it includes (NAME_extract.c), under ASan and UBSan.
func unitHarness(t testing.TB, harness, extract string) string {
	t.Helper()
	_, err := exec.LookPath("gcc")
	testenv.Need(t, "gcc", err)
	key := fmt.Sprintf("%s-%x", harness, sha256.Sum256([]byte(extract)))
	harnessMu.Lock()
	defer harnessMu.Unlock()
	if p, ok := harnessBuilds[key]; ok {
		return p
	}
	dir := tempDir(t, "unit-"+key[:24])
	name := strings.TrimSuffix(harness, "_harness") + "_extract.c"
	if err := os.WriteFile(filepath.Join(dir, name), []byte(extract), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, harness)
	args := []string{"-std=gnu11", "-g", "-O1", "-Wall", "-Wextra", "-Werror", "-Wno-unused-parameter",
		"-Wno-unused-function", "-Wno-sign-compare", "-fsanitize=address,undefined", "-fno-sanitize-recover=all",
		"-I" + dir, "-Itestdata/unit", "-o", bin, filepath.Join("testdata/unit", harness+".c")}
	if out, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
		t.Fatalf("gcc %s: %v\n%s\n%s:\n%s", strings.Join(args, " "), err, out, name, extract)
	}
	harnessBuilds[key] = bin
	return bin
}

// coreParts are what core_harness.c runs of klasy_core.c.
var coreParts = []string{
	"klasy_head", "klasy_rb", "klasy_lost", "klasy_reader_mutex", "klasy_bounce", "klasy_pending",
	"KLASY_BOUNCE_SIZE", "klasy_heads", "klasy_record_size", "klasy_check_replace", "klasy_emit",
	"klasy_peek", "klasy_fill", "klasy_pending_fit", "klasy_copy_out", "records_read",
}

func coreHarness(t testing.TB, core []byte) string {
	t.Helper()
	x := unitSource(t, runtime.Header, nil, "KLASY_MAX_VALUES", "klasy_record", "KLASY_RECORD_MAX", "klasy_hit") +
		unitSource(t, "klasy_core.c", core, coreParts...)
	return unitHarness(t, "core_harness", x)
}

func runUnit(t *testing.T, bin string, tests []struct{ name, script string }) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// pr_err writes to stderr, before the verdict.
			out, err := runHarness(t, bin, tt.script)
			if err != nil || !regexp.MustCompile(`(^|\n)ok \d+ lines\n$`).MatchString(out) {
				t.Errorf("%v\n%s\nscript:\n%s", err, out, tt.script)
			}
		})
	}
}

// A record of one value is 56 bytes.
const rec1 = 56

// TestRecordsInUserSpace: what klasy_emit writes and records_read
// returns, and the check of a replacement's kprobe.
func TestRecordsInUserSpace(t *testing.T) {
	bin := coreHarness(t, nil)
	runUnit(t, bin, []struct{ name, script string }{
		{"records come oldest first across CPUs", lines(
			"cpu 0", "emit 1", "cpu 1", "emit 2", "cpu 0", "emit 3", "open",
			fmt.Sprintf("read 4096 %d", 3*rec1), "got 1 2 3", "read 4096 0", "lost 0 0")},
		{"a read returns whole records only", lines(
			"emit 1", "emit 2", "open",
			fmt.Sprintf("read %d %d", rec1+8, rec1), "got 1",
			"read 8 -22",
			fmt.Sprintf("read 4096 %d", rec1), "got 2")},
		{"records stamped after the open wait for the next open", lines(
			"emit 1", "open", "emit 2",
			fmt.Sprintf("read 4096 %d", rec1), "got 1", "read 4096 0",
			"open", fmt.Sprintf("read 4096 %d", rec1), "got 2")},
		// Issue 20 #5: a record of an interrupt that comes between the
		// stamp and the reservation took the place before with a later
		// stamp.
		{"an interrupt's record does not come first with a later stamp", lines(
			"irq 2", "emit 1", "irq 4", "emit 3", "open",
			fmt.Sprintf("read 4096 %d", 4*rec1), "got 1 2 3 4")},
		// Issue 20 #11: records consumed from the ring buffer and then
		// not copied (the reader's buffer faults) were lost, uncounted.
		{"a read whose buffer faults loses no record", lines(
			"emit 1", "emit 2", "emit 3", "open",
			"read 4096 -14 fault", "got", "lost 0",
			fmt.Sprintf("read %d %d", rec1+8, rec1), "got 1",
			"read 8 -22", "read 4096 -14 fault",
			fmt.Sprintf("read 4096 %d", 2*rec1), "got 2 3", "read 4096 0")},
		{"records after a fault come after those it kept", lines(
			"emit 1", "emit 2", "open", "read 4096 -14 fault",
			"emit 3", "open", fmt.Sprintf("read 4096 %d", 3*rec1), "got 1 2 3")},
		// Issue 20 #10: kprobes keeps an aggregate until its last kprobe
		// goes; one left with only our replacement is not another kprobe.
		{"a replacement is refused only beside another kprobe", lines(
			"replace - 0", "replace a 0", "replace ao 0",
			"replace af -98", "replace aof -98")},
	})
}

// TestRecordsHarnessChecks: a script whose check is wrong fails, naming
// the line, so the scripts above cannot pass by accident.
func TestRecordsHarnessChecks(t *testing.T) {
	bin := coreHarness(t, nil)
	for _, tt := range []struct{ script, want string }{
		{lines("emit 1", "open", "read 4096 56", "got 2"), "line 4: record 0 holds 1, want 2"},
		{lines("emit 1", "open", "read 4096 0"), "line 3: read 4096 returned 56, want 0"},
		{lines("replace af 0"), "line 1: replace af: -98, want 0"},
		{lines("frob"), "line 1: unknown operation frob"},
	} {
		out, err := runHarness(t, bin, tt.script)
		if err == nil || !strings.Contains(out, tt.want) {
			t.Errorf("script\n%sgave %v: %q, want a failure with %q", tt.script, err, out, tt.want)
		}
	}
}
