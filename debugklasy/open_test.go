package debugklasy

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/klasy/klasy/dwarfmap/elfimage"
	"github.com/klasy/klasy/internal/boundedread"
	"github.com/klasy/klasy/internal/testenv"
	"github.com/klasy/klasy/pattern"
)

// TestOpenErrors: what is wrong with the file is said as the other
// commands say it, naming the file; a FIFO is refused, not waited on.
func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	self, err := os.Executable() // an ELF file without .debug_klasy
	if err != nil {
		t.Fatal(err)
	}
	elfData, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	notFile := errors.New("a *boundedread.NotFileError")
	plain := write("plain", elfData)
	for _, c := range []struct {
		path string
		is   error
		want string
	}{
		{write("truncated", elfData[:len(elfData)/2]), elfimage.ErrTruncated, "truncated: reading ELF headers: file is truncated"},
		{write("header", elfData[:40]), elfimage.ErrTruncated, "header: reading ELF headers: file is truncated"},
		{write("notelf", []byte("#!/bin/sh\n")), nil, "notelf is not an ELF object"},
		{plain, ErrNoSection, plain + ": no .debug_klasy section"},
		{dir, notFile, dir + ": a directory, not a regular file"},
		{fifo, notFile, fifo + ": a FIFO, not a regular file"},
		{filepath.Join(dir, "missing"), os.ErrNotExist, "open " + filepath.Join(dir, "missing") + ": no such file or directory"},
	} {
		done := make(chan error)
		go func() {
			_, err := Open(c.path)
			done <- err
		}()
		select {
		case err = <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("Open(%s) blocks", c.path)
		}
		var nf *boundedread.NotFileError
		switch {
		case err == nil || !strings.Contains(err.Error(), c.want):
			t.Errorf("Open(%s) = %v, want %q", filepath.Base(c.path), err, c.want)
		case c.is == notFile && !errors.As(err, &nf), c.is != nil && c.is != notFile && !errors.Is(err, c.is):
			t.Errorf("Open(%s) = %v, want %v", filepath.Base(c.path), err, c.is)
		}
	}
}

// TestOpenSection reads a .debug_klasy section that objcopy added.
func TestOpenSection(t *testing.T) {
	if _, err := exec.LookPath("objcopy"); err != nil {
		testenv.Need(t, "binutils", fmt.Errorf("objcopy not found: apt install binutils"))
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	sec := filepath.Join(dir, "section")
	if err := os.WriteFile(sec, sample("net/core/skbuff.c"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "with-section")
	if b, err := exec.Command("objcopy", "--add-section", SectionName+"="+sec, self, out).CombinedOutput(); err != nil {
		t.Fatalf("objcopy: %v\n%s", err, b)
	}
	// Two units: the header inline function's record is in both.
	both := append(sample("net/core/skbuff.c"), sample("net/core/dev.c")...)
	if err := os.WriteFile(sec, both, 0o644); err != nil {
		t.Fatal(err)
	}
	out2 := filepath.Join(dir, "with-two")
	if b, err := exec.Command("objcopy", "--add-section", SectionName+"="+sec, self, out2).CombinedOutput(); err != nil {
		t.Fatalf("objcopy: %v\n%s", err, b)
	}
	all, err := Open(out2)
	if err != nil || all.Units != 2 || len(all.Accesses) != 5 {
		t.Fatalf("Open: %+v, %v", all, err)
	}
	// OpenSelect decodes only what a pattern selects, and selects what
	// Query does on the whole table.
	for _, pat := range []string{"sk_buff.len", "%.%", "task.a%", "%.k", "nosuch.x"} {
		p := pattern.MustCompileMember(pat, pattern.Pointcut)
		sel, err := OpenSelect(out2, p)
		if err != nil {
			t.Fatalf("OpenSelect(%s): %v", pat, err)
		}
		if want := all.Query(p); !slices.Equal(sel.Accesses, want) || sel.Units != 2 {
			t.Errorf("OpenSelect(%s) = %d accesses in %d units, Query on the table %d", pat, len(sel.Accesses), sel.Units, len(want))
		}
	}
	if _, err := OpenSelect(filepath.Join(dir, "section"), pattern.MustCompileMember("a.b", pattern.Pointcut)); err == nil {
		t.Error("OpenSelect of a file that is not ELF succeeded")
	}
}
