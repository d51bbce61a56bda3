// Package xenlab boots a Xen lab: Xen 4.17 (Debian's
// xen-hypervisor-4.17-amd64) under QEMU TCG with a PV Domain 0 and one or
// more PV Domain U guests on a bridge, xenbr0, an agent in every domain
// reached over mutual TLS.
//
// The images scripts/build-xen-lab.sh builds once (make xen-lab) are the
// hypervisor and Domain 0's root, a debootstrap'd minbase bookworm with
// Xen's user space packed as an initramfs. At lab up klasy adds a second
// initramfs segment to it (Linux unpacks concatenated archives): its
// init (guest/xen-dom0-rcS), the agent, the kernel modules Domain 0
// loads, Domain 0's certificate, and each Domain U's kernel, initramfs
// and xl configuration. Domain 0 starts xenstored, xen-init-dom0 and
// xenconsoled by hand (no systemd, no udev), puts eth0 (QEMU's user
// network) on xenbr0 and starts the guests with xl create; each guest's
// vif joins xenbr0, so netfront -> netback -> bridge -> eth0 is the path
// of a packet a guest sends out, as in XenLASY's case study.
//
// Every domain runs Debian's 6.1 kernel; xen-netfront (in each Domain U)
// and xen-netback (in Domain 0) are rebuilt out of tree from
// linux-source-6.1 with the klasy GCC plugin against that kernel's
// headers and loaded in place of the stock modules, so their member
// accesses are in .debug_klasy.
//
// Addresses: QEMU's user network is 10.0.2.0/24 with the host at
// 10.0.2.2; Domain 0 is 10.0.2.15 on xenbr0, Domain U n is 10.0.2.(15+n).
// The agents listen on port 7070 and QEMU forwards a port of 127.0.0.1
// on the host to each (hostfwd), which the domains file names.
//
// Config is a lab.Booter: lab.Up boots a Xen lab for a lab.Config whose
// Xen is one, and a running Xen lab is a lab.Lab to every process (its
// Domains, their agents, status and down are package lab's).
package xenlab

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"text/template"
	"time"

	_ "embed"

	"github.com/klasy/klasy/domains"
	"github.com/klasy/klasy/internal/cachedir"
	"github.com/klasy/klasy/kbuild"
	"github.com/klasy/klasy/kmod"
	"github.com/klasy/klasy/lab"
	"github.com/klasy/klasy/lab/initramfs"
)

// Config says what a Xen lab boots; zero values take the defaults.
type Config struct {
	// DomUs is how many PV Domain U guests start; default 1 (1..8).
	DomUs int
	// Dom0MemMB is Domain 0's memory (dom0_mem), default 1024;
	// DomUMemMB each guest's, default 256.
	Dom0MemMB, DomUMemMB int
	// Plugin is the klasy GCC plugin xen-netfront and xen-netback are
	// built with; default FindPlugin(). Not needed once the modules of
	// the kernel are built (they are cached by plugin, source and
	// headers).
	Plugin string
	// Source is the linux-source-6.1 tree the modules are built from;
	// default $KLASY_CACHE/linux-source-6.1/src (make linux-source).
	Source string
}

const (
	// xenFormat is the image layout scripts/build-xen-lab.sh writes.
	xenFormat = "klasy-xen-images-1"
	// xenOverlayFormat changes whenever what Boot adds to the images does,
	// so cached Domain U initramfs of an older layout are not reused.
	xenOverlayFormat = "klasy-xen-overlay-2"
	// agentPort is where every domain's agent listens.
	agentPort = 7070
	maxDomUs  = 8
)

// xenCPU is QEMU's CPU for Xen under TCG. Without smap and smep a PV
// Domain 0 boots (with them it crashed in create_bounce_frame), without
// rdtscp PVH and HVM guests too (shared/notes/xen.md). Without xsave:
// with it, the extended register state of user space came back damaged
// after Xen switched domains (measured: Go's runtime crashing with
// unwinding errors, TLS records failing their MAC, xl listing "(null)"
// names; 20 MB read back through the agent wrong 2 to 5 times in 5, in
// both domains; without xsave, and so without AVX, right 10 times in
// 10). Turning off only xsaveopt, xsavec and xsaves, or only avx and
// avx2, did not help.
const xenCPU = "max,-smap,-smep,-rdtscp,-xsave"

