package xenlab

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
	"github.com/klasy/klasy/lab"
	"github.com/klasy/klasy/lab/initramfs"
)

// Boot boots the Xen lab xc says for lab.Up, when cfg.Xen is xc (see
// lab.Booter).
func (xc *Config) Boot(ctx context.Context, cfg lab.Config, qemu string) (*lab.Lab, error) {
	x := *xc
	x.defaults()
	if err := x.check(); err != nil {
		return nil, err
	}
	switch {
	case cfg.Kernel != lab.Debian:
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
	if err := lab.CheckNotRunning(cfg.Name); err != nil {
		return nil, err
	}
	progress := func(format string, a ...any) {
		fmt.Fprintf(cfg.Progress, "lab %s: %s\n", cfg.Name, fmt.Sprintf(format, a...))
	}
	im, err := FindImages()
	if err != nil {
		return nil, err
	}
	k, err := lab.FindKernel(lab.Debian)
	if err != nil {
		return nil, err
	}
	if cfg.Agent == "" {
		if cfg.Agent, err = lab.AgentBinary(); err != nil {
			return nil, err
		}
	} else if err := initramfs.CheckStatic(cfg.Agent); err != nil {
		return nil, err
	}
	mods, err := BuildModules(ctx, k, x.Source, x.Plugin, prefixWriter{cfg.Progress, "lab " + cfg.Name + ": "})
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
	doms := []lab.XenDomain{{Name: lab.Dom0, GuestAddr: "10.0.2.15/24", HostPort: ports[0], MAC: "52:54:00:4b:00:01",
		Modules: []lab.XenModule{mods["xen-netback"]}}}
	for i := 1; i <= x.DomUs; i++ {
		doms = append(doms, lab.XenDomain{Name: fmt.Sprintf("domU%d", i), GuestAddr: fmt.Sprintf("10.0.2.%d/24", 15+i),
			HostPort: ports[i], MAC: fmt.Sprintf("00:16:3e:4b:00:%02x", i), Modules: []lab.XenModule{mods["xen-netfront"]}})
	}
	if err := os.MkdirAll(lab.Root(), 0o755); err != nil {
		return nil, err
	}
	staging, err := os.MkdirTemp(lab.Root(), ".staging-"+cfg.Name+"-")
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
	if err := writeDom0Initrd(filepath.Join(staging, dom0Initrd), im.Dom0Root, overlay); err != nil {
		return nil, err
	}
	xr := &lab.XenRecord{Hypervisor: im.Hypervisor, Version: im.HypervisorVersion(), Dom0MemMB: x.Dom0MemMB,
		DomUMemMB: x.DomUMemMB, Domains: doms}
	if p, err := filepath.EvalSymlinks(im.Hypervisor); err == nil {
		xr.Hypervisor = p
	}
	b, err := lab.Launch(cfg, qemu, lab.Machine{
		Kernel: k, Addr: doms[0].GuestAddr, Initramfs: filepath.Join(lab.Root(), cfg.Name, dom0Initrd), Xen: xr,
		Staging: staging,
		Args:    func(f lab.Files) []string { return qemuArgs(cfg, xr, k, f) },
		What:    fmt.Sprintf("Xen %s, Domain 0 and %d Domain U with Debian's kernel %s, %d MB, %d CPU(s)", xr.Version, x.DomUs, k.Release, cfg.MemMB, cfg.CPUs),
	})
	if err != nil {
		return nil, err
	}
	l := b.Lab()
	start := b.Started()
	since := func() float64 { return time.Since(start).Seconds() }
	// The staging directory is the lab's now: its paths are the lab's.
	if f, err = domains.Load(l.DomainsFile()); err != nil {
		return b.Fail(err)
	}

	bootCtx, cancel := context.WithTimeout(ctx, cfg.BootTimeout)
	defer cancel()
	starting := map[string]bool{} // the domain said its agent starts
	up := map[string]*agent.Client{}
	defer func() {
		for name, c := range up {
			if name != lab.Dom0 {
				c.Close()
			}
		}
	}()
	lastTry := map[string]time.Time{}
	lastErr := map[string]error{}
	lastSaid := time.Now()
	for {
		for _, line := range b.ConsoleLines() {
			dom, msg := lab.Dom0, line
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
					return b.Fail(fmt.Errorf("the agent in %s exited with status %s before answering", dom, status))
				}
				if strings.HasPrefix(msg, "error: xl create") {
					return b.Fail(fmt.Errorf("Domain 0 could not start a guest: %s", strings.TrimPrefix(msg, "error: ")))
				}
			} else if strings.Contains(msg, "Kernel panic") {
				return b.Fail(fmt.Errorf("the kernel of %s panicked", dom))
			} else if strings.Contains(line, "(XEN) Panic on CPU") {
				return b.Fail(errors.New("Xen panicked"))
			}
		}
		select {
		case <-b.Exited():
			return b.Fail(errors.New("QEMU exited while Xen was booting"))
		case <-bootCtx.Done():
			if ctx.Err() != nil {
				return b.Fail(fmt.Errorf("boot interrupted after %.1fs: %w", since(), ctx.Err()))
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
			return b.Fail(fmt.Errorf("the agents of %s did not answer within %v: %w", strings.Join(missing, ", "), cfg.BootTimeout, bootCtx.Err()))
		default:
		}
		if time.Since(lastSaid) > 15*time.Second {
			progress("%.0fs still booting (Xen under TCG is slow; console: %s)", since(), l.ConsoleLog())
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
			progress("%.1fs lab is up; domains file %s", since(), l.DomainsFile())
			return b.Up(up[lab.Dom0]), nil
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
