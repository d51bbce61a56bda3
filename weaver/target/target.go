package target

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/klasy/klasy/agent"
	"github.com/klasy/klasy/agent/wire"
	"github.com/klasy/klasy/lab"
)

// Target is a running kernel klasy weaves into: this machine's, or a
// lab's through its agent. Everything the weaver does to a kernel goes
// through it.
type Target interface {
	// Name says which kernel, for messages: "lab demo", "this machine".
	Name() string
	// Image is the kernel's vmlinux with DWARF; Headers its kbuild tree.
	Image() string
	Headers() string
	ReadFile(ctx context.Context, path string) ([]byte, error)
	// Stream reads path until end of file, one read(2) at a time.
	Stream(ctx context.Context, path string, fn func([]byte) error) error
	LoadModule(ctx context.Context, ko []byte, params string) error
	UnloadModule(ctx context.Context, name string) error
	Modules(ctx context.Context) ([]wire.Module, error)
	// KernelLog returns the kernel's recent messages (dmesg), to explain
	// a module that failed to load.
	KernelLog(ctx context.Context) ([]byte, error)
	Close() error
}

// Clocked is a Target whose CLOCK_MONOTONIC, the clock records are
// stamped with, klasy can read: klasy trace --domains maps each domain's
// records to the host's time with it.
type Clocked interface {
	// Clock reads the target's CLOCK_MONOTONIC in nanoseconds.
	Clock(ctx context.Context) (int64, error)
}

// TargetOptions choose a target: a lab by name, else this machine, with
// the image and headers found by convention unless given.
type TargetOptions struct {
	Lab     string
	Vmlinux string
	Headers string
	// Modules are modules built with the klasy plugin (.ko files), loaded
	// in the target kernel, whose access join points are woven too.
	Modules []string
}

// OpenTarget opens the target opt names.
func OpenTarget(ctx context.Context, opt TargetOptions) (Target, error) {
	if opt.Lab != "" {
		return openLab(ctx, opt)
	}
	return openLocal(opt)
}

// AgentTimeout bounds the wait for a lab's agent to answer a ping.
const AgentTimeout = 10 * time.Second

// agentTarget is a kernel reached through its agent: a lab's, over the
// lab's channel, or a domain's over mutual TLS.
type agentTarget struct {
	name    string
	c       *agent.Client
	image   string
	headers string
	close   func() error
	// explain adds what is known of a lost connection (a lab's QEMU
	// exited); nil leaves errors as they are.
	explain func(error) error
}

// NewAgentTarget is the kernel an agent client c reaches (a domain's,
// over mutual TLS), with its image and headers; close ends the
// connection.
func NewAgentTarget(name string, c *agent.Client, image, headers string, close func() error) Target {
	return &agentTarget{name: name, c: c, image: image, headers: headers, close: close}
}

func openLab(ctx context.Context, opt TargetOptions) (Target, error) {
	l, err := lab.Get(ctx, opt.Lab)
	if err != nil {
		return nil, err // it names the lab
	}
	c := l.Client()
	if c == nil {
		l.Close()
		return nil, fmt.Errorf("lab %s: its agent does not answer", opt.Lab)
	}
	pctx, cancel := context.WithTimeout(ctx, AgentTimeout)
	defer cancel()
	if err := c.Ping(pctx); err != nil {
		l.Close()
		return nil, fmt.Errorf("lab %s: its agent does not answer within %v (%v); 'klasy lab status' shows the lab, its console log why", opt.Lab, AgentTimeout, err)
	}
	k := l.Kernel()
	t := &agentTarget{name: "lab " + l.Name(), c: c, image: k.Vmlinux, headers: k.BuildDir, close: l.Close, explain: l.Explain}
	if opt.Vmlinux != "" {
		t.image = opt.Vmlinux
	}
	if opt.Headers != "" {
		t.headers = opt.Headers
	}
	return t, nil
}

func (t *agentTarget) Name() string    { return t.name }
func (t *agentTarget) Image() string   { return t.image }
func (t *agentTarget) Headers() string { return t.headers }
func (t *agentTarget) Close() error    { return t.close() }

func (t *agentTarget) explainErr(err error) error {
	if t.explain == nil {
		return err
	}
	return t.explain(err)
}

func (t *agentTarget) ReadFile(ctx context.Context, path string) ([]byte, error) {
	return t.c.ReadFile(ctx, path)
}

func (t *agentTarget) Stream(ctx context.Context, path string, fn func([]byte) error) error {
	return t.c.Stream(ctx, path, fn)
}

func (t *agentTarget) LoadModule(ctx context.Context, ko []byte, params string) error {
	return t.c.LoadModule(ctx, ko, params)
}

func (t *agentTarget) UnloadModule(ctx context.Context, name string) error {
	return t.c.UnloadModule(ctx, name)
}

func (t *agentTarget) Modules(ctx context.Context) ([]wire.Module, error) {
	return t.c.Modules(ctx)
}

func (t *agentTarget) Clock(ctx context.Context) (int64, error) {
	return t.c.Clock(ctx)
}