func (x *Config) defaults() {
	if x.DomUs == 0 {
		x.DomUs = 1
	}
	if x.Dom0MemMB == 0 {
		x.Dom0MemMB = 1024
	}
	if x.DomUMemMB == 0 {
		x.DomUMemMB = 256
	}
	if x.Source == "" {
		x.Source = filepath.Join(lab.CacheDir(), "linux-source-6.1", "src")
	}
}

func (x *Config) check() error {
	switch {
	case x.DomUs < 1 || x.DomUs > maxDomUs:
		return fmt.Errorf("%d Domain U guests out of range (1..%d)", x.DomUs, maxDomUs)
	case x.Dom0MemMB < 512 || x.Dom0MemMB > 16384:
		return fmt.Errorf("Domain 0 memory %d MB out of range (512..16384)", x.Dom0MemMB)
	case x.DomUMemMB < 128 || x.DomUMemMB > 4096:
		return fmt.Errorf("Domain U memory %d MB out of range (128..4096)", x.DomUMemMB)
	}
	return nil
}

// Images are the files scripts/build-xen-lab.sh built.
type Images struct {
	Dir        string
	Hypervisor string // xen: the gunzipped ELF QEMU's -kernel boots
	Dom0Root   string // dom0-root.cpio.gz
	Versions   string // the Debian versions inside, one "package version" a line
}

// FindImages locates the Xen lab's images in the cache; the error
// says how to build them.
func FindImages() (Images, error) {
	dir := filepath.Join(lab.CacheDir(), "xen-lab", "current")
	im := Images{
		Dir:        dir,
		Hypervisor: filepath.Join(dir, "xen"),
		Dom0Root:   filepath.Join(dir, "dom0-root.cpio.gz"),
		Versions:   filepath.Join(dir, "versions"),
	}
	const hint = "run make xen-lab (scripts/build-xen-lab.sh; a few minutes, once)"
	f, err := os.ReadFile(filepath.Join(dir, "format"))
	if err != nil {
		return im, fmt.Errorf("no Xen lab images in %s (%s)", dir, hint)
	}
	if got := strings.TrimSpace(string(f)); got != xenFormat {
		return im, fmt.Errorf("the Xen lab images in %s are of layout %q, this klasy wants %q (%s)", dir, got, xenFormat, hint)
	}
	for _, p := range []string{im.Hypervisor, im.Dom0Root, filepath.Join(dir, ".complete")} {
		if _, err := os.Stat(p); err != nil {
			return im, fmt.Errorf("the Xen lab images in %s are incomplete (%s): %w", dir, hint, err)
		}
	}
	return im, nil
}

// HypervisorVersion is the version of xen-hypervisor the images hold,
// "" if unknown.
func (im Images) HypervisorVersion() string {
	data, _ := os.ReadFile(im.Versions)
	for _, l := range strings.Split(string(data), "\n") {
		if f := strings.Fields(l); len(f) == 2 && strings.HasPrefix(f[0], "xen-hypervisor-") {
			return f[1]
		}
	}
	return ""
}

// FindPlugin returns the klasy GCC plugin: $KLASY_PLUGIN, else
// gcc-patches/klasy.so beside the directory of this executable (bin/klasy
// in a checkout) or of the current directory.
func FindPlugin() (string, error) {
	if p := os.Getenv("KLASY_PLUGIN"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("KLASY_PLUGIN: %w", err)
		}
		return p, nil
	}
	var cands []string
	if exe, err := os.Executable(); err == nil {
		cands = append(cands, filepath.Join(filepath.Dir(filepath.Dir(exe)), "gcc-patches", "klasy.so"))
	}
	if wd, err := os.Getwd(); err == nil {
		cands = append(cands, filepath.Join(wd, "gcc-patches", "klasy.so"))
	}
	for _, c := range cands {
		if _, err := os.Stat(c); err == nil {
			return c, nil
		}
	}
	return "", errors.New("no klasy GCC plugin found (run make plugin in the klasy tree, or give --plugin PATH or KLASY_PLUGIN)")
}

