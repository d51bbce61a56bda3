package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/klasy/klasy/lab"
	"github.com/klasy/klasy/lab/labboot"
)

// coverOut is klasy cover --json as a test reads it.
type coverOut struct {
	Hooks      int   `json:"hooks"`
	RegisterUS int64 `json:"register_us"`
	Functions  []struct {
		Function        string  `json:"function"`
		Calls           *uint64 `json:"calls"`
		CallsDetermined bool    `json:"calls_determined"`
		Inconsistent    int     `json:"inconsistent"`
		Blocks          []struct {
			Count *uint64 `json:"count"`
		} `json:"blocks"`
		Arcs []struct {
			From       string  `json:"from"`
			To         string  `json:"to"`
			Count      *uint64 `json:"count"`
			Determined bool    `json:"determined"`
		} `json:"arcs"`
	} `json:"functions"`
	Files []struct {
		File   string `json:"file"`
		Source string `json:"source"`
		Lines  []struct {
			Line  int     `json:"line"`
			Count *uint64 `json:"count"`
		} `json:"lines"`
	} `json:"files"`
}

// gcovLine matches a line of klasy cover's annotated source.
var gcovLine = regexp.MustCompile(`^ *([^:]+):\s*(\d+):(.*)$`)

// syncBuffer is a buffer two goroutines may use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A live coverage view of a filesystem path in a real kernel, through
// klasy cover as a user runs it: do_mkdirat's lines counted exactly
// while klasy_prog makes one directory N times (the first call makes
// it, the others fail with EEXIST), the lines never run marked, its arcs
// derived from the block counts; then every function of fs/namei.c while
// ls walks a tree, with the time its hundreds of kprobes take to
// register; then Ctrl-C while a command runs. After each, the kernel's
// modules and kprobes are as before.
func TestCoverInLab(t *testing.T) {
	if testing.Short() {
		t.Skip("boots a lab")
	}
	const prog = "/tmp/klasy_prog"
	l := labboot.Boot(t, lab.Config{Name: labboot.Name("cover"), Kernel: lab.Debian})
	labboot.Install(t, l, prog, labboot.StaticProgram(t, "../../weaver/testdata/prog/klasy_prog.c"))
	klasy := func(args ...string) (string, string) {
		t.Helper()
		var out, errb bytes.Buffer
		if err := run(&stdio{In: strings.NewReader(""), Out: &out, Err: &errb}, args); err != nil {
			t.Fatalf("klasy %s: %v\n%s", strings.Join(args, " "), err, errb.String())
		}
		return out.String(), errb.String()
	}
	kernelState := func() string {
		t.Helper()
		state, _ := klasy("lab", "exec", l.Name(), "--", "sh", "-c", labboot.KernelState)
		return state
	}
	before := kernelState()
	asBefore := func(what string) {
		t.Helper()
		if after := kernelState(); after != before {
			t.Errorf("after %s, modules and kprobes:\n%s\nbefore:\n%s", what, after, before)
		}
	}

	// do_mkdirat, 7 times, in gcov's layout.
	const dir = "/tmp/klasy-cover-dir"
	text, _ := klasy("cover", "--lab", l.Name(), "do_mkdirat", "--", prog, "mkdir", dir, "7")
	asBefore("klasy cover do_mkdirat")
	// The lines of fs/namei.c printed, from do_mkdirat's first on.
	type gcov struct {
		n           int
		count, text string
	}
	var rows []gcov
	in := false
	for _, line := range strings.Split(text, "\n") {
		m := gcovLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		n, _ := strconv.Atoi(m[2])
		if n == 0 {
			if strings.HasPrefix(m[3], "Source:") {
				in = m[3] == "Source:fs/namei.c"
			}
			continue
		}
		if strings.HasPrefix(m[3], "int do_mkdirat(") {
			rows = nil
		}
		if in {
			rows = append(rows, gcov{n, m[1], strings.TrimSpace(m[3])})
		}
	}
	if len(rows) == 0 || !strings.HasPrefix(rows[0].text, "int do_mkdirat(") {
		t.Fatalf("klasy cover printed no line of do_mkdirat in fs/namei.c:\n%s", text)
	}
	find := func(stmt string) gcov {
		t.Helper()
		i := slices.IndexFunc(rows, func(r gcov) bool { return r.text == stmt })
		if i < 0 {
			t.Fatalf("no %q in do_mkdirat as printed", stmt)
		}
		return rows[i]
	}
	for stmt, want := range map[string][]string{
		"dentry = filename_create(dfd, name, &path, lookup_flags);": {"7"},
		"if (IS_ERR(dentry))":                        {"7"},
		"error = security_path_mkdir(&path, dentry,": {"1", "1*"}, // the one mkdir that made it
		"done_path_create(&path, dentry);":           {"1"},
		"lookup_flags |= LOOKUP_REVAL;":              {"#####"}, // never run
		"putname(name);":                             {"7"},
		"goto out_putname;":                          {"-"}, // no code of its own
	} {
		if got := find(stmt).count; !slices.Contains(want, got) {
			t.Errorf("do_mkdirat's %q counted %q, want %q", stmt, got, want)
		}
	}
	if !strings.Contains(text, "do_mkdirat (fs/namei.c:") || !strings.Contains(text, "called 7 times") {
		t.Errorf("klasy cover printed no arcs of do_mkdirat called 7 times:\n%s", text)
	}

	// Again, 4 times: all fail now. The JSON has the same data.
	out, _ := klasy("cover", "--lab", l.Name(), "--json", "do_mkdirat", "--", prog, "mkdir", dir, "4")
	asBefore("klasy cover --json do_mkdirat")
	var c coverOut
	if err := json.Unmarshal([]byte(out), &c); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(c.Functions) != 1 || c.Functions[0].Function != "do_mkdirat" {
		t.Fatalf("functions %+v, want do_mkdirat", c.Functions)
	}
	fn := c.Functions[0]
	if fn.Calls == nil || *fn.Calls != 4 || !fn.CallsDetermined || fn.Inconsistent != 0 || c.Hooks != len(fn.Blocks) {
		t.Errorf("do_mkdirat: calls %v (determined %v), %d inconsistent sums, %d hooks for %d blocks; want 4 calls, sums that add up, a hook per block",
			fn.Calls, fn.CallsDetermined, fn.Inconsistent, c.Hooks, len(fn.Blocks))
	}
	var exits uint64
	for _, a := range fn.Arcs {
		if !a.Determined {
			t.Errorf("arc %s -> %s not determined: do_mkdirat has no loop the block counts leave open", a.From, a.To)
		}
		if a.To == "exit" && a.Count != nil {
			exits += *a.Count
		}
	}
	if exits != 4 {
		t.Errorf("do_mkdirat left %d times, want 4", exits)
	}
	lineCount := map[int]*uint64{}
	for _, f := range c.Files {
		if f.File == "fs/namei.c" {
			if !strings.HasSuffix(f.Source, "/fs/namei.c") {
				t.Errorf("source of fs/namei.c read from %q", f.Source)
			}
			for _, l := range f.Lines {
				lineCount[l.Line] = l.Count
			}
		}
	}
	for stmt, want := range map[string]uint64{
		"dentry = filename_create(dfd, name, &path, lookup_flags);": 4,
		"error = security_path_mkdir(&path, dentry,":                0,
		"lookup_flags |= LOOKUP_REVAL;":                             0,
		"putname(name);":                                            4,
	} {
		if n := find(stmt).n; lineCount[n] == nil || *lineCount[n] != want {
			t.Errorf("--json: line %d (%s) counted %v, want %d", n, stmt, lineCount[n], want)
		}
	}

	// Every function of fs/namei.c while ls walks a tree: hundreds of
	// hooks, registered one by one.
	start := time.Now()
	out, errs := klasy("cover", "--lab", l.Name(), "--json", "fs/namei.c", "--", "ls", "-lR", "/etc", "/bin")
	took := time.Since(start)
	asBefore("klasy cover fs/namei.c")
	c = coverOut{}
	if err := json.Unmarshal([]byte(out), &c); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	t.Logf("fs/namei.c: %d hooks on %d functions registered in %.2f s (%.2f ms per hook); the whole cover took %.1f s\n%s",
		c.Hooks, len(c.Functions), float64(c.RegisterUS)/1e6, float64(c.RegisterUS)/1e3/float64(c.Hooks), took.Seconds(), errs)
	if c.Hooks < 1000 || len(c.Functions) < 100 {
		t.Errorf("fs/namei.c: %d hooks on %d functions, want its more than 100 functions' blocks", c.Hooks, len(c.Functions))
	}
	called := map[string]uint64{}
	for _, f := range c.Functions {
		if f.Calls != nil {
			called[f.Function] = *f.Calls
		}
	}
	for _, f := range []string{"path_openat", "link_path_walk", "filename_lookup"} {
		if called[f] == 0 {
			t.Errorf("%s not called while ls -lR ran (calls %v)", f, called[f])
		}
	}
	if called["do_mkdirat"] != 0 || called["vfs_rename"] != 0 {
		t.Errorf("ls made or renamed a directory: do_mkdirat %d, vfs_rename %d", called["do_mkdirat"], called["vfs_rename"])
	}
	run0, ran := 0, 0
	for _, f := range c.Files {
		if f.File != "fs/namei.c" {
			continue
		}
		for _, l := range f.Lines {
			switch {
			case l.Count == nil:
			case *l.Count == 0:
				run0++
			default:
				ran++
			}
		}
	}
	if run0 < 100 || ran < 100 {
		t.Errorf("fs/namei.c: %d lines run, %d never: want many of both", ran, run0)
	}

	// Ctrl-C while the command runs: the hooks go, the counts so far
	// are printed, and klasy exits as interrupted.
	var sout bytes.Buffer
	var serr syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(&stdio{In: strings.NewReader(""), Out: &sout, Err: &serr}, []string{"cover", "--lab", l.Name(), "link_path_walk", "--", "sleep", "60"})
	}()
	deadline := time.Now().Add(2 * time.Minute)
	for !strings.Contains(serr.String(), "running sleep 60") {
		if time.Now().After(deadline) {
			t.Fatalf("klasy cover did not start the command:\n%s", serr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	syscall.Kill(syscall.Getpid(), syscall.SIGINT)
	var err error
	select {
	case err = <-done:
	case <-time.After(time.Minute):
		t.Fatal("Ctrl-C did not end klasy cover")
	}
	var ee exitError
	if !errors.As(err, &ee) || ee.Code != 130 {
		t.Errorf("klasy cover after Ctrl-C: %v, want exit status 130", err)
	}
	if !strings.Contains(sout.String(), "link_path_walk (fs/namei.c:") || !strings.Contains(serr.String(), "interrupted") {
		t.Errorf("after Ctrl-C, klasy cover printed\n%s\n%s", sout.String(), serr.String())
	}
	asBefore("Ctrl-C in klasy cover")
}