func (t *agentTarget) KernelLog(ctx context.Context) ([]byte, error) {
	res, err := t.c.Run(ctx, []string{"dmesg"}, nil)
	if err != nil {
		return nil, err
	}
	return res.Stdout, nil
}

// localTarget is the kernel klasy itself runs on.
type localTarget struct {
	image   string
	headers string
}

func openLocal(opt TargetOptions) (Target, error) {
	var uts unix.Utsname
	if err := unix.Uname(&uts); err != nil {
		return nil, err
	}
	release := unix.ByteSliceToString(uts.Release[:])
	if _, err := os.Stat("/proc/modules"); err != nil {
		return nil, fmt.Errorf("this machine's kernel (%s) cannot load modules (no /proc/modules: built without module support); weave into a lab kernel with --lab NAME", release)
	}
	if b, err := os.ReadFile("/proc/sys/kernel/modules_disabled"); err == nil && strings.TrimSpace(string(b)) == "1" {
		return nil, fmt.Errorf("this machine's kernel (%s) cannot load modules (kernel.modules_disabled=1 until reboot); weave into a lab kernel with --lab NAME", release)
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("weaving into this machine's kernel needs root (it loads a module and registers kprobes): run klasy with sudo, or use --lab NAME")
	}
	t := &localTarget{image: opt.Vmlinux, headers: opt.Headers}
	if t.image == "" {
		t.image = filepath.Join("/usr/lib/debug/boot", "vmlinux-"+release)
		if _, err := os.Stat(t.image); err != nil {
			return nil, fmt.Errorf("no vmlinux with debug info for this kernel at %s (Debian: apt install linux-image-%s-dbg), or give one with --vmlinux", t.image, release)
		}
	}
	if t.headers == "" {
		t.headers = filepath.Join("/lib/modules", release, "build")
		if _, err := os.Stat(filepath.Join(t.headers, "Makefile")); err != nil {
			return nil, fmt.Errorf("no kernel headers for this kernel at %s (Debian: apt install linux-headers-%s), or give a kbuild tree with --headers", t.headers, release)
		}
	}
	return t, nil
}

func (t *localTarget) Name() string    { return "this machine" }
func (t *localTarget) Image() string   { return t.image }
func (t *localTarget) Headers() string { return t.headers }
func (t *localTarget) Close() error    { return nil }

func (t *localTarget) ReadFile(ctx context.Context, path string) ([]byte, error) {
	return os.ReadFile(path)
}

func (t *localTarget) Stream(ctx context.Context, path string, fn func([]byte) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, err := f.Read(buf)
		if n > 0 {
			if err := fn(bytes.Clone(buf[:n])); err != nil {
				return err
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func (t *localTarget) LoadModule(ctx context.Context, ko []byte, params string) error {
	return unix.InitModule(ko, params)
}

func (t *localTarget) UnloadModule(ctx context.Context, name string) error {
	return unix.DeleteModule(name, unix.O_NONBLOCK)
}

func (t *localTarget) Modules(ctx context.Context) ([]wire.Module, error) {
	b, err := os.ReadFile("/proc/modules")
	if err != nil {
		return nil, err
	}
	return agent.ParseProcModules(b)
}

func (t *localTarget) Clock(ctx context.Context) (int64, error) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0, fmt.Errorf("clock_gettime(CLOCK_MONOTONIC): %w", err)
	}
	return ts.Nano(), nil
}

func (t *localTarget) KernelLog(ctx context.Context) ([]byte, error) {
	n, err := unix.Klogctl(unix.SYSLOG_ACTION_SIZE_BUFFER, nil)
	if err != nil {
		return nil, err
	}
	buf := make([]byte, n)
	n, err = unix.Klogctl(unix.SYSLOG_ACTION_READ_ALL, buf)
	if err != nil {
		return nil, err
	}
	return buf[:n], nil
}

// ImageOnly is a target without a kernel, for klasy list: it reads only
// the image at path.
func ImageOnly(path string) Target { return imageOnly{path} }

// imageOnly is a target without a kernel: list reads only its image.
type imageOnly struct{ image string }

var errNoKernel = errors.New("no running kernel: klasy list only reads the image")

func (t imageOnly) Name() string                                             { return "image " + t.image }
func (t imageOnly) Image() string                                            { return t.image }
func (t imageOnly) Headers() string                                          { return "" }
func (t imageOnly) Close() error                                             { return nil }
func (t imageOnly) ReadFile(context.Context, string) ([]byte, error)         { return nil, errNoKernel }
func (t imageOnly) LoadModule(context.Context, []byte, string) error         { return errNoKernel }
func (t imageOnly) UnloadModule(context.Context, string) error               { return errNoKernel }
func (t imageOnly) Modules(context.Context) ([]wire.Module, error)           { return nil, errNoKernel }
func (t imageOnly) KernelLog(context.Context) ([]byte, error)                { return nil, errNoKernel }
func (t imageOnly) Stream(context.Context, string, func([]byte) error) error { return errNoKernel }
