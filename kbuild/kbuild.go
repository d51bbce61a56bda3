// Package kbuild builds out-of-tree Linux kernel modules with the
// kernel's own build system, as `make -C KDIR M=DIR modules` does, from
// sources held in an fs.FS: the weaver's generated C, the lab's and the
// plugin's test modules.
//
// A build runs in a directory of its own (a temporary one unless the
// caller names one), so builds against the same kernel tree may run at
// once. A failed build returns a *BuildError that carries the compiler's
// log and the diagnostics parsed out of it, in gcc's file:line:col form;
// files named by a #line directive keep that name, so errors in
// generated C point back at the file it was generated from.
package kbuild

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Options tune a build. The zero value builds quietly, one job at a
// time, in a temporary directory removed afterwards.
type Options struct {
	// CFLAGS are added to every compilation (kbuild's KCFLAGS), e.g.
	// -fplugin=/path/klasy.so or -DNAME=value. A flag may not contain
	// white space.
	CFLAGS []string
	// ExtraSymbols are the Module.symvers of other out-of-tree modules
	// this one calls into (kbuild's KBUILD_EXTRA_SYMBOLS), e.g. the
	// Symvers of an earlier Result. The module then depends on them.
	ExtraSymbols [][]byte
	// ExtraWarnings are kbuild's extra warning groups (its W=): "1",
	// "2", "3", and "e" to make warnings errors, combined as in "1e".
	ExtraWarnings string
	// Jobs is make's -j; 0 means one job.
	Jobs int
	// Dir is the directory to build in, created if missing, which must
	// be empty; it is kept. Empty: a temporary directory, removed
	// afterwards unless Keep is set.
	Dir  string
	Keep bool
}

// Module is one module a build produced.
type Module struct {
	Name  string // as the kernel names it: foo_bar for foo-bar.ko
	Image []byte // the .ko, with its debug information
}

// Result is a successful build.
type Result struct {
	// Modules are the modules built, in kbuild's modules.order.
	Modules []Module
	// Symvers is the build's Module.symvers: the symbols its modules
	// export, for Options.ExtraSymbols of a build that uses them.
	Symvers []byte
	// Log is what make printed: warnings, and kbuild's own notes (such
	// as "Skipping BTF generation" against headers without a vmlinux).
	// Diagnostics are what ParseLog found in it.
	Log         []byte
	Diagnostics []Diagnostic
	// Dir is the build directory when it was kept, else empty.
	Dir string
}

// BuildError is a build that make reported as failed. Its message names
// the first error diagnostic; format it with %+v for the whole log.
type BuildError struct {
	Dir         string // the build directory, if kept
	Err         error  // make's exit status
	Log         []byte // what make and the compiler printed
	Diagnostics []Diagnostic
}

func (e *BuildError) Error() string {
	var errs []Diagnostic
	for _, d := range e.Diagnostics {
		if d.IsError() {
			errs = append(errs, d)
		}
	}
	switch len(errs) {
	case 0:
		// No compiler diagnostic (make itself failed): its last lines say why.
		if len(bytes.TrimSpace(e.Log)) == 0 {
			return fmt.Sprintf("kbuild: %v", e.Err)
		}
		return fmt.Sprintf("kbuild: %v: %s", e.Err, lastLines(e.Log, 3))
	case 1:
		return "kbuild: " + errs[0].String()
	}
	if len(errs) == 2 {
		return fmt.Sprintf("kbuild: %s (and 1 more error)", errs[0])
	}
	return fmt.Sprintf("kbuild: %s (and %d more errors)", errs[0], len(errs)-1)
}

func (e *BuildError) Unwrap() error { return e.Err }

// Format prints the whole log after the message for %+v.
func (e *BuildError) Format(f fmt.State, verb rune) {
	switch {
	case verb == 'v' && f.Flag('+'):
		fmt.Fprintf(f, "%s\n%s", e.Error(), bytes.TrimRight(e.Log, "\n"))
	case verb == 'q':
		fmt.Fprintf(f, "%q", e.Error())
	default:
		fmt.Fprint(f, e.Error())
	}
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "; ")
}

