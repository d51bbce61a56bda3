package main

// XenLASY's case study (issue 12, point 4): examples/netflow.klasy woven
// into a Xen lab's Domain U and Domain 0 with one weave --domains; a
// datagram sent from Domain U to the host (10.0.2.2, through Domain 0's
// bridge and NIC) is followed by one flow ID from Domain U's send to
// Domain 0's transmit queue.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/klasy/klasy/internal/labboot"
	"github.com/klasy/klasy/internal/testenv"
	"github.com/klasy/klasy/lab"
	"github.com/klasy/klasy/timeline"
)

// flowPath is one flow of trace --domains --flow's text: its header's
// domains and its rows.
type flowPath struct {
	head    string
	domains string
	rows    []flowRow
}

type flowRow struct {
	domain, file, function string
}

// parseFlowPaths reads the Table 6.8 blocks trace --flow prints.
func parseFlowPaths(out string) []flowPath {
	var fps []flowPath
	for _, line := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(line, "flow "):
			_, after, _ := strings.Cut(line, " in ")
			doms, _, _ := strings.Cut(after, " over ")
			fps = append(fps, flowPath{head: line, domains: doms})
		case strings.HasPrefix(line, "  ") && len(fps) > 0 && !strings.Contains(line, "ELAPSED"):
			f := strings.Fields(line)
			if len(f) >= 5 {
				fps[len(fps)-1].rows = append(fps[len(fps)-1].rows, flowRow{domain: f[1], file: f[2], function: f[4]})
			}
		}
	}
	return fps
}

// xenLab boots a Xen lab through the command line for a test and
// returns its name, domains file and a klasy runner.
func xenLab(tb testing.TB, suffix string) (name, dfile string, klasy func(args ...string) string) {
	tb.Helper()
	_, err := exec.LookPath("qemu-system-x86_64")
	testenv.Need(tb, "lab", err)
	_, err = lab.FindKernel(lab.Debian)
	testenv.Need(tb, "lab", err)
	_, err = lab.FindXenImages()
	testenv.Need(tb, "xen-lab", err)
	plugin, _ := filepath.Abs("../../gcc-patches/klasy.so")
	if _, err := os.Stat(plugin); err != nil {
		testenv.Need(tb, "plugin", fmt.Errorf("no klasy GCC plugin (make plugin): %w", err))
	}
	tb.Setenv("KLASY_LAB_AGENT", labboot.Agent(tb))
	klasy = func(args ...string) string {
		tb.Helper()
		var out, errb bytes.Buffer
		if err := run(&stdio{In: strings.NewReader(""), Out: &out, Err: &errb}, args); err != nil {
			tb.Fatalf("klasy %s: %v\n%s", strings.Join(args, " "), err, errb.String())
		}
		return out.String()
	}
	name = labboot.Name(suffix)
	start := time.Now()
	klasy("lab", "up", "--xen", "--plugin", plugin, name)
	tb.Cleanup(func() {
		run(&stdio{In: strings.NewReader(""), Out: io.Discard, Err: io.Discard}, []string{"lab", "down", name})
	})
	tb.Logf("Xen lab up in %.1fs", time.Since(start).Seconds())
	var st lab.Status
	if err := json.Unmarshal([]byte(klasy("lab", "status", "--json", name)), &st); err != nil {
		tb.Fatal(err)
	}
	return name, st.DomainsFile, klasy
}

