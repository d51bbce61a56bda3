package lab

// A Xen lab as every process sees it once it runs (package lab/xenlab
// boots one): its record, its domains, their agents, reached over
// mutual TLS with the lab's domains file.

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/klasy/klasy/agent"
	"github.com/klasy/klasy/domains"
)

// Dom0 is the name of Domain 0 in a Xen lab; the guests are domU1...
const Dom0 = "dom0"

// XenModule is a kernel module of a Xen lab built with the plugin.
type XenModule struct {
	Name string `json:"name"` // as the kernel lists it: xen_netback
	// Path is the .ko on the host, with its DWARF and .debug_klasy; the
	// domain runs the same build without debug sections.
	Path    string `json:"path"`
	BuildID string `json:"build_id"`
}

// XenDomain is one domain of a Xen lab as lab.json records it.
type XenDomain struct {
	Name      string `json:"name"`
	GuestAddr string `json:"guest_addr"` // on xenbr0, with its prefix
	HostPort  int    `json:"host_port"`  // 127.0.0.1:HostPort reaches its agent
	MAC       string `json:"mac"`
	// Modules are the plugin-built modules it runs in place of the
	// stock ones.
	Modules []XenModule `json:"modules"`
}

// XenRecord is what lab.json holds about a Xen lab; package lab/xenlab
// fills it in when it boots one (Machine.Xen).
type XenRecord struct {
	Hypervisor string      `json:"hypervisor"` // image path
	Version    string      `json:"version"`    // Debian's version of it
	Dom0MemMB  int         `json:"dom0_mem_mb"`
	DomUMemMB  int         `json:"domu_mem_mb"`
	Domains    []XenDomain `json:"domains"`
}

func (r record) domainsFile() string { return filepath.Join(r.dir(), "domains.yaml") }
func (r record) keysDir() string     { return filepath.Join(r.dir(), "keys") }

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