// Build builds the modules whose sources and Kbuild (or Makefile) file
// are at the top of src against the kernel build tree kdir (Debian's
// linux-headers directory, or a configured and built kernel tree), as
// `make -s -C kdir M=dir modules` does. It returns a *BuildError when
// make fails, and ctx's error when ctx ends first (make and the compilers
// it started are killed).
func Build(ctx context.Context, kdir string, src fs.FS, opts Options) (*Result, error) {
	if err := checkTree(kdir); err != nil {
		return nil, err
	}
	if !hasFile(src, "Kbuild") && !hasFile(src, "Makefile") {
		return nil, errors.New("kbuild: the module's sources have no Kbuild or Makefile")
	}
	dir, cleanup, err := workDir(opts)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	if err := os.CopyFS(dir, src); err != nil {
		return nil, fmt.Errorf("kbuild: copying the module's sources to %s: %w", dir, err)
	}
	args := []string{"M=" + dir}
	if len(opts.ExtraSymbols) > 0 {
		var paths []string
		for i, s := range opts.ExtraSymbols {
			p := filepath.Join(dir, fmt.Sprintf(".klasy-extra-%d.symvers", i))
			if err := os.WriteFile(p, s, 0o644); err != nil {
				return nil, fmt.Errorf("kbuild: %w", err)
			}
			paths = append(paths, p)
		}
		args = append(args, "KBUILD_EXTRA_SYMBOLS="+strings.Join(paths, " "))
	}
	// The compilers' temporary files go in the build's directory: a
	// build stopped (its bound, Ctrl-C, kill -9) leaves none behind.
	tmp := filepath.Join(dir, ".klasy-tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return nil, fmt.Errorf("kbuild: %w", err)
	}
	log, diags, err := runMake(ctx, kdir, dir, tmp, opts, append(args, "modules"))
	os.RemoveAll(tmp)
	if err != nil {
		return nil, err
	}
	res := &Result{Log: log, Diagnostics: diags}
	if opts.Dir != "" || opts.Keep {
		res.Dir = dir
	}
	if res.Modules, err = readModules(dir); err != nil {
		return nil, err
	}
	if res.Symvers, err = os.ReadFile(filepath.Join(dir, "Module.symvers")); err != nil {
		return nil, fmt.Errorf("kbuild: %w", err)
	}
	return res, nil
}

// BuildTargets runs make for targets inside the kernel tree kdir itself
// (object files such as net/core/skbuff.o, or bzImage), as
// `make -s -C kdir TARGETS` does. Of opts, only CFLAGS, ExtraWarnings
// and Jobs apply:
// the objects stay in the tree. Result.Modules is empty.
func BuildTargets(ctx context.Context, kdir string, targets []string, opts Options) (*Result, error) {
	if opts.Dir != "" || opts.Keep || len(opts.ExtraSymbols) > 0 {
		return nil, errors.New("kbuild: BuildTargets builds in the kernel tree: Dir, Keep and ExtraSymbols do not apply")
	}
	if len(targets) == 0 {
		return nil, errors.New("kbuild: no targets")
	}
	if err := checkTree(kdir); err != nil {
		return nil, err
	}
	log, diags, err := runMake(ctx, kdir, kdir, "", opts, targets)
	if err != nil {
		return nil, err
	}
	return &Result{Log: log, Diagnostics: diags}, nil
}

func checkTree(kdir string) error {
	if _, err := os.Stat(filepath.Join(kdir, "Makefile")); err != nil {
		return fmt.Errorf("kbuild: %s is not a kernel build tree: %w", kdir, err)
	}
	return nil
}

func hasFile(fsys fs.FS, name string) bool {
	st, err := fs.Stat(fsys, name)
	return err == nil && st.Mode().IsRegular()
}

// workDir returns the directory to build in and what to do with it
// afterwards.
func workDir(opts Options) (string, func(), error) {
	if opts.Dir != "" {
		dir, err := filepath.Abs(opts.Dir)
		if err != nil {
			return "", nil, fmt.Errorf("kbuild: %w", err)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", nil, fmt.Errorf("kbuild: %w", err)
		}
		if ents, err := os.ReadDir(dir); err != nil {
			return "", nil, fmt.Errorf("kbuild: %w", err)
		} else if len(ents) > 0 {
			return "", nil, fmt.Errorf("kbuild: build directory %s is not empty", dir)
		}
		return dir, func() {}, nil
	}
	RemoveStale()
	dir, err := os.MkdirTemp("", tempPrefix)
	if err != nil {
		return "", nil, fmt.Errorf("kbuild: %w", err)
	}
	if err := writeOwner(dir); err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("kbuild: %w", err)
	}
	if opts.Keep {
		// Kept for the caller: no longer a build's, nor stale when we end.
		return dir, func() {
			os.WriteFile(filepath.Join(dir, keptFile), nil, 0o644)
			os.Remove(filepath.Join(dir, ownerFile))
		}, nil
	}
	return dir, func() { os.RemoveAll(dir) }, nil
}

