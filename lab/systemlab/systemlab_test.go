package systemlab

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	osexec "os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/klasy/klasy/lab"
	"github.com/klasy/klasy/lab/initramfs"
	"github.com/klasy/klasy/lab/labboot"
)

func TestMain(m *testing.M) {
	code := m.Run()
	labboot.Cleanup()
	os.Exit(code)
}

// repo is the checkout's root, from this package's directory.
const repo = "../.."

// systemLab boots a Debian system lab (systemd, Debian's headers, the
// -dbg vmlinux shared from the host) and returns a function running a
// command in it as a root login shell would (runuser -l: root's HOME,
// PATH and environment, not the agent's), failing the test on a non-zero
// exit unless ok says otherwise.
func systemLab(t *testing.T, suffix string) (*lab.Lab, func(cmd string) string, func(cmd string) (string, int)) {
	t.Helper()
	start := time.Now()
	l := labboot.Boot(t, lab.Config{Name: labboot.Name(suffix), Kernel: lab.Debian, System: true})
	t.Logf("system lab booted in %.1fs", time.Since(start).Seconds())

	try := func(cmd string) (string, int) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		var out bytes.Buffer
		code, err := l.Client().Exec(ctx, []string{"runuser", "-l", "root", "-c", cmd}, nil, &out, &out)
		if err != nil {
			t.Fatalf("in lab %s: %s: %v\n%s", l.Name(), cmd, l.Explain(err), out.String())
		}
		return out.String(), code
	}
	sh := func(cmd string) string {
		t.Helper()
		out, code := try(cmd)
		if code != 0 {
			t.Fatalf("in lab %s: %s: exit status %d\n%s", l.Name(), cmd, code, out)
		}
		return out
	}
	// The agent starts before the rest of the system: wait until systemd
	// has started everything (udev's module loading included), as a user
	// logging in would, so that the kernel's modules stay as they are.
	state, _ := try("systemctl is-system-running --wait")
	t.Logf("system %s %.1fs after QEMU started", strings.TrimSpace(state), time.Since(start).Seconds())
	return l, sh, try
}