// xenDrivers are the drivers rebuilt with the plugin: which domain runs
// each, and its sources in linux-source.
var xenDrivers = []struct {
	name, dom, dir string
	files          []string
	objs           []string
}{
	{"xen-netback", lab.Dom0, "drivers/net/xen-netback",
		[]string{"netback.c", "xenbus.c", "interface.c", "hash.c", "rx.c", "common.h"},
		[]string{"netback.o", "xenbus.o", "interface.o", "hash.o", "rx.o"}},
	{"xen-netfront", "domU", "drivers/net",
		[]string{"xen-netfront.c"}, nil},
}

// BuildModules builds xen-netback and xen-netfront from src with the
// plugin against kernel k's headers, or returns the build cached under
// $KLASY_CACHE/xen-lab/modules/KEY, KEY hashing the sources, the plugin
// and the headers. plugin "" is FindPlugin's, or, when there is none,
// the newest build cached for k (a klasy binary away from its checkout).
func BuildModules(ctx context.Context, k lab.Kernel, src, plugin string, progress io.Writer) (map[string]lab.XenModule, error) {
	top := filepath.Join(lab.CacheDir(), "xen-lab", "modules")
	latest := filepath.Join(top, "latest-"+k.Release)
	if plugin == "" {
		p, err := FindPlugin()
		if err != nil {
			if mods, merr := readModules(latest); merr == nil {
				return mods, nil
			}
			return nil, err
		}
		plugin = p
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00", xenOverlayFormat, k.Release, runtime.Version())
	hashFile := func(p string) error {
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", filepath.Base(p), len(data))
		h.Write(data)
		return nil
	}
	if err := hashFile(plugin); err != nil {
		return nil, fmt.Errorf("reading the plugin: %w", err)
	}
	for _, p := range []string{filepath.Join(k.BuildDir, "Module.symvers"), filepath.Join(k.BuildDir, ".config")} {
		if err := hashFile(p); err != nil {
			return nil, fmt.Errorf("reading the headers of %s: %w", k.Release, err)
		}
	}
	for _, d := range xenDrivers {
		for _, f := range d.files {
			if err := hashFile(filepath.Join(src, d.dir, f)); err != nil {
				return nil, fmt.Errorf("reading the source of %s (make linux-source): %w", d.name, err)
			}
		}
	}
	key := hex.EncodeToString(h.Sum(nil))[:16]
	dir := filepath.Join(top, k.Release+"-"+key)
	if mods, err := readModules(dir); err == nil {
		return mods, nil
	}
	if err := os.MkdirAll(top, 0o755); err != nil {
		return nil, err
	}
	unlock, err := cachedir.Lock(filepath.Join(top, ".lock"))
	if err != nil {
		return nil, err
	}
	defer unlock()
	if mods, err := readModules(dir); err == nil {
		return mods, nil // another process built it meanwhile
	}
	// The build happens where it stays, in a copy of the source tree's
	// layout (dir/src/drivers/net/...): the compiler records these paths
	// in the modules' DWARF and .debug_klasy, so a file there ends in
	// its name in the kernel tree (drivers/net/xen-netfront.c) and the
	// sources stay beside the modules for klasy lines and accesses.
	srcFS, err := os.MkdirTemp("", "klasy-xen-src-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(srcFS)
	var kbuildTop strings.Builder
	for _, d := range xenDrivers {
		sub := strings.TrimPrefix(strings.TrimPrefix(d.dir, "drivers/net"), "/")
		if err := os.MkdirAll(filepath.Join(srcFS, sub), 0o755); err != nil {
			return nil, err
		}
		for _, f := range d.files {
			data, err := os.ReadFile(filepath.Join(src, d.dir, f))
			if err != nil {
				return nil, err
			}
			if err := os.WriteFile(filepath.Join(srcFS, sub, f), data, 0o644); err != nil {
				return nil, err
			}
		}
		if sub == "" {
			fmt.Fprintf(&kbuildTop, "obj-m += %s.o\n", d.name)
			continue
		}
		fmt.Fprintf(&kbuildTop, "obj-m += %s/\n", sub)
		kb := fmt.Sprintf("obj-m += %s.o\n%s-y := %s\n", d.name, d.name, strings.Join(d.objs, " "))
		if err := os.WriteFile(filepath.Join(srcFS, sub, "Kbuild"), []byte(kb), 0o644); err != nil {
			return nil, err
		}
	}
	if err := os.WriteFile(filepath.Join(srcFS, "Kbuild"), []byte(kbuildTop.String()), 0o644); err != nil {
		return nil, err
	}
	os.RemoveAll(dir)
	fmt.Fprintf(progress, "building xen-netback and xen-netfront with the klasy plugin against %s (about 15 s, once)\n", k.Release)
	start := time.Now()
	res, err := kbuild.Build(ctx, k.BuildDir, os.DirFS(srcFS), kbuild.Options{
		CFLAGS: []string{"-fplugin=" + plugin}, Jobs: 2, Dir: filepath.Join(dir, "src", "drivers", "net")})
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("building xen-netback and xen-netfront with the plugin: %w", err)
	}
	// The modules last: their presence says the build is complete.
	for _, m := range res.Modules {
		tmp := filepath.Join(dir, "."+m.Name+".ko.tmp")
		if err := os.WriteFile(tmp, m.Image, 0o644); err != nil {
			return nil, err
		}
		if err := os.Rename(tmp, filepath.Join(dir, m.Name+".ko")); err != nil {
			return nil, err
		}
	}
	os.Remove(latest)
	os.Symlink(filepath.Base(dir), latest)
	fmt.Fprintf(progress, "built xen-netback and xen-netfront in %.1fs into %s\n", time.Since(start).Seconds(), dir)
	return readModules(dir)
}

// readModules reads a cached module build: both modules, with their
// .modinfo and build-id.
func readModules(dir string) (map[string]lab.XenModule, error) {
	out := map[string]lab.XenModule{}
	for _, d := range xenDrivers {
		name := strings.ReplaceAll(d.name, "-", "_")
		p := filepath.Join(dir, name+".ko")
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		if _, err := kmod.ReadInfo(data); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		if abs, err := filepath.EvalSymlinks(p); err == nil {
			p = abs
		}
		out[d.name] = lab.XenModule{Name: name, Path: p, BuildID: buildID(data)}
	}
	return out, nil
}

// buildID is the hex NT_GNU_BUILD_ID of an ELF image, "" if none.
func buildID(image []byte) string {
	// .note.gnu.build-id: namesz 4, descsz, type 3, "GNU\0", desc.
	i := bytes.Index(image, []byte("\x04\x00\x00\x00\x14\x00\x00\x00\x03\x00\x00\x00GNU\x00"))
	if i < 0 || i+16+20 > len(image) {
		return ""
	}
	return hex.EncodeToString(image[i+16 : i+16+20])
}

//go:embed guest/xen-dom0-rcS
var xenDom0RcS []byte

//go:embed guest/xen-dom0-inittab
var xenDom0Inittab []byte

//go:embed guest/xen-domUs
var xenDomUs []byte

//go:embed guest/xen-domU-rcS
var xenDomURcS []byte

//go:embed guest/xen-domU-inittab
var xenDomUInittab []byte

//go:embed guest/xen-agent
var xenAgent []byte

// dom0Modules are the stock modules Domain 0 loads, besides their
// dependencies: Xen's device interfaces for the toolstack, the bridge,
// and the NIC of QEMU's user network. xen-netback, rebuilt, comes after.
var dom0Modules = []string{"xen-evtchn", "xen-gntdev", "xen-gntalloc", "xen-privcmd", "xenfs", "bridge", "e1000"}

// freePorts returns n TCP ports of 127.0.0.1 nothing listens on now.
func freePorts(n int) ([]int, error) {
	var lns []net.Listener
	defer func() {
		for _, l := range lns {
			l.Close()
		}
	}()
	var ports []int
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port for an agent: %w", err)
		}
		lns = append(lns, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// writeDomainsFile writes the lab's domains file and generates its key
// material under dir (the lab's staging directory). Each domain names
// kernel k's image and headers and the plugin-built modules it runs, so
// that klasy weave --domains weaves into it.
func writeDomainsFile(dir string, k lab.Kernel, doms []lab.XenDomain) (*domains.File, error) {
	var b strings.Builder
	b.WriteString("# The domains of a Xen lab, written by klasy lab up --xen; its keys are\n# this lab's own (keys/), made at boot.\n")
	b.WriteString("ca:\n  cert: keys/ca.crt\n  key: keys/ca.key\ncontroller:\n  cert: keys/controller.crt\n  key: keys/controller.key\ndomains:\n")
	for _, d := range doms {
		fmt.Fprintf(&b, "  - name: %s\n    address: 127.0.0.1:%d\n    cert: keys/%s.crt\n    key: keys/%s.key\n", d.Name, d.HostPort, d.Name, d.Name)
		fmt.Fprintf(&b, "    vmlinux: %s\n    headers: %s\n", k.Vmlinux, k.BuildDir)
		if len(d.Modules) > 0 {
			b.WriteString("    modules:\n")
			for _, m := range d.Modules {
				fmt.Fprintf(&b, "      - %s\n", m.Path)
			}
		}
	}
	path := filepath.Join(dir, "domains.yaml")
	f, err := domains.Parse(path, []byte(b.String()))
	if err != nil {
		return nil, err
	}
	if _, err := domains.GenerateKeys(f); err != nil {
		return nil, fmt.Errorf("generating the lab's keys: %w", err)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return nil, err
	}
	return f, nil
}

var xlConfig = template.Must(template.New("xl").Parse(`# {{.Name}}: a PV Domain U of a klasy Xen lab.
name = "{{.Name}}"
type = "pv"
kernel = "/var/lib/klasy/domU/vmlinuz"
ramdisk = "/run/klasy/{{.Name}}.cpio"
extra = "console=hvc0 panic=-1 quiet klasy.name={{.Name}} klasy.ip={{.GuestAddr}} klasy.gw=10.0.2.2"
memory = {{.MemMB}}
vcpus = 1
vif = [ 'mac={{.MAC}},bridge=xenbr0' ]
on_crash = "destroy"
`))

// domUBase is the part of every Domain U's initramfs that is the same
// for all: busybox, the agent, init, xen-netfront. It is cached by a hash
// of its inputs, as Initramfs is.
func domUBase(k lab.Kernel, agentBin string, netfront lab.XenModule) (string, error) {
	bb, err := initramfs.FindBusybox()
	if err != nil {
		return "", err
	}
	nf, err := os.ReadFile(netfront.Path)
	if err != nil {
		return "", err
	}
	nfStripped, err := kmod.StripDebug(nf)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00", xenOverlayFormat, k.Release)
	for _, b := range [][]byte{xenDomURcS, xenDomUInittab, xenAgent, nfStripped} {
		fmt.Fprintf(h, "%d\x00", len(b))
		h.Write(b)
	}
	for _, f := range []string{agentBin, bb} {
		data, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%d\x00", len(data))
		h.Write(data)
	}
	dir := filepath.Join(lab.CacheDir(), "xen-lab", "domU")
	path := filepath.Join(dir, k.Release+"-"+hex.EncodeToString(h.Sum(nil))[:16]+".cpio")
	if initramfs.Reuse(path) {
		return path, nil
	}
	a := initramfs.New()
	for _, d := range []string{"dev", "proc", "sys", "tmp", "run", "root", "etc", "var/log", "lib", "bin", "sbin", "usr/bin", "usr/sbin"} {
		a.Dir(d)
	}
	a.Chardev("dev/console", 0o600, 5, 1)
	a.Chardev("dev/null", 0o666, 1, 3)
	if err := addBusybox(a, bb, "bin"); err != nil {
		return "", err
	}
	a.Symlink("init", "/bin/busybox")
	agent, err := os.ReadFile(agentBin)
	if err != nil {
		return "", err
	}
	a.File("bin/klasy", 0o755, agent)
	a.File("etc/inittab", 0o644, xenDomUInittab)
	a.File("etc/klasy/rcS", 0o755, xenDomURcS)
	a.File("etc/klasy/agent", 0o755, xenAgent)
	a.File("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/bin/sh\n"))
	a.File("etc/group", 0o644, []byte("root:x:0:\n"))
	a.File(filepath.Join("lib/modules", k.Release, "klasy", netfront.Name+".ko"), 0o644, nfStripped)
	a.File("etc/klasy/modules", 0o644, []byte(filepath.Join("klasy", netfront.Name+".ko")+"\n"))
	return initramfs.WriteCached(dir, path, k.Release+"-", a)
}

// addBusybox adds busybox at dir/busybox and a link for each applet.
func addBusybox(a *initramfs.Archive, bb, dir string) error {
	data, err := os.ReadFile(bb)
	if err != nil {
		return err
	}
	a.File(dir+"/busybox", 0o755, data)
	return initramfs.AddApplets(a, bb, "/"+dir+"/busybox")
}

// domUKeys is a Domain U's own part of its initramfs: its certificate
// and key and the CA's certificate. dom0 appends it to the shared part
// when it starts the guest.
func domUKeys(f *domains.File, name string) ([]byte, error) {
	a := initramfs.New()
	if err := addAgentKeys(a, f, name); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	_, err := a.WriteTo(&b)
	return b.Bytes(), err
}

// addAgentKeys adds the files the agent of domain name is started with
// (guest/xen-agent) under etc/klasy/tls.
func addAgentKeys(a *initramfs.Archive, f *domains.File, name string) error {
	t, err := f.AgentTLS(name)
	if err != nil {
		return err
	}
	for _, p := range []struct {
		src, dst string
		mode     uint32
	}{{t.CA, "ca.crt", 0o644}, {t.Cert, "agent.crt", 0o644}, {t.Key, "agent.key", 0o600}} {
		data, err := os.ReadFile(p.src)
		if err != nil {
			return err
		}
		a.File("etc/klasy/tls/"+p.dst, p.mode, data)
	}
	return nil
}

// dom0Overlay is the initramfs segment Boot appends to Domain 0's root:
// everything of the lab that is not Debian's.
func dom0Overlay(k lab.Kernel, agentBin string, netback lab.XenModule, domUBasePath string, f *domains.File, doms []lab.XenDomain, domUMem int) (*initramfs.Archive, error) {
	a := initramfs.New()
	// The root's /bin, /lib and /sbin are links into /usr (merged
	// /usr): paths here go through none of them, or the entries would
	// replace the links.
	a.Symlink("init", "/usr/bin/busybox")
	a.File("etc/inittab", 0o644, xenDom0Inittab)
	a.File("etc/klasy/rcS", 0o755, xenDom0RcS)
	a.File("etc/klasy/domUs", 0o755, xenDomUs)
	a.File("etc/klasy/agent", 0o755, xenAgent)
	agent, err := os.ReadFile(agentBin)
	if err != nil {
		return nil, err
	}
	a.File("usr/local/bin/klasy", 0o755, agent)
	// busybox init's poweroff and reboot: the root has no init of its own.
	for _, l := range []string{"poweroff", "reboot", "halt"} {
		a.Symlink("usr/local/sbin/"+l, "/usr/bin/busybox")
	}
	mods, err := initramfs.ResolveModules(k.ModulesDir, dom0Modules)
	if err != nil {
		return nil, fmt.Errorf("Domain 0's modules: %w", err)
	}
	modRoot := filepath.Join("usr/lib/modules", k.Release)
	for _, m := range mods {
		data, err := os.ReadFile(filepath.Join(k.ModulesDir, m))
		if err != nil {
			return nil, err
		}
		a.File(filepath.Join(modRoot, m), 0o644, data)
	}
	nb, err := os.ReadFile(netback.Path)
	if err != nil {
		return nil, err
	}
	if nb, err = kmod.StripDebug(nb); err != nil {
		return nil, err
	}
	nbRel := filepath.Join("klasy", netback.Name+".ko")
	a.File(filepath.Join(modRoot, nbRel), 0o644, nb)
	a.File("etc/klasy/modules", 0o644, []byte(strings.Join(append(mods, nbRel), "\n")+"\n"))
	if err := addAgentKeys(a, f, lab.Dom0); err != nil {
		return nil, err
	}
	img, err := os.ReadFile(k.Image)
	if err != nil {
		return nil, err
	}
	a.File("var/lib/klasy/domU/vmlinuz", 0o644, img)
	base, err := os.ReadFile(domUBasePath)
	if err != nil {
		return nil, err
	}
	a.File("var/lib/klasy/domU/base.cpio", 0o644, base)
	var names []string
	for _, d := range doms[1:] {
		keys, err := domUKeys(f, d.Name)
		if err != nil {
			return nil, err
		}
		a.File("var/lib/klasy/domU/"+d.Name+"-keys.cpio", 0o600, keys)
		var cfg bytes.Buffer
		if err := xlConfig.Execute(&cfg, struct {
			lab.XenDomain
			MemMB int
		}{d, domUMem}); err != nil {
			return nil, err
		}
		a.File("etc/klasy/xl/"+d.Name+".cfg", 0o644, cfg.Bytes())
		names = append(names, d.Name)
	}
	a.File("etc/klasy/domU-names", 0o644, []byte(strings.Join(names, "\n")+"\n"))
	a.File("etc/klasy/kernel-release", 0o644, []byte(k.Release+"\n"))
	return a, nil
}

// writeDom0Initrd writes Domain 0's initramfs to path: the cached root,
// then the overlay, each segment 4-byte aligned as the kernel wants.
func writeDom0Initrd(path, root string, overlay *initramfs.Archive) error {
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	in, err := os.Open(root)
	if err != nil {
		out.Close()
		return err
	}
	n, err := io.Copy(out, in)
	in.Close()
	if err == nil && n%4 != 0 {
		_, err = out.Write(make([]byte, 4-n%4))
	}
	if err == nil {
		_, err = overlay.WriteTo(out)
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing Domain 0's initramfs: %w", err)
	}
	return nil
}

// dom0Initrd is Domain 0's initramfs in the lab's directory.
const dom0Initrd = "dom0-initrd"

// qemuArgs is QEMU's command line for the Xen lab cfg.Name, whose record
// is x and whose files are f.
func qemuArgs(cfg lab.Config, x *lab.XenRecord, k lab.Kernel, f lab.Files) []string {
	dom0Args := []string{"console=hvc0", "earlyprintk=xen", "panic=-1", "quiet", "klasy.name=" + cfg.Name,
		"klasy.ip=" + x.Domains[0].GuestAddr, "klasy.gw=10.0.2.2"}
	net := "user,id=net0"
	for _, d := range x.Domains {
		ip, _, _ := strings.Cut(d.GuestAddr, "/")
		net += fmt.Sprintf(",hostfwd=tcp:127.0.0.1:%d-%s:%d", d.HostPort, ip, agentPort)
	}
	return []string{
		"-name", "klasy-lab-" + cfg.Name,
		"-accel", "tcg", "-cpu", xenCPU, "-m", strconv.Itoa(cfg.MemMB), "-smp", strconv.Itoa(cfg.CPUs),
		"-nodefaults", "-display", "none", "-no-reboot",
		"-kernel", x.Hypervisor,
		"-append", fmt.Sprintf("console=com1 com1=115200 dom0_mem=%dM,max:%dM dom0_max_vcpus=1", x.Dom0MemMB, x.Dom0MemMB),
		"-initrd", k.Image + " " + strings.Join(dom0Args, " ") + "," + filepath.Join(f.Dir, dom0Initrd),
		"-chardev", "socket,id=con,path=" + f.ConsoleSocket + ",server=on,wait=off,logfile=" + f.ConsoleLog,
		"-serial", "chardev:con",
		// No device uses it: the agents are on the network. It names the
		// lab's directory on QEMU's command line, which is how a lab's
		// QEMU is told from others (lab.Files.AgentSocket).
		"-chardev", "socket,id=agent,path=" + f.AgentSocket + ",server=on,wait=off",
		"-qmp", "unix:" + f.QMPSocket + ",server=on,wait=off",
		"-pidfile", f.Pidfile,
		"-netdev", net,
		"-device", "e1000,netdev=net0,mac=" + x.Domains[0].MAC,
	}
}