func TestXenNetflow(t *testing.T) {
	if testing.Short() {
		t.Skip("boots a Xen lab")
	}
	name, dfile, klasy := xenLab(t, "xnf")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	domU := func(args ...string) string {
		t.Helper()
		return klasy(append([]string{"lab", "exec", "--domain", "domU1", name, "--"}, args...)...)
	}
	// What unweave must give back: each kernel's modules and kprobes.
	const kernelState = "cut -d' ' -f1 /proc/modules | sort; mount -t debugfs none /sys/kernel/debug 2>/dev/null; cat /sys/kernel/debug/kprobes/list"
	state := func() [2]string {
		return [2]string{klasy("lab", "exec", name, "--", "sh", "-c", kernelState), domU("sh", "-c", kernelState)}
	}
	before := state()

	g, err := lab.Get(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	cU, err := g.Dial(ctx, "domU1")
	if err != nil {
		t.Fatal(err)
	}
	defer cU.Close()
	prog := labboot.StaticProgram(t, "testdata/udp_prog.c")
	if err := cU.WriteFile(ctx, "/tmp/udp_prog", prog, 0o755); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	t.Log(klasy("weave", "--domains", dfile, "../../examples/netflow.klasy"))
	t.Logf("weave --domains in %.1fs", time.Since(start).Seconds())
	woven := true
	unweave := func() {
		if woven {
			woven = false
			klasy("unweave", "--domains", dfile, "netflow")
		}
	}
	defer unweave()

	// Datagrams from Domain U to the host: QEMU's user network takes
	// 10.0.2.2 to the host's loopback, after Domain 0's bridge and e1000.
	const datagrams = 5
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	got := make(chan int, 1)
	go func() {
		n := 0
		buf := make([]byte, 2048)
		for n < datagrams {
			pc.SetReadDeadline(time.Now().Add(60 * time.Second))
			if _, _, err := pc.ReadFrom(buf); err != nil {
				break
			}
			n++
		}
		got <- n
	}()
	domU("/tmp/udp_prog", "send", "10.0.2.2", fmt.Sprint(pc.LocalAddr().(*net.UDPAddr).Port), fmt.Sprint(datagrams), "200")
	if n := <-got; n != datagrams {
		t.Errorf("the host received %d of the %d datagrams Domain U sent", n, datagrams)
	}

	// A TCP transfer from Domain U to the host under the weave: whole,
	// so the flags netback acted on (checksum offload) were netfront's.
	const size = 1 << 20
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	recv := make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			recv <- err.Error()
			return
		}
		defer c.Close()
		c.SetReadDeadline(time.Now().Add(3 * time.Minute))
		h := sha256.New()
		n, err := io.Copy(h, c)
		recv <- fmt.Sprintf("%d %s %v", n, hex.EncodeToString(h.Sum(nil)), err)
	}()
	sum := strings.Fields(domU("sh", "-c", fmt.Sprintf("head -c %d /dev/urandom >/tmp/data && sha256sum /tmp/data", size)))[0]
	tcpStart := time.Now()
	domU("sh", "-c", fmt.Sprintf("nc 10.0.2.2 %d </tmp/data", ln.Addr().(*net.TCPAddr).Port))
	if r := <-recv; r != fmt.Sprintf("%d %s <nil>", size, sum) {
		t.Errorf("the host received %q of the TCP transfer, want %d bytes of sha256 %s", r, size, sum)
	}
	t.Logf("1 MiB from Domain U to the host through netfront, netback, the bridge and e1000, woven, in %.1fs", time.Since(tcpStart).Seconds())

	perfetto := filepath.Join(t.TempDir(), "netflow.json")
	out := klasy("trace", "--domains", dfile, "--flow", "--perfetto", perfetto)
	var st []struct {
		Domain string     `json:"domain"`
		Flows  []flowJSON `json:"flows"`
	}
	if err := json.Unmarshal([]byte(klasy("status", "--domains", dfile, "--json")), &st); err == nil {
		t.Logf("flow tables: %+v", st)
	}
	unweave()
	if after := state(); after != before {
		t.Errorf("after unweave the kernels' modules and kprobes are\n%s\n%s\nwant\n%s\n%s", after[0], after[1], before[0], before[1])
	}

	// One flow ID in both domains, in order: Domain U from its send
	// through netfront, then Domain 0 from netback to the NIC's queue.
	fps := parseFlowPaths(out)
	crossed := 0
	for _, fp := range fps {
		if fp.domains != "domU1, dom0" {
			continue
		}
		var fU, f0 []string
		for i, r := range fp.rows {
			if r.domain == "dom0" {
				f0 = append(f0, r.function)
				continue
			}
			if len(f0) > 0 {
				t.Errorf("%s: row %d in domU1 after dom0's", fp.head, i)
			}
			fU = append(fU, r.function)
		}
		if fU[0] != "udp_send_skb" && fU[0] != "__dev_queue_xmit" {
			t.Errorf("%s starts in %s, want udp_send_skb or __dev_queue_xmit", fp.head, fU[0])
		}
		if !slices.Contains(fU, "xennet_start_xmit") || !slices.ContainsFunc(f0, func(f string) bool { return strings.HasPrefix(f, "xenvif_") }) {
			t.Errorf("%s does not pass xennet_start_xmit and netback: %v / %v", fp.head, fU, f0)
		}
		if fU[0] == "udp_send_skb" && slices.Contains(f0, "__dev_queue_xmit") {
			if crossed == 0 {
				t.Logf("a datagram's path (Table 6.8):\n%s", blockOf(out, fp.head))
			}
			crossed++
		}
	}
	if crossed == 0 {
		t.Errorf("no flow from udp_send_skb in domU1 to __dev_queue_xmit in dom0 among %d flows:\n%s", len(fps), out)
	}
	t.Logf("%d flows, %d from Domain U's udp_send_skb to Domain 0's __dev_queue_xmit", len(fps), crossed)
	checkPerfetto(t, perfetto)
}

// blockOf is the text of the flow block starting with head.
func blockOf(out, head string) string {
	i := strings.Index(out, head)
	if i < 0 {
		return ""
	}
	b, _, _ := strings.Cut(out[i:], "\n\n")
	return b
}

// checkPerfetto checks the structure of trace --perfetto's file of the
// two domains: a named process per domain, slices in both, and flow
// arrows.
func checkPerfetto(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		TraceEvents []timeline.TraceEvent `json:"traceEvents"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	procs := map[int]string{}
	slicesOf := map[string]int{}
	arrows := 0
	for _, e := range f.TraceEvents {
		switch {
		case e.Ph == "M" && e.Name == "process_name":
			procs[e.PID], _ = e.Args["name"].(string)
		case e.Ph == "X":
			slicesOf[fmt.Sprint(e.Args["domain"])]++
			if e.BindID != 0 && e.FlowOut {
				arrows++
			}
		}
	}
	names := []string{}
	for _, n := range procs {
		names = append(names, n)
	}
	slices.Sort(names)
	if strings.Join(names, ",") != "dom0,domU1" || slicesOf["dom0"] == 0 || slicesOf["domU1"] == 0 || arrows == 0 {
		t.Errorf("%s: processes %v, slices %v, %d flow arrows: want dom0 and domU1, slices in both, arrows", path, names, slicesOf, arrows)
	}
	t.Logf("perfetto: %d events, slices %v, %d flow arrows", len(f.TraceEvents), slicesOf, arrows)
}