// klasy run as root on a Debian system with no --lab: the local target,
// with Debian's own paths for the vmlinux and the headers. The same
// checks as the demo on a busybox lab: the chown's record with the
// inode and both owners, the hook's hits, and after unweave the modules
// and kprobes as they were; then klasy cover with its command run here.
func TestLocalWeaveInSystemLab(t *testing.T) {
	if testing.Short() {
		t.Skip("boots a lab")
	}
	l, sh, _ := systemLab(t, "sys")
	if got := strings.TrimSpace(sh("cat /proc/1/comm")); got != "systemd" {
		t.Fatalf("PID 1 of the system lab is %q, want systemd", got)
	}
	sh(`test -r /usr/lib/debug/boot/vmlinux-$(uname -r) && test -r /lib/modules/$(uname -r)/build/Makefile && command -v gcc make`)
	aspect, err := os.ReadFile(repo + "/examples/setattr_exec.klasy")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := l.Client().WriteFile(ctx, "/root/setattr_exec.klasy", aspect, 0o644); err != nil {
		t.Fatal(err)
	}
	before := sh(labboot.KernelState)

	start := time.Now()
	out := sh("klasy weave -v setattr_exec.klasy 2>&1")
	var said []string // without the index build's progress lines
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, "klasy: indexing ") {
			said = append(said, line)
		}
	}
	t.Logf("klasy weave on the local target took %.1fs:\n%s", time.Since(start).Seconds(), strings.Join(said, "\n"))
	woven := true
	defer func() {
		if woven {
			sh("klasy unweave --all")
		}
	}()
	ino := strings.TrimSpace(sh("touch /tmp/x && chown 1:1 /tmp/x && stat -c %i /tmp/x"))

	found := false
	for _, line := range strings.Split(strings.TrimSpace(sh("klasy trace --json")), "\n") {
		var r struct {
			Aspect   string  `json:"aspect"`
			Function string  `json:"function"`
			Comm     string  `json:"comm"`
			Values   []int64 `json:"values"`
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("klasy trace --json: %v: %s", err, line)
		}
		if r.Aspect == "setattr_exec" && r.Function == "setattr_prepare" && r.Comm == "chown" &&
			len(r.Values) == 3 && strconv.FormatInt(r.Values[0], 10) == ino && r.Values[1] == 0 && r.Values[2] == 1 {
			found = true
		}
	}
	if !found {
		t.Errorf("no record of the chown of inode %s from 0 to 1 in klasy trace:\n%s", ino, sh("klasy trace"))
	}
	status := sh("klasy status")
	if !strings.Contains(status, "setattr_exec") || !strings.Contains(status, "setattr_prepare") {
		t.Errorf("klasy status does not show the aspect and its hook:\n%s", status)
	}
	if stats := sh("klasy stats"); !strings.Contains(stats, "setattr_exec") {
		t.Errorf("klasy stats does not name the woven aspect:\n%s", stats)
	}

	sh("klasy unweave setattr_exec")
	woven = false
	if after := sh(labboot.KernelState); after != before {
		t.Errorf("after unweave the kernel's modules and kprobes differ:\nbefore:\n%s\nafter:\n%s", before, after)
	}

	// Live coverage runs its command here, on this machine.
	cover := sh("klasy cover do_mkdirat -- mkdir /tmp/klasy-cover-dir")
	// The guest has no kernel source: gcov's layout without the text.
	ran := regexp.MustCompile(`(?m)^\s*[1-9][0-9]*\*?:\s*[0-9]+:`)
	if !strings.Contains(cover, "0:Source:fs/namei.c") || !ran.MatchString(cover) {
		t.Errorf("klasy cover do_mkdirat -- mkdir shows no line of fs/namei.c that ran:\n%s", cover)
	}
	sh("test -d /tmp/klasy-cover-dir")
	if after := sh(labboot.KernelState); after != before {
		t.Errorf("after klasy cover the kernel's modules and kprobes differ:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// klasy's Debian package on a Debian system: apt installs it, systemd
// starts its agent, the host weaves through that agent with the domains
// file and keys the package made, and apt remove leaves no agent running
// and no unit.
func TestDebInSystemLab(t *testing.T) {
	if testing.Short() {
		t.Skip("boots a lab")
	}
	deb := buildDeb(t)
	data, err := os.ReadFile(deb)
	if err != nil {
		t.Fatal(err)
	}

	l, sh, try := systemLab(t, "deb")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	guestDeb := "/root/" + filepath.Base(deb)
	if err := l.Client().WriteFile(ctx, guestDeb, data, 0o644); err != nil {
		t.Fatal(err)
	}
	sh("cd /root && apt-get install -y ./" + filepath.Base(deb) + " 2>&1")
	active := ""
	for i := 0; i < 30; i++ {
		out, _ := try("systemctl is-active klasy-agent.service")
		if active = strings.TrimSpace(out); active == "active" {
			break
		}
		time.Sleep(time.Second)
	}
	if active != "active" {
		st, _ := try("systemctl status klasy-agent.service; journalctl -u klasy-agent.service | tail -20")
		t.Fatalf("after apt install, klasy-agent.service is %q, want active:\n%s", active, st)
	}
	if got := strings.TrimSpace(sh("man -w klasy 2>/dev/null || ls /usr/share/man/man1/klasy.1.gz")); got == "" {
		t.Error("the package installed no man page")
	}

	// The controller: the host, with the CA and controller key material
	// the package made, the lab kernel's image and headers.
	dir := t.TempDir()
	for _, f := range []string{"ca.crt", "controller.crt", "controller.key"} {
		b, err := l.Client().ReadFile(ctx, "/etc/klasy/"+f)
		if err != nil {
			t.Fatalf("reading /etc/klasy/%s in the lab: %v", f, err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	host := strings.TrimSpace(sh("hostname"))
	k := l.Kernel()
	dfile := filepath.Join(dir, "domains.yaml")
	yaml := fmt.Sprintf("ca: {cert: ca.crt}\ncontroller: {cert: controller.crt, key: controller.key}\ndomains:\n"+
		"  - {name: %s, address: %q, vmlinux: %q, headers: %q}\n", host, l.SystemAgentAddr(), k.Vmlinux, k.BuildDir)
	if err := os.WriteFile(dfile, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := labboot.Agent(t) // this tree's klasy, as the controller
	klasy := func(args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		cmd := osexec.Command(bin, args...)
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("klasy %s: %v\n%s", strings.Join(args, " "), err, errb.String())
		}
		return out.String()
	}
	before := sh(labboot.KernelState)
	klasy("weave", "--domains", dfile, repo+"/examples/setattr_exec.klasy")
	ino := strings.TrimSpace(sh("touch /tmp/y && chown 2:2 /tmp/y && stat -c %i /tmp/y"))
	trace := klasy("trace", "--domains", dfile)
	if !strings.Contains(trace, "setattr_prepare") || !strings.Contains(trace, " "+ino+" 0 2") {
		t.Errorf("klasy trace --domains through the packaged agent shows no record of the chown of inode %s to 2:\n%s", ino, trace)
	}
	klasy("unweave", "--domains", dfile, "setattr_exec")
	if after := sh(labboot.KernelState); after != before {
		t.Errorf("after unweave the kernel's modules and kprobes differ:\nbefore:\n%s\nafter:\n%s", before, after)
	}

	sh("apt-get remove -y klasy 2>&1")
	if out, _ := try("systemctl is-active klasy-agent.service"); strings.TrimSpace(out) == "active" {
		t.Error("klasy-agent.service still active after apt remove")
	}
	if out, code := try("pgrep -af '^/usr/bin/klasy agent --listen'"); code == 0 {
		t.Errorf("an agent still runs after apt remove:\n%s", out)
	}
	if out, _ := try("systemctl list-unit-files klasy-agent.service; ls /lib/systemd/system/klasy-agent.service /usr/bin/klasy 2>&1"); strings.Contains(out, "klasy-agent.service enabled") ||
		!strings.Contains(out, "No such file") {
		t.Errorf("the unit or the binary is left after apt remove:\n%s", out)
	}
}

// buildDeb runs make deb's script into a temporary directory and returns
// the package's path.
func buildDeb(t *testing.T) string {
	t.Helper()
	build := osexec.Command(repo + "/scripts/build-deb.sh")
	build.Env = append(os.Environ(), "KLASY_DEB_OUT="+t.TempDir())
	var buildErr bytes.Buffer
	build.Stderr = &buildErr
	out, err := build.Output()
	if err != nil {
		t.Fatalf("make deb: %v\n%s", err, buildErr.String())
	}
	return strings.TrimSpace(string(out))
}

// The package as dpkg sees it: its name and architecture, a static klasy
// (it runs on any amd64 Debian), the man page, the agent's unit with
// its TLS material in /etc/klasy, and maintainer scripts that start and
// stop it.
func TestDebPackage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the package")
	}
	deb := buildDeb(t)
	field := func(name string) string {
		t.Helper()
		out, err := osexec.Command("dpkg-deb", "-f", deb, name).Output()
		if err != nil {
			t.Fatalf("dpkg-deb -f %s %s: %v", deb, name, err)
		}
		return strings.TrimSpace(string(out))
	}
	if p, a := field("Package"), field("Architecture"); p != "klasy" || a != "amd64" {
		t.Errorf("package %s for %s, want klasy for amd64", p, a)
	}
	list, err := osexec.Command("dpkg-deb", "-c", deb).Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"./usr/bin/klasy", "./usr/share/man/man1/klasy.1.gz", "./lib/systemd/system/klasy-agent.service",
		"./usr/share/bash-completion/completions/klasy"} {
		if !strings.Contains(string(list), want+"\n") {
			t.Errorf("the package lacks %s:\n%s", want, list)
		}
	}
	dir := t.TempDir()
	if out, err := osexec.Command("dpkg-deb", "-R", deb, dir).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb -R: %v\n%s", err, out)
	}
	if err := initramfs.CheckStatic(filepath.Join(dir, "usr/bin/klasy")); err != nil {
		t.Error(err)
	}
	unit, err := os.ReadFile(filepath.Join(dir, "lib/systemd/system/klasy-agent.service"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(unit), "ExecStart=/usr/bin/klasy agent --listen :7070 --tls-ca /etc/klasy/ca.crt") {
		t.Errorf("the unit does not start the agent with /etc/klasy's TLS material:\n%s", unit)
	}
	for script, want := range map[string]string{"postinst": "systemctl restart klasy-agent.service", "prerm": "systemctl disable --now klasy-agent.service"} {
		b, err := os.ReadFile(filepath.Join(dir, "DEBIAN", script))
		if err != nil || !strings.Contains(string(b), want) {
			t.Errorf("DEBIAN/%s does not %q (%v)", script, want, err)
		}
	}
	man, err := osexec.Command("sh", "-c", "zcat "+filepath.Join(dir, "usr/share/man/man1/klasy.1.gz")).Output()
	if err != nil || !strings.Contains(string(man), `.SH "klasy weave"`) || !strings.Contains(string(man), ".TH KLASY 1") {
		t.Errorf("the man page has no klasy weave section (%v):\n%.300s", err, man)
	}
}
