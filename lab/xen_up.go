package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/klasy/klasy/agent"
	"github.com/klasy/klasy/domains"
	"github.com/klasy/klasy/lab/initramfs"
)

// upXen is Up for a Xen lab (cfg.Xen set).
func upXen(ctx context.Context, cfg Config, qemu string) (*Lab, error) {
	x := *cfg.Xen
	x.defaults()
	if err := x.check(); err != nil {
		return nil, err
	}
	switch {
	case cfg.Kernel != Debian:
		return nil, fmt.Errorf("a Xen lab runs Debian's kernel in every domain; the %s kernel has no Xen support", cfg.Kernel)
	case cfg.LAN:
		return nil, errors.New("a Xen lab has its own network (xenbr0); it does not join the labs' LAN")
	case cfg.ICount:
		return nil, errors.New("a Xen lab does not run under -icount")
	}
	need := x.Dom0MemMB + x.DomUs*x.DomUMemMB + 256
	if cfg.MemMB == 0 {
		cfg.MemMB = need + 128
	}
	if cfg.MemMB < need || cfg.MemMB > 65536 {
		return nil, fmt.Errorf("QEMU memory %d MB out of range for Domain 0 (%d MB), %d guest(s) of %d MB and Xen (%d..65536)", cfg.MemMB, x.Dom0MemMB, x.DomUs, x.DomUMemMB, need)
	}
	if cfg.CPUs < 1 || cfg.CPUs > 64 {
		return nil, fmt.Errorf("guest CPUs %d out of range (1..64)", cfg.CPUs)
	}
	if old, err := findLab(cfg.Name); err == nil && old.alive() {
		return nil, old.runningError()
	}
	progress := func(format string, a ...any) {
		fmt.Fprintf(cfg.Progress, "lab %s: %s\n", cfg.Name, fmt.Sprintf(format, a...))
	}
	im, err := FindXenImages()
	if err != nil {
		return nil, err
	}
	k, err := FindKernel(Debian)
	if err != nil {
		return nil, err
	}
	if cfg.Agent == "" {
		if cfg.Agent, err = AgentBinary(); err != nil {
			return nil, err
		}
	} else if err := initramfs.CheckStatic(cfg.Agent); err != nil {
		return nil, err
	}
	mods, err := BuildXenModules(ctx, k, x.Source, x.Plugin, prefixWriter{cfg.Progress, "lab " + cfg.Name + ": "})
	if err != nil {
		return nil, err
	}
	base, err := domUBase(k, cfg.Agent, mods["xen-netfront"])
	if err != nil {
		return nil, fmt.Errorf("building the Domain U initramfs: %w", err)
	}
	ports, err := freePorts(1 + x.DomUs)
	if err != nil {
		return nil, err
	}
	doms := []xenDomain{{Name: Dom0, GuestAddr: "10.0.2.15/24", HostPort: ports[0], MAC: "52:54:00:4b:00:01",
		Modules: []XenModule{mods["xen-netback"]}}}
	for i := 1; i <= x.DomUs; i++ {
		doms = append(doms, xenDomain{Name: fmt.Sprintf("domU%d", i), GuestAddr: fmt.Sprintf("10.0.2.%d/24", 15+i),
			HostPort: ports[i], MAC: fmt.Sprintf("00:16:3e:4b:00:%02x", i), Modules: []XenModule{mods["xen-netfront"]}})
	}
	if err := os.MkdirAll(Root(), 0o755); err != nil {
		return nil, err
	}
	staging, err := os.MkdirTemp(Root(), ".staging-"+cfg.Name+"-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(staging) // gone already once it became the lab's
	f, err := writeDomainsFile(staging, k, doms)
	if err != nil {
		return nil, err
	}
	overlay, err := dom0Overlay(k, cfg.Agent, mods["xen-netback"], base, f, doms, x.DomUMemMB)
	if err != nil {
		return nil, fmt.Errorf("building Domain 0's initramfs: %w", err)
	}
	if err := writeDom0Initrd(filepath.Join(staging, "dom0-initrd"), im.Dom0Root, overlay); err != nil {
		return nil, err
	}
	rec := record{
		Name: cfg.Name, Kernel: k, MemMB: cfg.MemMB, CPUs: cfg.CPUs, Addr: doms[0].GuestAddr,
		Initramfs: filepath.Join(labDir(cfg.Name), "dom0-initrd"),
		Xen: &xenRecord{Hypervisor: im.Hypervisor, Version: im.HypervisorVersion(), Dom0MemMB: x.Dom0MemMB,
			DomUMemMB: x.DomUMemMB, Domains: doms},
	}
	if p, err := filepath.EvalSymlinks(im.Hypervisor); err == nil {
		rec.Xen.Hypervisor = p
	}
	l, fail, err := launch(cfg, qemu, rec, staging, func(r record) []string { return r.xenQemuArgs(k) },
		fmt.Sprintf("Xen %s, Domain 0 and %d Domain U with Debian's kernel %s, %d MB, %d CPU(s)", rec.Xen.Version, x.DomUs, k.Release, cfg.MemMB, cfg.CPUs))
	if err != nil {
		return nil, err
	}
	start := l.rec.Started
	since := func() float64 { return time.Since(start).Seconds() }
	// The staging directory is the lab's now: its paths are the lab's.
	if f, err = domains.Load(l.rec.domainsFile()); err != nil {
		return fail(err)
	}

	bootCtx, cancel := context.WithTimeout(ctx, cfg.BootTimeout)
	defer cancel()
	watch := consoleWatcher{path: l.rec.consoleLog()}
	starting := map[string]bool{} // the domain said its agent starts
	up := map[string]*agent.Client{}
	defer func() {
		for name, c := range up {
			if name != Dom0 {
				c.Close()
			}
		}
	}()
	lastTry := map[string]time.Time{}
	lastErr := map[string]error{}
	lastSaid := time.Now()
	for {
		for _, line := range watch.newLines() {
			dom, msg := Dom0, line
			for _, d := range doms[1:] {
				if rest, ok := strings.CutPrefix(line, d.Name+": "); ok {
					dom, msg = d.Name, rest
				}
			}
			if i := strings.Index(msg, "klasy-init: "); i >= 0 {
				msg = msg[i+len("klasy-init: "):]
				progress("%.1fs %s: %s", since(), dom, msg)
				lastSaid = time.Now()
				if strings.HasPrefix(msg, "starting agent on ") {
					starting[dom] = true
				}
				if status, ok := strings.CutPrefix(msg, "error: agent exited with status "); ok {
					return fail(fmt.Errorf("the agent in %s exited with status %s before answering", dom, status))
				}
				if strings.HasPrefix(msg, "error: xl create") {
					return fail(fmt.Errorf("Domain 0 could not start a guest: %s", strings.TrimPrefix(msg, "error: ")))
				}
			} else if strings.Contains(msg, "Kernel panic") {
				return fail(fmt.Errorf("the kernel of %s panicked", dom))
			} else if strings.Contains(line, "(XEN) Panic on CPU") {
				return fail(errors.New("Xen panicked"))
			}
		}
		select {
		case <-l.exited:
			return fail(errors.New("QEMU exited while Xen was booting"))
		case <-bootCtx.Done():
			if ctx.Err() != nil {
				return fail(fmt.Errorf("boot interrupted after %.1fs: %w", since(), ctx.Err()))
			}
			var missing []string
			for _, d := range doms {
				if up[d.Name] == nil {
					why := "it did not say its agent starts"
					if e := lastErr[d.Name]; e != nil {
						why = e.Error()
					} else if starting[d.Name] {
						why = "no connection yet"
					}
					missing = append(missing, fmt.Sprintf("%s (%s)", d.Name, why))
				}
			}
			return fail(fmt.Errorf("the agents of %s did not answer within %v: %w", strings.Join(missing, ", "), cfg.BootTimeout, bootCtx.Err()))
		default:
		}
		if time.Since(lastSaid) > 15*time.Second {
			progress("%.0fs still booting (Xen under TCG is slow; console: %s)", since(), l.rec.consoleLog())
			lastSaid = time.Now()
		}
		// QEMU accepts a forwarded connection before anything listens
		// in the guest and then drops it: try each agent once it starts,
		// not more often than once a second.
		for _, d := range doms {
			if up[d.Name] != nil || !starting[d.Name] || time.Since(lastTry[d.Name]) < time.Second {
				continue
			}
			lastTry[d.Name] = time.Now()
			tctx, cancel := context.WithTimeout(bootCtx, 5*time.Second)
			c, err := f.Dial(tctx, d.Name)
			cancel()
			if err != nil {
				lastErr[d.Name] = err
			} else {
				up[d.Name] = c
				progress("%.1fs %s: agent answered over mutual TLS at 127.0.0.1:%d", since(), d.Name, d.HostPort)
				lastSaid = time.Now()
			}
		}
		if len(up) == len(doms) {
			l.client = up[Dom0]
			progress("%.1fs lab is up; domains file %s", since(), l.rec.domainsFile())
			return l, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// prefixWriter puts prefix before each write (progress lines).
type prefixWriter struct {
	w      io.Writer
	prefix string
}

func (p prefixWriter) Write(b []byte) (int, error) {
	if _, err := io.WriteString(p.w, p.prefix+string(b)); err != nil {
		return 0, err
	}
	return len(b), nil
}

// IsXen reports whether the lab is a Xen lab.
func (l *Lab) IsXen() bool { return l.rec.Xen != nil }

// Domain is one domain of a Xen lab: what the host needs to weave into
// it. Every domain runs Kernel; Dial reaches its agent.
type Domain struct {
	Name string // Dom0, "domU1"...
	// AgentAddr is the host:port its agent is reached at (QEMU forwards
	// it to GuestAddr:7070); the domains file says the same.
	AgentAddr string
	GuestAddr string // on xenbr0, with its prefix: 10.0.2.15/24
	// Kernel is the domain's kernel: Image (what it booted), Vmlinux
	// (its DWARF), BuildDir (the headers modules build against).
	Kernel Kernel
	// Modules are the modules built with the klasy plugin that the
	// domain runs in place of Debian's (xen-netback in Domain 0,
	// xen-netfront in each guest): Path is the .ko with .debug_klasy.
	Modules []XenModule
}

// Domains returns the domains of a Xen lab, Domain 0 first; nil for a
// lab that is not one.
func (l *Lab) Domains() []Domain {
	if l.rec.Xen == nil {
		return nil
	}
	var out []Domain
	for _, d := range l.rec.Xen.Domains {
		out = append(out, Domain{Name: d.Name, AgentAddr: fmt.Sprintf("127.0.0.1:%d", d.HostPort), GuestAddr: d.GuestAddr,
			Kernel: l.rec.Kernel, Modules: d.Modules})
	}
	return out
}

// DomainsFile returns the path of a Xen lab's domains file: each
// domain's agent address and the lab's key material (see package
// domains); "" for a lab that is not a Xen lab.
func (l *Lab) DomainsFile() string {
	if l.rec.Xen == nil {
		return ""
	}
	return l.rec.domainsFile()
}

// Dial connects to the agent of domain name of a Xen lab over mutual
// TLS, with the lab's domains file. The caller closes the client.
func (l *Lab) Dial(ctx context.Context, name string) (*agent.Client, error) {
	if l.rec.Xen == nil {
		return nil, fmt.Errorf("lab %s is not a Xen lab: it has no domains (its agent is Client())", l.rec.Name)
	}
	f, err := domains.Load(l.rec.domainsFile())
	if err != nil {
		return nil, err
	}
	if _, err := f.Domain(name); err != nil {
		var names []string
		for _, d := range l.rec.Xen.Domains {
			names = append(names, d.Name)
		}
		return nil, fmt.Errorf("lab %s has no domain %q (it has %s)", l.rec.Name, name, strings.Join(names, ", "))
	}
	c, err := f.Dial(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("lab %s: %w", l.rec.Name, err)
	}
	return c, nil
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// connectXen connects to Domain 0's agent, which is the Xen lab's
// Client().
func (l *Lab) connectXen(ctx context.Context, timeout time.Duration) error {
	f, err := domains.Load(l.rec.domainsFile())
	if err != nil {
		return fmt.Errorf("lab %s: %w", l.rec.Name, err)
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c, err := f.Dial(cctx, Dom0)
	if err != nil {
		return fmt.Errorf("lab %s: %w", l.rec.Name, err)
	}
	l.mu.Lock()
	if l.client != nil {
		l.client.Close()
	}
	l.client, l.conn = c, nil
	l.mu.Unlock()
	return nil
}
