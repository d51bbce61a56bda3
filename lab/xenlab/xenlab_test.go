package xenlab

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/klasy/klasy/agent"
	"github.com/klasy/klasy/debugklasy"
	"github.com/klasy/klasy/domains"
	"github.com/klasy/klasy/internal/testenv"
	"github.com/klasy/klasy/lab"
	"github.com/klasy/klasy/lab/labboot"
)

// needXen skips (or fails where KLASY_TEST_REQUIRE names xen-lab, as
// make test-xen does) without the Xen lab's images, and returns the
// plugin the lab builds its drivers with.
func needXen(t *testing.T) string {
	t.Helper()
	needLab(t)
	_, err := FindImages()
	testenv.Need(t, "xen-lab", err)
	plugin, err := filepath.Abs("../../gcc-patches/klasy.so")
	if err == nil {
		_, err = os.Stat(plugin)
	}
	if err != nil {
		err = fmt.Errorf("no klasy GCC plugin (make plugin): %w", err)
	}
	testenv.Need(t, "plugin", err)
	return plugin
}

// TestXenLab boots a Xen lab (Domain 0 and one Domain U) and checks what
// the case study needs of it: the guest's netfront connected to Domain
// 0's netback, a transfer from the guest to Domain 0 through them, both
// drivers the plugin-built ones with .debug_klasy, and the agents of
// both domains answering the lab's controller only.
func TestXenLab(t *testing.T) {
	plugin := needXen(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	var progress bytes.Buffer
	start := time.Now()
	l, err := lab.Up(ctx, lab.Config{Name: fmt.Sprintf("t%d-xen", os.Getpid()), Agent: labboot.Agent(t), Progress: &progress,
		BootTimeout: 8 * time.Minute, Xen: &Config{Plugin: plugin}, DieWithCaller: true})
	if err != nil {
		t.Fatalf("booting the Xen lab: %v\n%s", err, progress.String())
	}
	t.Logf("Xen lab up in %.1fs", time.Since(start).Seconds())
	t.Cleanup(func() {
		start := time.Now()
		if err := l.Down(context.Background()); err != nil {
			t.Errorf("lab down: %v", err)
		}
		t.Logf("Xen lab down in %.1fs", time.Since(start).Seconds())
		sts, err := lab.List() // lists a QEMU of the lab even without its state
		if err != nil {
			t.Errorf("listing labs after Down: %v", err)
		}
		for _, s := range sts {
			if s.Name == l.Name() && s.State == "running" {
				t.Errorf("QEMU (pid %d) still runs after Down", s.PID)
			}
		}
	})
	doms := l.Domains()
	if len(doms) != 2 || doms[0].Name != lab.Dom0 || doms[1].Name != "domU1" {
		t.Fatalf("Domains() = %+v, want dom0 and domU1", doms)
	}
	clients := map[string]*agent.Client{}
	for _, d := range doms {
		c, err := l.Dial(ctx, d.Name)
		if err != nil {
			t.Fatalf("dialing %s: %v", d.Name, err)
		}
		t.Cleanup(func() { c.Close() })
		clients[d.Name] = c
	}
	sh := func(t *testing.T, dom, script string) string {
		t.Helper()
		var out, errb bytes.Buffer
		code, err := clients[dom].Exec(ctx, []string{"sh", "-c", script}, nil, &out, &errb)
		if err != nil || code != 0 {
			t.Fatalf("%s: sh -c %q: exit %d, %v\n%s%s", dom, script, code, err, out.String(), errb.String())
		}
		return out.String()
	}

	t.Run("status", func(t *testing.T) {
		sts, err := lab.List()
		if err != nil {
			t.Fatal(err)
		}
		var st *lab.Status
		for i := range sts {
			if sts[i].Name == l.Name() {
				st = &sts[i]
			}
		}
		if st == nil || st.State != "running" || !strings.HasPrefix(st.Xen, "4.17") || len(st.Domains) != 2 || st.DomainsFile != l.DomainsFile() {
			t.Fatalf("status of the Xen lab = %+v", st)
		}
		// Through Get, as other processes reach it: the client is dom0's.
		g, err := lab.Get(ctx, l.Name())
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		res, err := g.Client().Run(ctx, []string{"xl", "list"}, nil)
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("xl list in Domain 0: %v %s", err, res.Stderr)
		}
		if !strings.Contains(string(res.Stdout), "Domain-0") || !strings.Contains(string(res.Stdout), "domU1") {
			t.Errorf("xl list does not show Domain-0 and domU1:\n%s", res.Stdout)
		}
	})

	// The drivers each domain runs are the ones built with the plugin:
	// out of tree (taint O), of the host's build (build-id), not
	// Debian's; and their .debug_klasy has the transmit request's flags.
	t.Run("modules", func(t *testing.T) {
		for _, d := range doms {
			if len(d.Modules) != 1 {
				t.Fatalf("%s runs %d plugin-built modules, want 1", d.Name, len(d.Modules))
			}
			m := d.Modules[0]
			taint, err := clients[d.Name].ReadFile(ctx, "/sys/module/"+m.Name+"/taint")
			if err != nil {
				t.Fatalf("%s: %s is not loaded: %v", d.Name, m.Name, err)
			}
			if !strings.Contains(string(taint), "O") {
				t.Errorf("%s: %s taint %q lacks O (out of tree)", d.Name, m.Name, taint)
			}
			note, err := clients[d.Name].ReadFile(ctx, "/sys/module/"+m.Name+"/notes/.note.gnu.build-id")
			if err != nil {
				t.Fatal(err)
			}
			if got := hex.EncodeToString(note[len(note)-20:]); got != m.BuildID || m.BuildID == "" {
				t.Errorf("%s runs %s build %s, the host built %s", d.Name, m.Name, got, m.BuildID)
			}
			stock, err := os.ReadFile(filepath.Join(d.Kernel.ModulesDir, "kernel/drivers/net", map[string]string{
				"xen_netback": "xen-netback/xen-netback.ko", "xen_netfront": "xen-netfront.ko"}[m.Name]))
			if err != nil {
				t.Fatal(err)
			}
			if buildID(stock) == m.BuildID {
				t.Errorf("%s runs Debian's own %s", d.Name, m.Name)
			}
			tab, err := debugklasy.Open(m.Path)
			if err != nil {
				t.Fatalf("%s: %v", m.Path, err)
			}
			n := 0
			for _, a := range tab.Accesses {
				if a.Struct == "xen_netif_tx_request" && a.Member == "flags" {
					n++
				}
			}
			if n == 0 {
				t.Errorf("%s has no access of xen_netif_tx_request.flags in .debug_klasy", m.Path)
			}
			t.Logf("%s: %s build %s, %d accesses of xen_netif_tx_request.flags", d.Name, m.Name, m.BuildID[:12], n)
		}
	})

	// netfront connected to netback (xenbus state 4), and 20 MiB sent
	// from the guest to Domain 0 arrive whole, through the guest's vif.
	t.Run("transfer", func(t *testing.T) {
		if st := strings.TrimSpace(sh(t, lab.Dom0, "xenstore-read /local/domain/0/backend/vif/$(xl domid domU1)/0/state")); st != "4" {
			t.Errorf("netback's state for domU1's vif is %s, want 4 (connected)", st)
		}
		vif := "/sys/class/net/vif$(xl domid domU1).0/statistics/rx_bytes"
		before, _ := strconv.ParseInt(strings.TrimSpace(sh(t, lab.Dom0, "cat "+vif)), 10, 64)
		const size = 20 << 20
		sum := strings.Fields(sh(t, "domU1", fmt.Sprintf("head -c %d /dev/urandom >/tmp/data && sha256sum /tmp/data", size)))[0]
		// nc ends when the sender closes the connection; its input
		// (nc would end at its end of file) stays open until then.
		stdin, hold := io.Pipe()
		defer hold.Close()
		recv := make(chan error, 1)
		go func() {
			code, err := clients[lab.Dom0].Exec(ctx, []string{"sh", "-c", "busybox nc -l -p 5001 >/tmp/recv"}, stdin, io.Discard, io.Discard)
			if err == nil && code != 0 {
				err = fmt.Errorf("exit status %d", code)
			}
			recv <- err
		}()
		sh(t, lab.Dom0, "i=0; while ! ss -ltn | grep -q ':5001 '; do sleep 0.1; i=$((i+1)); [ $i -lt 100 ] || exit 1; done")
		start := time.Now()
		sh(t, "domU1", "nc 10.0.2.15 5001 </tmp/data")
		select {
		case err := <-recv:
			if err != nil {
				t.Fatalf("receiving in Domain 0: %v", err)
			}
		case <-time.After(2 * time.Minute):
			t.Fatal("Domain 0 did not receive the transfer's end within 2 minutes")
		}
		took := time.Since(start)
		got := strings.Fields(sh(t, lab.Dom0, "wc -c </tmp/recv; sha256sum /tmp/recv; rm /tmp/recv"))
		if len(got) < 2 || got[0] != strconv.Itoa(size) || got[1] != sum {
			t.Errorf("Domain 0 received %v, want %d bytes of sha256 %s", got, size, sum)
		}
		after, _ := strconv.ParseInt(strings.TrimSpace(sh(t, lab.Dom0, "cat "+vif)), 10, 64)
		if after-before < size {
			t.Errorf("domU1's vif in Domain 0 received %d bytes during the transfer, want at least %d", after-before, size)
		}
		t.Logf("20 MiB from domU1 to Domain 0 through netfront and netback in %.1fs (%.1f MB/s)", took.Seconds(), float64(size)/took.Seconds()/1e6)
	})

	// The agents answer the lab's controller in both domains, with what
	// the weaver uses: modules, files, streams.
	t.Run("agents", func(t *testing.T) {
		for _, d := range doms {
			c := clients[d.Name]
			ms, err := c.Modules(ctx)
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, m := range ms {
				found = found || m.Name == d.Modules[0].Name
			}
			if !found {
				t.Errorf("%s: Modules() lacks %s: %v", d.Name, d.Modules[0].Name, ms)
			}
			host, err := c.ReadFile(ctx, "/proc/sys/kernel/hostname")
			if err != nil || !strings.Contains(string(host), d.Name) {
				t.Errorf("%s: hostname %q, %v", d.Name, host, err)
			}
			// 20 MiB back through the agent, twice: whole, or TLS
			// fails the record (the lab's CPU model once damaged
			// register state across domain switches; see xenCPU).
			want := strings.Fields(sh(t, d.Name, "head -c 20971520 /dev/urandom >/tmp/back && sha256sum /tmp/back"))[0]
			for i := 0; i < 2; i++ {
				h := sha256.New()
				code, err := c.Exec(ctx, []string{"cat", "/tmp/back"}, nil, h, io.Discard)
				if got := hex.EncodeToString(h.Sum(nil)); err != nil || code != 0 || got != want {
					t.Errorf("%s: reading 20 MiB back through the agent: exit %d, %v, sha256 %s, want %s", d.Name, code, err, got, want)
				}
			}
			var streamed []byte
			if err := c.Stream(ctx, "/proc/version", func(b []byte) error { streamed = append(streamed, b...); return nil }); err != nil || !strings.Contains(string(streamed), d.Kernel.Release) {
				t.Errorf("%s: Stream /proc/version = %q, %v", d.Name, streamed, err)
			}
		}
	})

	// A client that is not the lab's controller is refused by the agent
	// of every domain before its request is read, the agent logs it, and
	// its request changes nothing.
	t.Run("refused", func(t *testing.T) {
		f, err := domains.Load(l.DomainsFile())
		if err != nil {
			t.Fatal(err)
		}
		// Another domains file, with its own CA.
		dir := t.TempDir()
		otherText := "ca: {cert: ca.crt, key: ca.key}\ncontroller: {cert: c.crt, key: c.key}\ndomains:\n  - {name: dom0, address: '127.0.0.1:1', cert: d.crt, key: d.key}\n"
		other, err := domains.Parse(filepath.Join(dir, "other.yaml"), []byte(otherText))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := domains.GenerateKeys(other); err != nil {
			t.Fatal(err)
		}
		pair := func(cert, key string) *tls.Certificate {
			c, err := tls.LoadX509KeyPair(cert, key)
			if err != nil {
				t.Fatal(err)
			}
			return &c
		}
		domU1, _ := f.Domain("domU1")
		for _, d := range doms {
			good, err := f.ClientTLS(d.Name)
			if err != nil {
				t.Fatal(err)
			}
			logBefore := refusedLines(t, ctx, clients[d.Name])
			for i, tc := range []struct {
				name string
				cert *tls.Certificate
			}{
				{"no certificate", nil},
				{"another domains file's controller", pair(other.Controller.Cert, other.Controller.Key)},
				{"domU1's own certificate", pair(domU1.Cert, domU1.Key)},
			} {
				cfg := good.Clone()
				cfg.Certificates = nil
				if cert := tc.cert; cert != nil {
					cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil }
				}
				target := fmt.Sprintf("/tmp/refused-%d", i)
				conn, err := tls.Dial("tcp", d.AgentAddr, cfg)
				if err != nil {
					t.Fatalf("%s, %s: connecting: %v", d.Name, tc.name, err)
				}
				c := agent.NewClient(conn)
				werr := c.WriteFile(ctx, target, []byte("x"), 0o644)
				c.Close()
				if werr == nil {
					t.Errorf("%s answered a request with %s", d.Name, tc.name)
				}
				if _, err := clients[d.Name].ReadFile(ctx, target); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("%s: the refused request (%s) wrote %s: %v", d.Name, tc.name, target, err)
				}
			}
			var after int
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
				if after = refusedLines(t, ctx, clients[d.Name]); after >= logBefore+3 {
					break
				}
			}
			if after != logBefore+3 {
				t.Errorf("%s's agent logged %d refused connections, want 3", d.Name, after-logBefore)
			}
		}
	})
}

// refusedLines counts the refused connections a domain's agent logged.
func refusedLines(t *testing.T, ctx context.Context, c *agent.Client) int {
	t.Helper()
	log, err := c.ReadFile(ctx, "/var/log/klasy-agent.log")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(log), "klasy agent: refused a connection from ")
}
