package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/klasy/klasy/cmd/klasy/internal/tracerun"
	"github.com/klasy/klasy/weaver/records"
)

// Output files (issue 21, "output files"): trace --perfetto PATH writes
// through to what is not a regular file, follows a link to the file it
// names, leaves a user's file alone when there is nothing to write, and
// refuses a directory before reading any record. The devices are reached
// through links in a temporary directory: the code before renamed over
// the path given, /dev/full itself when run as root.

// devLink is a link in a temporary directory to dev.
func devLink(t *testing.T, dev string) string {
	p := filepath.Join(t.TempDir(), "out.json")
	if err := os.Symlink(dev, p); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestTracePerfettoToFull(t *testing.T) {
	net := netRecords(t)
	full := devLink(t, "/dev/full")
	src := &fakeSource{saved: net[:2], batches: [][]records.TraceRecord{net[2:5]}}
	_, stderr, err := runTraceOn(t, src, "--perfetto", full)
	if err == nil || !strings.Contains(err.Error(), "no space left on device") {
		t.Fatalf("trace --perfetto LINK-TO-/dev/full: %v (stderr %q), want no space left on device", err, stderr)
	}
	if to, lerr := os.Readlink(full); lerr != nil || to != "/dev/full" {
		t.Errorf("the link to /dev/full is now %q (%v)", to, lerr)
	}
	// The records read were not written: put back, and the saved ones
	// stay taken, for the next trace.
	if !strings.Contains(err.Error(), "3 records read from the kernel were not written") ||
		!strings.Contains(err.Error(), "saved for the next klasy trace") {
		t.Errorf("error %q, want it to say 3 records were not written and are saved", err)
	}
	if !slices.EqualFunc(src.putBack, net[2:5], sameRecord) || src.dones != 0 {
		t.Errorf("put back %d records, done %d times; want the batch's 3 and the saved ones kept", len(src.putBack), src.dones)
	}
}

func sameRecord(a, b records.TraceRecord) bool {
	return a.TimeNS == b.TimeNS && a.Function == b.Function
}

func TestTracePerfettoToNull(t *testing.T) {
	net := netRecords(t)
	null := devLink(t, "/dev/null")
	src := &fakeSource{batches: [][]records.TraceRecord{net[:3]}}
	if _, stderr, err := runTraceOn(t, src, "--perfetto", null); err != nil {
		t.Fatalf("trace --perfetto LINK-TO-/dev/null: %v\n%s", err, stderr)
	}
	if fi, err := os.Stat(null); err != nil || fi.Mode()&fs.ModeCharDevice == 0 {
		t.Errorf("the link to /dev/null now names %v (%v)", fi.Mode(), err)
	}
}

func TestTracePerfettoToFIFO(t *testing.T) {
	net := netRecords(t)
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	src := &fakeSource{batches: [][]records.TraceRecord{net[:3]}}
	if _, stderr, err := runTraceOn(t, src, "--perfetto", fifo); err != nil {
		t.Fatalf("trace --perfetto FIFO: %v\n%s", err, stderr)
	}
	buf := make([]byte, 1<<16)
	n, _ := r.Read(buf)
	var doc struct{ TraceEvents []json.RawMessage }
	if err := json.Unmarshal(buf[:n], &doc); err != nil || len(doc.TraceEvents) == 0 {
		t.Errorf("the FIFO's reader got %d bytes (%v), want the trace", n, err)
	}
	if fi, err := os.Lstat(fifo); err != nil || fi.Mode()&fs.ModeNamedPipe == 0 {
		t.Errorf("after the trace the FIFO is %v (%v), want still a FIFO", fi.Mode(), err)
	}
}

func TestTracePerfettoThroughLink(t *testing.T) {
	net := netRecords(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "real.json")
	if err := os.WriteFile(file, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.json")
	if err := os.Symlink("real.json", link); err != nil {
		t.Fatal(err)
	}
	if _, stderr, err := runTraceOn(t, &fakeSource{batches: [][]records.TraceRecord{net[:3]}}, "--perfetto", link); err != nil {
		t.Fatalf("trace --perfetto LINK: %v\n%s", err, stderr)
	}
	if to, err := os.Readlink(link); err != nil || to != "real.json" {
		t.Errorf("the link is now %q (%v), want still a link to real.json", to, err)
	}
	if b, _ := os.ReadFile(file); !bytes.Contains(b, []byte("traceEvents")) {
		t.Errorf("the link's file holds %.40q, want the trace", b)
	}
}

func TestTracePerfettoNothingToWrite(t *testing.T) {
	dir := t.TempDir()
	mine := filepath.Join(dir, "mine.json")
	if err := os.WriteFile(mine, []byte("my notes"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, stderr, err := runTraceOn(t, &fakeSource{}, "--perfetto", mine)
	if err != nil {
		t.Fatalf("trace --perfetto FILE with nothing woven: %v", err)
	}
	if b, _ := os.ReadFile(mine); string(b) != "my notes" {
		t.Errorf("with nothing to write the file holds %q, want the user's %q", b, "my notes")
	}
	if !strings.Contains(stderr, "no records to write: "+mine+" left as it was") {
		t.Errorf("stderr %q, want it to say the file is left as it was", stderr)
	}
	none := filepath.Join(dir, "none.json")
	_, stderr, err = runTraceOn(t, &fakeSource{}, "--perfetto", none)
	if _, serr := os.Stat(none); err != nil || !os.IsNotExist(serr) || !strings.Contains(stderr, "not created") {
		t.Errorf("trace --perfetto NEW with nothing to write: %v, file %v, stderr %q; want no file, said", err, serr, stderr)
	}
}

// A --perfetto path that cannot be written fails before a record is
// consumed: the saved ones are not taken, the kernel's not read.
func TestTracePerfettoCheckedFirst(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ path, want string }{
		{dir, "is a directory"},
		{filepath.Join(dir, "missing", "t.json"), "no such file or directory"},
		{filepath.Join(file, "t.json"), "not a directory"},
	} {
		net := netRecords(t)
		src := &fakeSource{saved: net[:1], batches: [][]records.TraceRecord{net[1:3]}}
		_, _, err := runTraceOn(t, src, "--perfetto", tt.path)
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "--perfetto") {
			t.Errorf("trace --perfetto %s: %v, want a --perfetto error with %q", tt.path, err, tt.want)
		}
		if src.takes > 0 || src.drains > 0 {
			t.Errorf("trace --perfetto %s took saved records %d times and read the kernel %d times before failing, want none",
				tt.path, src.takes, src.drains)
		}
	}
	// --domains too.
	ds := fakeDomains(t)
	open := openTraceDomains
	openTraceDomains = func(ctx context.Context, s *stdio, file string) ([]tracerun.Domain, error) { return ds, nil }
	defer func() { openTraceDomains = open }()
	var out, errb bytes.Buffer
	err := run(&stdio{In: strings.NewReader(""), Out: &out, Err: &errb}, []string{"trace", "--domains", "xen.yaml", "--perfetto", dir})
	if err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("trace --domains --perfetto DIR: %v, want is a directory", err)
	}
	for _, d := range ds {
		if f := d.Src.(*fakeSource); f.takes > 0 || f.drains > 0 {
			t.Errorf("trace --domains --perfetto DIR read domain %s before failing", d.Name)
		}
	}
}

// brokenPipe is standard output whose reader goes away (trace --follow |
// head -1) after ok writes.
type brokenPipe struct {
	out *bytes.Buffer
	ok  int
}

func (b *brokenPipe) Write(p []byte) (int, error) {
	if b.ok == 0 {
		return 0, &fs.PathError{Op: "write", Path: "/dev/stdout", Err: syscall.EPIPE}
	}
	b.ok--
	return b.out.Write(p)
}

// Records trace read and could not write are put back (issue 21,
// "readers": a trace --follow | head -1 reader's in-flight batch of 45
// records was gone, not counted).
func TestTraceOutputGoneRecordsPutBack(t *testing.T) {
	net := netRecords(t)
	for _, tt := range []struct {
		name    string
		args    []string
		ok      int // writes that reach the reader
		putBack []records.TraceRecord
		dones   int
		want    string
	}{
		// The saved records and the first batch written, the second not.
		{"follow", []string{"--follow"}, 2, net[5:8], 1, "3 records read from the kernel were not written: writing output: broken pipe; they are saved for the next klasy trace"},
		// Nothing written: the saved records stay, nothing is read.
		{"saved", nil, 0, nil, 0, "writing output: broken pipe"},
		// Without --follow: the saved records written, the read not.
		{"once", nil, 1, net[2:5], 1, "3 records read from the kernel were not written"},
		{"all", nil, 2, nil, 1, ""},
		// A view prints at the end: every record read is put back.
		{"view", []string{"--follow", "--group-by", "1"}, 0, net[2:8], 0, "6 records read from the kernel were not written: writing output: broken pipe"},
		{"json", []string{"--follow", "--json"}, 2, net[5:8], 1, "3 records read from the kernel were not written"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			src := &fakeSource{saved: net[:2], batches: [][]records.TraceRecord{net[2:5], net[5:8]}, interrupt: slices.Contains(tt.args, "--follow")}
			var out bytes.Buffer
			stderr, err := runTraceTo(t, src, &brokenPipe{out: &out, ok: tt.ok}, &out, tt.args...)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("%v\n%s", err, stderr)
				}
			} else if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("trace %s with its reader gone: %v, want %q", strings.Join(tt.args, " "), err, tt.want)
			}
			if !slices.EqualFunc(src.putBack, tt.putBack, sameRecord) {
				t.Errorf("put back %d records, want %d", len(src.putBack), len(tt.putBack))
			}
			if src.dones != tt.dones {
				t.Errorf("the saved records were removed %d times, want %d", src.dones, tt.dones)
			}
		})
	}
}

// trace --domains: the records read from every kernel are put back when
// the export cannot be written, and the saved ones stay taken.
func TestTraceDomainsExportFailsRecordsPutBack(t *testing.T) {
	full := devLink(t, "/dev/full")
	ds := fakeDomains(t)
	open := openTraceDomains
	openTraceDomains = func(ctx context.Context, s *stdio, file string) ([]tracerun.Domain, error) { return ds, nil }
	defer func() { openTraceDomains = open }()
	var out, errb bytes.Buffer
	err := run(&stdio{In: strings.NewReader(""), Out: &out, Err: &errb}, []string{"trace", "--domains", "xen.yaml", "--perfetto", full})
	if err == nil || !strings.Contains(err.Error(), "6 records read from the kernels were not written") ||
		!strings.Contains(err.Error(), "no space left on device") {
		t.Fatalf("trace --domains --perfetto LINK-TO-/dev/full: %v, want 6 records not written, no space left on device", err)
	}
	for _, d := range ds {
		f := d.Src.(*fakeSource)
		if len(f.putBack) != 3 || f.dones != 0 {
			t.Errorf("domain %s: put back %d records, saved removed %d times; want 3 and 0", d.Name, len(f.putBack), f.dones)
		}
	}
}