// The environment variables of an enclosing make (`make test` runs go
// test) or of a developer's shell that would change what kbuild does:
// jobserver file descriptors this make does not inherit, another output
// directory.
var dropEnv = []string{"MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES", "KBUILD_OUTPUT", "KCFLAGS", "KBUILD_EXTRA_SYMBOLS"}

// runMake runs make -s -C kdir args, in its own process group so that
// canceling ctx kills the compilers too. workDir is the path stripped
// from the diagnostics' file names; tmp, unless "", is make's TMPDIR.
func runMake(ctx context.Context, kdir, workDir, tmp string, opts Options, args []string) ([]byte, []Diagnostic, error) {
	for _, f := range opts.CFLAGS {
		if f == "" || strings.ContainsAny(f, " \t\n") {
			return nil, nil, fmt.Errorf("kbuild: CFLAGS entry %q: empty or contains white space", f)
		}
	}
	if strings.Trim(opts.ExtraWarnings, "123e") != "" {
		return nil, nil, fmt.Errorf("kbuild: ExtraWarnings %q: want groups 1, 2, 3 and e", opts.ExtraWarnings)
	}
	argv := []string{"-s", "-C", kdir}
	if opts.Jobs > 1 {
		argv = append(argv, "-j"+strconv.Itoa(opts.Jobs))
	}
	if opts.ExtraWarnings != "" {
		argv = append(argv, "W="+opts.ExtraWarnings)
	}
	if len(opts.CFLAGS) > 0 {
		argv = append(argv, "KCFLAGS="+strings.Join(opts.CFLAGS, " "))
	}
	argv = append(argv, args...)
	cmd := exec.CommandContext(ctx, "make", argv...)
	cmd.Dir = workDir
	// ASCII quotes and English messages. Kbuild unexports LC_ALL, so the
	// locale comes from LANG and the other LC_ variables.
	cmd.Env = append(environ(), "LANG=C")
	if tmp != "" {
		cmd.Env = append(cmd.Env, "TMPDIR="+tmp)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// Killed with klasy (kill -9 too): make's compilers then run on in
	// its group until the next build's RemoveStale. The signal goes when
	// the thread that started make ends, so keep to that thread.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	if ctx.Err() != nil {
		if cmd.Process != nil {
			// Make's children share its group; whatever they were doing is moot.
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
		return nil, nil, fmt.Errorf("kbuild: make %s: %w", strings.Join(args, " "), ctx.Err())
	}
	log := out.Bytes()
	diags := ParseLog(log, workDir)
	if err != nil {
		be := &BuildError{Err: fmt.Errorf("make %s: %w", strings.Join(args, " "), err), Log: log, Diagnostics: diags}
		if opts.Dir != "" || opts.Keep {
			be.Dir = workDir
		}
		return nil, nil, be
	}
	return log, diags, nil
}

func environ() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		drop := strings.HasPrefix(k, "LC_") || strings.HasPrefix(k, "LANG")
		for _, d := range dropEnv {
			drop = drop || k == d
		}
		if !drop {
			env = append(env, kv)
		}
	}
	return env
}

// readModules reads the modules kbuild lists in dir/modules.order: paths
// of .ko files in 6.1 (absolute or relative to dir), of .o files in later
// kernels.
func readModules(dir string) ([]Module, error) {
	order, err := os.ReadFile(filepath.Join(dir, "modules.order"))
	if err != nil {
		return nil, fmt.Errorf("kbuild: make succeeded but listed no modules: %w", err)
	}
	var mods []Module
	for _, l := range strings.Split(string(order), "\n") {
		l = strings.TrimSpace(l)
		if l == "" {
			continue
		}
		p := strings.TrimSuffix(strings.TrimSuffix(l, ".o"), ".ko") + ".ko"
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		img, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("kbuild: reading a module make built: %w", err)
		}
		name := strings.ReplaceAll(strings.TrimSuffix(filepath.Base(p), ".ko"), "-", "_")
		mods = append(mods, Module{Name: name, Image: img})
	}
	if len(mods) == 0 {
		return nil, errors.New("kbuild: make succeeded but built no module (does Kbuild set obj-m?)")
	}
	return mods, nil
}
