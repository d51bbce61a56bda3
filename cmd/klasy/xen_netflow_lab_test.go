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
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/klasy/klasy/cmd/klasy/internal/flowview"
	"github.com/klasy/klasy/cmd/klasy/internal/statusview"
	"github.com/klasy/klasy/internal/jaegertest"
	"github.com/klasy/klasy/internal/testenv"
	"github.com/klasy/klasy/lab"
	"github.com/klasy/klasy/lab/labboot"
	"github.com/klasy/klasy/lab/xenlab"
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
	elapsed                float64 // µs
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
				us, _ := strconv.ParseFloat(f[0], 64)
				fps[len(fps)-1].rows = append(fps[len(fps)-1].rows, flowRow{elapsed: us, domain: f[1], file: f[2], function: f[4]})
			}
		}
	}
	return fps
}

// clockBounds reads the ± µs of each domain's clock from the host's in
// trace --domains' header lines.
func clockBounds(out string) map[string]float64 {
	re := regexp.MustCompile(`(?m)^# domain (\S+): .*± ([0-9.]+) µs`)
	b := map[string]float64{}
	for _, m := range re.FindAllStringSubmatch(out, -1) {
		b[m[1]], _ = strconv.ParseFloat(m[2], 64)
	}
	return b
}

// xenLab boots a Xen lab through the command line for a test and
// returns its name, domains file and a klasy runner.
func xenLab(tb testing.TB, suffix string) (name, dfile string, klasy func(args ...string) string) {
	tb.Helper()
	_, err := exec.LookPath("qemu-system-x86_64")
	testenv.Need(tb, "lab", err)
	_, err = lab.FindKernel(lab.Debian)
	testenv.Need(tb, "lab", err)
	// xen-case, not the opt-in xen-lab: make test builds the images
	// (make xen-lab) and runs the case study; the Xen lab's own tests
	// stay with make test-xen.
	_, err = xenlab.FindImages()
	testenv.Need(tb, "xen-case", err)
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
	// The flows also go to a real tracing backend (issue 24): one trace
	// each, a hop per domain.
	jaeger := jaegertest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	domU := func(args ...string) string {
		t.Helper()
		return klasy(append([]string{"lab", "exec", "--domain", "domU1", name, "--"}, args...)...)
	}
	// What unweave must give back: each kernel's modules and kprobes.
	// Domain U mounts debugfs only when asked.
	const kernelState = "mount -t debugfs none /sys/kernel/debug 2>/dev/null; " + labboot.KernelState
	state := func() [2]string {
		return [2]string{klasy("lab", "exec", name, "--", "sh", "-c", kernelState), domU("sh", "-c", kernelState)}
	}
	before := state()

	xenInstallUDPProg(t, ctx, name)

	start := time.Now()
	t.Log(klasy("weave", "--domains", dfile, "../../examples/netflow.klasy"))
	t.Logf("weave --domains in %.1fs", time.Since(start).Seconds())
	woven, flagsWoven := true, false
	unweave := func() {
		if flagsWoven {
			flagsWoven = false
			klasy("unweave", "--domains", dfile, "netflow_flags")
		}
		if woven {
			woven = false
			klasy("unweave", "--domains", dfile, "netflow")
		}
	}
	defer unweave()

	// A TCP transfer from Domain U to the host under the weave: whole,
	// so the flags netback acted on (checksum offload) were netfront's.
	// Its records are drained before the datagrams: they fill Domain 0's
	// buffer (1 MiB a CPU) even with xflow, and the lost records would
	// leave the flows checked below short.
	tcpStart := time.Now()
	xenSendTCP(t, domU, 1<<20)
	t.Logf("1 MiB from Domain U to the host through netfront, netback, the bridge and e1000, woven, in %.1fs", time.Since(tcpStart).Seconds())
	klasy("trace", "--domains", dfile, "--json")
	lost := xenLost(t, klasy("status", "--domains", dfile, "--json"))
	t.Logf("records lost during the TCP transfer (drained after it): %v", lost)

	// Datagrams from Domain U to the host.
	xenSendDatagrams(t, domU, 5)

	perfetto := filepath.Join(t.TempDir(), "netflow.json")
	out := klasy("trace", "--domains", dfile, "--flow", "--perfetto", perfetto, "--otlp", jaeger.OTLPHTTP)
	checkXenFlowTables(t, klasy("status", "--domains", dfile, "--json"), lost)

	// The flags as the drivers read them around the ring, while flows
	// cross: a second aspect beside netflow, and datagrams again.
	klasy("weave", "--domains", dfile, "testdata/netflow_flags.klasy")
	flagsWoven = true
	xenSendDatagrams(t, domU, 5)
	checkXenFlags(t, klasy("trace", "--domains", dfile, "--json"))
	unweave()
	if after := state(); after != before {
		t.Errorf("after unweave the kernels' modules and kprobes are\n%s\n%s\nwant\n%s\n%s", after[0], after[1], before[0], before[1])
	}

	// One flow ID in both domains, in order: Domain U from its send
	// through netfront, then Domain 0 from netback to the NIC's queue.
	fps := parseFlowPaths(out)
	bounds := clockBounds(out)
	t.Logf("the domains' clocks from the host's: ± %v µs", bounds)
	slack := bounds["dom0"] + bounds["domU1"]
	crossed, swapped := 0, 0
	for _, fp := range fps {
		if fp.domains != "domU1, dom0" {
			continue
		}
		// Domain U's rows come before Domain 0's, within what the
		// domains' clocks are known to (trace's header: ± each one's
		// bound from the host's): closer, merged host times may swap.
		var fU, f0 []string
		var first0 float64
		for i, r := range fp.rows {
			if r.domain == "dom0" {
				if len(f0) == 0 {
					first0 = r.elapsed
				}
				f0 = append(f0, r.function)
				continue
			}
			if len(f0) > 0 {
				if r.elapsed-first0 > slack {
					t.Errorf("%s: row %d in domU1 %.2f µs after dom0's first, beyond the clocks' bound of %.2f µs", fp.head, i, r.elapsed-first0, slack)
				}
				swapped++
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
	t.Logf("%d flows, %d from Domain U's udp_send_skb to Domain 0's __dev_queue_xmit; %d rows of domU1 after dom0's, within the clocks' bound", len(fps), crossed, swapped)
	checkPerfetto(t, perfetto)
	checkJaegerFlows(t, jaeger, fps, "domU1", "dom0")
}

// checkJaegerFlows checks, through Jaeger's query API, that each flow
// trace --flow printed from domain from to domain to is one trace there:
// a hop per run of its rows in one domain, in the order printed, each
// the child of the one before, with an event per row.
func checkJaegerFlows(t *testing.T, j *jaegertest.Jaeger, fps []flowPath, from, to string) {
	t.Helper()
	want := map[int32]flowPath{}
	for _, fp := range fps {
		var id int32
		if _, err := fmt.Sscanf(fp.head, "flow %d", &id); err != nil {
			t.Fatalf("flow header %q: %v", fp.head, err)
		}
		want[id] = fp
	}
	ts, err := j.Wait(from, 1000, 30*time.Second, func(ts []jaegertest.Trace) bool {
		for id := range want {
			if _, ok := flowTrace(ts, id); !ok {
				return false
			}
		}
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for id, fp := range want {
		if fp.domains != from+", "+to {
			continue
		}
		tr, ok := flowTrace(ts, id)
		if !ok {
			t.Errorf("%s: no trace in Jaeger", fp.head)
			continue
		}
		var hops []string
		for i, r := range fp.rows {
			if i == 0 || r.domain != fp.rows[i-1].domain {
				hops = append(hops, r.domain)
			}
		}
		checkHops(t, tr, hops...)
		events := 0
		for _, s := range tr.Spans {
			events += s.Events
		}
		if events != len(fp.rows) {
			t.Errorf("%s: %d span events in Jaeger, want a row each (%d)", fp.head, events, len(fp.rows))
		}
		checked++
	}
	if checked == 0 {
		t.Errorf("no flow from %s to %s to look for in Jaeger", from, to)
	}
	t.Logf("%d flows from %s to %s, each one trace in Jaeger with its hops in order", checked, from, to)
}

// xenInstallUDPProg copies testdata/udp_prog.c, built static, into
// Domain U of the Xen lab name as /tmp/udp_prog.
func xenInstallUDPProg(tb testing.TB, ctx context.Context, name string) {
	tb.Helper()
	g, err := lab.Get(ctx, name)
	if err != nil {
		tb.Fatal(err)
	}
	defer g.Close()
	cU, err := g.Dial(ctx, "domU1")
	if err != nil {
		tb.Fatal(err)
	}
	defer cU.Close()
	prog := labboot.StaticProgram(tb, "testdata/udp_prog.c")
	if err := cU.WriteFile(ctx, "/tmp/udp_prog", prog, 0o755); err != nil {
		tb.Fatal(err)
	}
}

// xenSendDatagrams sends n datagrams of 200 bytes from Domain U
// (/tmp/udp_prog, run by domU) to the host and fails unless the host
// gets them all: QEMU's user network takes 10.0.2.2 to the host's
// loopback, after Domain 0's bridge and e1000.
func xenSendDatagrams(tb testing.TB, domU func(args ...string) string, n int) {
	tb.Helper()
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer pc.Close()
	got := make(chan int, 1)
	go func() {
		k := 0
		buf := make([]byte, 2048)
		for k < n {
			pc.SetReadDeadline(time.Now().Add(60 * time.Second))
			if _, _, err := pc.ReadFrom(buf); err != nil {
				break
			}
			k++
		}
		got <- k
	}()
	domU("/tmp/udp_prog", "send", "10.0.2.2", fmt.Sprint(pc.LocalAddr().(*net.UDPAddr).Port), fmt.Sprint(n), "200")
	if k := <-got; k != n {
		tb.Errorf("the host received %d of the %d datagrams Domain U sent", k, n)
	}
}

// xenSendTCP sends size random bytes from Domain U to the host over TCP
// (nc) and fails unless the host gets them whole.
func xenSendTCP(tb testing.TB, domU func(args ...string) string, size int) {
	tb.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
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
	domU("sh", "-c", fmt.Sprintf("nc 10.0.2.2 %d </tmp/data", ln.Addr().(*net.TCPAddr).Port))
	if r := <-recv; r != fmt.Sprintf("%d %s <nil>", size, sum) {
		tb.Errorf("the host received %q of the TCP transfer, want %d bytes of sha256 %s", r, size, sum)
	}
}

// xenStatus reads status --domains --json's output.
func xenStatus(tb testing.TB, statusOut string) []statusview.DomainJSON {
	tb.Helper()
	var st struct {
		Domains []statusview.DomainJSON `json:"domains"`
	}
	if err := json.Unmarshal([]byte(statusOut), &st); err != nil {
		tb.Fatalf("status --domains --json: %v\n%s", err, statusOut)
	}
	return st.Domains
}

// xenLost is the records each domain lost so far (buffer full), from
// status --domains --json's output.
func xenLost(tb testing.TB, statusOut string) map[string]uint64 {
	tb.Helper()
	lost := map[string]uint64{}
	for _, d := range xenStatus(tb, statusOut) {
		for _, n := range d.Lost {
			lost[d.Domain] += n
		}
	}
	return lost
}

// checkXenFlowTables checks status --domains --json after the traffic:
// in both domains the netflow table found IDs (Domain U's from its
// sends, Domain 0's from the ring) and dropped none, and no record was
// lost since lostBefore. It logs the counts a user reads: entries, IDs
// cut ambiguous, requests without an ID.
func checkXenFlowTables(t *testing.T, statusOut string, lostBefore map[string]uint64) {
	t.Helper()
	st := struct{ Domains []statusview.DomainJSON }{xenStatus(t, statusOut)}
	seen := map[string]bool{}
	for _, d := range st.Domains {
		seen[d.Domain] = true
		var fl *statusview.FlowJSON
		for i := range d.Flows {
			if d.Flows[i].Name == "netflow" {
				fl = &d.Flows[i]
			}
		}
		if !d.Runtime || fl == nil {
			t.Errorf("status of %s: runtime %v, flows %+v: want the netflow table", d.Domain, d.Runtime, d.Flows)
			continue
		}
		t.Logf("%s: netflow table: %d entries (limit %d), %d hits, %d misses, %d evictions, %d freed, %d ambiguous, %d dropped, %d without ID",
			d.Domain, fl.Entries, fl.Limit, fl.Hits, fl.Misses, fl.Evictions, fl.Freed, fl.Ambiguous, fl.Dropped, fl.NoID)
		if fl.Hits == 0 || fl.Dropped != 0 || fl.Entries > fl.Limit {
			t.Errorf("%s's netflow table %+v: want IDs found (hits), none dropped, entries within the limit", d.Domain, *fl)
		}
		var lost uint64
		for _, n := range d.Lost {
			lost += n
		}
		if lost != lostBefore[d.Domain] {
			t.Errorf("%s: %d records lost (buffer full) since the TCP transfer's were drained: the flows checked are short", d.Domain, lost-lostBefore[d.Domain])
		}
	}
	if !seen["dom0"] || !seen["domU1"] || len(st.Domains) != 2 {
		t.Errorf("status --domains --json has domains %v, want dom0 and domU1", seen)
	}
}

// checkXenFlags checks the records of testdata/netflow_flags.klasy in
// trace --domains --json's output, with netflow's: netback read
// flags with bits 4-15 clear (the xout_move cleared its copy: the
// drivers see only XEN_NETTXF_* bits), and netfront's request of each
// datagram that reached Domain 0 carried the datagram's flow ID there.
func checkXenFlags(t *testing.T, traceOut string) {
	t.Helper()
	var (
		dom0Flags, dirty int
		domUIDs          = map[int64]int{}  // bits 4-15 of netfront's reads: count
		sent             = map[int32]bool{} // flows started at udp_send_skb
		crossed          = map[int32]bool{} // flows seen in Domain 0
	)
	dec := json.NewDecoder(strings.NewReader(traceOut))
	var head struct {
		Domains []flowview.DomainJSON `json:"domains"`
	}
	if err := dec.Decode(&head); err != nil {
		t.Fatalf("trace --domains --json: %v", err)
	}
	for dec.More() {
		var e timeline.Event
		if err := dec.Decode(&e); err != nil {
			t.Fatalf("trace --domains --json: %v", err)
		}
		switch {
		case e.Aspect == "netflow_flags" && len(e.Values) == 1 && e.Domain == "dom0":
			dom0Flags++
			if e.Values[0].Int&0xfff0 != 0 {
				dirty++
				if dirty <= 3 {
					t.Errorf("dom0: %s (%s:%d) read flags %#x: bits 4-15 set after the xout_move", e.Function, e.File, e.Line, e.Values[0].Int)
				}
			}
		case e.Aspect == "netflow_flags" && len(e.Values) == 1 && e.Domain == "domU1":
			domUIDs[e.Values[0].Int>>4&0xfff]++
		case e.Aspect == "netflow" && e.Flow != 0 && e.Domain == "domU1" && e.Function == "udp_send_skb":
			sent[e.Flow] = true
		case e.Aspect == "netflow" && e.Flow != 0 && e.Domain == "dom0":
			crossed[e.Flow] = true
		}
	}
	n := 0
	for f := range sent {
		if !crossed[f] {
			continue
		}
		n++
		if domUIDs[int64(f)&0xfff] == 0 {
			t.Errorf("flow %d reached dom0, but no netfront read of its request's flags has %#x in bits 4-15 (read: %v)", f, f&0xfff, domUIDs)
		}
	}
	if dom0Flags == 0 || n == 0 {
		t.Errorf("%d flags reads in dom0, %d datagram flows crossed: want some of each", dom0Flags, n)
	}
	t.Logf("flags: %d reads in netback after xout, %d with bits 4-15 set; netfront's reads carried %d IDs (%d reads with none); %d datagram flows crossed, each with its ID in bits 4-15",
		dom0Flags, dirty, len(domUIDs)-min(domUIDs[0], 1), domUIDs[0], n)
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
