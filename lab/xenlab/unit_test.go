package xenlab

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/klasy/klasy/domains"
	"github.com/klasy/klasy/lab"
	"github.com/klasy/klasy/lab/initramfs"
	"github.com/klasy/klasy/lab/labboot"
)

func TestXenQemuArgs(t *testing.T) {
	files := lab.Files{Dir: "/labs/x", ConsoleLog: "/labs/x/console.log", ConsoleSocket: "/labs/x/console.sock",
		AgentSocket: "/labs/x/agent.sock", QMPSocket: "/labs/x/qmp.sock", Pidfile: "/labs/x/qemu.pid"}
	x := &lab.XenRecord{Hypervisor: "/c/xen", Dom0MemMB: 1024, Domains: []lab.XenDomain{
		{Name: lab.Dom0, GuestAddr: "10.0.2.15/24", HostPort: 40001, MAC: "52:54:00:4b:00:01"},
		{Name: "domU1", GuestAddr: "10.0.2.16/24", HostPort: 40002},
		{Name: "domU2", GuestAddr: "10.0.2.17/24", HostPort: 40003},
	}}
	args := qemuArgs(lab.Config{Name: "x", MemMB: 1664, CPUs: 1}, x, lab.Kernel{Image: "/k/vmlinuz"}, files)
	val := func(flag string) string {
		i := slices.Index(args, flag)
		if i < 0 || i+1 >= len(args) {
			t.Fatalf("no %s in %q", flag, args)
		}
		return args[i+1]
	}
	for _, c := range []struct{ flag, want string }{
		{"-kernel", "/c/xen"},
		{"-cpu", "max,-smap,-smep,-rdtscp,-xsave"},
		{"-m", "1664"},
		{"-append", "console=com1 com1=115200 dom0_mem=1024M,max:1024M dom0_max_vcpus=1"},
		{"-initrd", "/k/vmlinuz console=hvc0 earlyprintk=xen panic=-1 quiet klasy.name=x klasy.ip=10.0.2.15/24 klasy.gw=10.0.2.2,/labs/x/dom0-initrd"},
		{"-netdev", "user,id=net0,hostfwd=tcp:127.0.0.1:40001-10.0.2.15:7070,hostfwd=tcp:127.0.0.1:40002-10.0.2.16:7070,hostfwd=tcp:127.0.0.1:40003-10.0.2.17:7070"},
		{"-device", "e1000,netdev=net0,mac=52:54:00:4b:00:01"},
	} {
		if got := val(c.flag); got != c.want {
			t.Errorf("%s %q, want %q", c.flag, got, c.want)
		}
	}
	// The lab's QEMU is found by its agent chardev, as any lab's
	// (lab.Files.AgentSocket).
	if !slices.Contains(args, "socket,id=agent,path=/labs/x/agent.sock,server=on,wait=off") {
		t.Errorf("the command line does not name the lab's agent socket: %q", args)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestXenOverlay builds what Boot adds to Domain 0's root, from Debian's
// kernel: nothing goes through the root's /bin, /lib or /sbin links,
// Domain 0 loads its modules in dependency order with the rebuilt
// netback last, each domain gets its own key, and each guest its xl
// configuration.
func TestXenOverlay(t *testing.T) {
	k := needLab(t)
	dir := t.TempDir()
	doms := []lab.XenDomain{
		{Name: lab.Dom0, GuestAddr: "10.0.2.15/24", HostPort: 40001, MAC: "52:54:00:4b:00:01"},
		{Name: "domU1", GuestAddr: "10.0.2.16/24", HostPort: 40002, MAC: "00:16:3e:4b:00:01"},
		{Name: "domU2", GuestAddr: "10.0.2.17/24", HostPort: 40003, MAC: "00:16:3e:4b:00:02"},
	}
	doms[0].Modules = []lab.XenModule{{Name: "xen_netback", Path: "/m/xen-netback.ko"}}
	f, err := writeDomainsFile(dir, k, doms)
	if err != nil {
		t.Fatal(err)
	}
	if g, err := domains.Parse(filepath.Join(dir, "domains.yaml"), mustRead(t, filepath.Join(dir, "domains.yaml"))); err != nil || len(g.Domains) != 3 || g.Domains[2].Address != "127.0.0.1:40003" ||
		g.Domains[1].Vmlinux != k.Vmlinux || g.Domains[1].Headers != k.BuildDir || !slices.Equal(g.Domains[0].Modules, []string{"/m/xen-netback.ko"}) || g.Domains[1].Modules != nil {
		t.Fatalf("the lab's domains file: %+v, %v", g, err)
	}
	// Debian's own modules stand in for the rebuilt ones.
	stock := func(rel string) lab.XenModule {
		return lab.XenModule{Name: initramfs.ModName(rel), Path: filepath.Join(k.ModulesDir, rel)}
	}
	base, err := domUBase(k, labboot.Agent(t), stock("kernel/drivers/net/xen-netfront.ko"))
	if err != nil {
		t.Fatal(err)
	}
	a, err := dom0Overlay(k, labboot.Agent(t), stock("kernel/drivers/net/xen-netback/xen-netback.ko"), base, f, doms, 256)
	if err != nil {
		t.Fatal(err)
	}
	var ov bytes.Buffer
	if _, err := a.WriteTo(&ov); err != nil {
		t.Fatal(err)
	}
	entries, err := initramfs.Parse(ov.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	for p := range entries {
		for _, link := range []string{"bin", "lib", "lib64", "sbin"} {
			if p == link || strings.HasPrefix(p, link+"/") {
				t.Errorf("overlay entry %s would replace the root's /%s link", p, link)
			}
		}
	}
	mods := strings.Fields(string(entries["etc/klasy/modules"].Data))
	if len(mods) < len(dom0Modules)+1 || mods[len(mods)-1] != "klasy/xen_netback.ko" {
		t.Errorf("Domain 0's modules %v: want the stock ones, then klasy/xen_netback.ko", mods)
	}
	pos := map[string]int{}
	for i, m := range mods {
		pos[initramfs.ModName(m)] = i
		if _, ok := entries[filepath.Join("usr/lib/modules", k.Release, m)]; !ok {
			t.Errorf("module %s listed but not in the overlay", m)
		}
	}
	for _, dep := range [][2]string{{"llc", "stp"}, {"stp", "bridge"}, {"xen_privcmd", "xenfs"}} {
		if pos[dep[0]] >= pos[dep[1]] {
			t.Errorf("%s is loaded after %s, which needs it: %v", dep[0], dep[1], mods)
		}
	}
	if e := entries["etc/klasy/tls/agent.key"]; e.Mode&0o777 != 0o600 || !bytes.Contains(e.Data, []byte("PRIVATE KEY")) {
		t.Errorf("Domain 0's key: mode %o", e.Mode&0o777)
	}
	dom0Cert, _ := os.ReadFile(filepath.Join(dir, "keys", "dom0.crt"))
	if !bytes.Equal(entries["etc/klasy/tls/agent.crt"].Data, dom0Cert) {
		t.Error("Domain 0's overlay does not carry dom0's certificate")
	}
	for _, d := range doms[1:] {
		cfg := string(entries["etc/klasy/xl/"+d.Name+".cfg"].Data)
		for _, w := range []string{`name = "` + d.Name + `"`, "mac=" + d.MAC + ",bridge=xenbr0", "klasy.ip=" + d.GuestAddr, "memory = 256", `ramdisk = "/run/klasy/` + d.Name + `.cpio"`} {
			if !strings.Contains(cfg, w) {
				t.Errorf("%s's xl configuration lacks %q:\n%s", d.Name, w, cfg)
			}
		}
		keys := entries["var/lib/klasy/domU/"+d.Name+"-keys.cpio"].Data
		cert, _ := os.ReadFile(filepath.Join(dir, "keys", d.Name+".crt"))
		if !bytes.Contains(keys, cert) || bytes.Contains(keys, dom0Cert) {
			t.Errorf("%s's keys archive does not carry its own certificate only", d.Name)
		}
	}
	if got := string(entries["etc/klasy/domU-names"].Data); got != "domU1\ndomU2\n" {
		t.Errorf("domU-names %q", got)
	}

	// Domain 0's initramfs: the root as it is, padded to 4 bytes, then
	// the overlay.
	root := filepath.Join(dir, "root.cpio.gz")
	os.WriteFile(root, []byte("12345"), 0o644)
	out := filepath.Join(dir, "initrd")
	if err := writeDom0Initrd(out, root, a); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(out)
	if !bytes.HasPrefix(data, []byte("12345\x00\x00\x00")) || !bytes.Equal(data[8:], ov.Bytes()) {
		t.Errorf("Domain 0's initramfs is not the root, padding and the overlay (%d bytes)", len(data))
	}
}
