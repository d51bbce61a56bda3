package main

// A flow across two kernels (issue 11, point 5): two `built` labs on the
// labs' LAN, examples/netflow_lan.klasy woven into each. UDP datagrams
// sent from lab A start flows; their IDs travel in the IPv4
// Identification field; lab B picks them up in UDP's receive and follows
// them to the socket read. One flow ID must appear in both kernels'
// records: A's send-side records, then B's receive-side ones.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klasy/klasy/cmd/klasy/internal/statusview"
	"github.com/klasy/klasy/internal/jaegertest"
	"github.com/klasy/klasy/lab"
	"github.com/klasy/klasy/lab/labboot"
)

type flowRecord struct {
	caseRecord
	InlinedIn string `json:"inlined_in"`
	Flow      int64  `json:"flow"`
}

func TestFlowAcrossTwoLabs(t *testing.T) {
	if testing.Short() {
		t.Skip("boots two labs")
	}
	labboot.Need(t, lab.Built)
	agentBin := labboot.Agent(t)
	var labs [2]*lab.Lab
	var errs [2]error
	var wg sync.WaitGroup
	for i, suffix := range []string{"flowa", "flowb"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			labs[i], errs[i] = lab.Up(ctx, lab.Config{Name: labboot.Name(suffix), Kernel: lab.Built, Agent: agentBin, LAN: true, DieWithCaller: true})
		}()
	}
	wg.Wait()
	for i, l := range labs {
		if l != nil {
			t.Cleanup(func() { l.Down(context.Background()) })
		}
		if errs[i] != nil {
			t.Fatalf("booting lab %d: %v", i, errs[i])
		}
	}
	a, b := labs[0], labs[1]
	bAddr, _, _ := strings.Cut(b.LANAddr(), "/")
	prog := labboot.StaticProgram(t, "testdata/udp_prog.c")
	labboot.Install(t, a, "/tmp/udp_prog", prog)
	labboot.Install(t, b, "/tmp/udp_prog", prog)

	klasy := func(args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		if err := run(&stdio{In: strings.NewReader(""), Out: &out, Err: &errb}, args); err != nil {
			t.Fatalf("klasy %s: %v\n%s", strings.Join(args, " "), err, errb.String())
		}
		return out.String()
	}
	guest := func(l *lab.Lab, args ...string) string {
		t.Helper()
		return klasy(append([]string{"lab", "exec", l.Name(), "--"}, args...)...)
	}
	const aspect = "../../examples/netflow_lan.klasy"
	const before, flows = 3, 5
	state := func() (s [2]string) {
		for i, l := range []*lab.Lab{a, b} {
			s[i] = guest(l, "sh", "-c", labboot.KernelState)
		}
		return s
	}
	unwoven := state()
	woven := map[*lab.Lab]bool{}
	weave := func(l *lab.Lab) {
		t.Log(klasy("weave", "--lab", l.Name(), aspect))
		woven[l] = true
		t.Cleanup(func() {
			if woven[l] {
				klasy("unweave", "--lab", l.Name(), "netflow_lan")
			}
		})
	}
	// Datagrams that are no flow: sent before A is woven, they carry ID
	// 0 (DF, a socket that is not connected), which B's xout counts and
	// registers nothing for.
	weave(b)
	guest(a, "/tmp/udp_prog", "send", bAddr, "9001", fmt.Sprint(before), "100")
	weave(a)
	// No warm-up: a new weave's kprobes run as int3, whose handler the
	// kernel enters as an NMI, and the flow table registers there too.
	klasy("trace", "--lab", b.Name(), "--json") // the datagrams before
	guest(b, "sh", "-c", fmt.Sprintf("/tmp/udp_prog recv 9000 %d 60 >/tmp/recv.out 2>&1 </dev/null &", flows))
	time.Sleep(time.Second)
	// The flows: datagrams small enough to stay atomic (DF, one frame).
	guest(a, "/tmp/udp_prog", "send", bAddr, "9000", fmt.Sprint(flows), "200")
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(guest(b, "cat", "/tmp/recv.out"), "got") && time.Now().Before(deadline) {
		time.Sleep(500 * time.Millisecond)
	}
	if got := strings.TrimSpace(guest(b, "cat", "/tmp/recv.out")); got != fmt.Sprintf("got %d", flows) {
		t.Fatalf("receiver in lab B: %q, want got %d", got, flows)
	}
	trace := func(l *lab.Lab) []flowRecord {
		var rs []flowRecord
		sc := bufio.NewScanner(strings.NewReader(klasy("trace", "--lab", l.Name(), "--json")))
		for sc.Scan() {
			var r flowRecord
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				t.Fatalf("%v: %s", err, sc.Text())
			}
			rs = append(rs, r)
		}
		return rs
	}
	ra, rb := trace(a), trace(b)
	t.Logf("lab A: %d records, lab B: %d records", len(ra), len(rb))
	status := func(l *lab.Lab) statusview.JSON {
		var st statusview.JSON
		if err := json.Unmarshal([]byte(klasy("status", "--lab", l.Name(), "--json")), &st); err != nil {
			t.Fatal(err)
		}
		return st
	}
	sa, sb := status(a), status(b)
	t.Logf("lab A flows %+v\nlab B flows %+v", sa.Flows, sb.Flows)
	if len(sa.Flows) != 1 || sa.Flows[0].Dropped != 0 || sa.Flows[0].Entries+sa.Flows[0].Freed == 0 {
		t.Errorf("lab A's flow table %+v: want the flows registered and none dropped", sa.Flows)
	}
	if len(sb.Flows) != 1 || sb.Flows[0].NoID < before {
		t.Errorf("lab B counts %+v datagrams without an ID, want at least the %d sent from lab A without a flow", sb.Flows, before)
	}

	// Per flow ID, in trace order: where its records are in each kernel.
	paths := func(rs []flowRecord, who string) map[int64][]flowRecord {
		m := map[int64][]flowRecord{}
		for _, r := range rs {
			if r.Flow == 0 {
				t.Errorf("lab %s: a record without a flow ID at %s (%s:%d): the advice logs flow members only", who, r.Function, r.File, r.Line)
				continue
			}
			m[r.Flow] = append(m[r.Flow], r)
		}
		return m
	}
	pa, pb := paths(ra, "A"), paths(rb, "B")
	crossed := 0
	for id, recs := range pb {
		sent, ok := pa[id&0xffff]
		if !ok {
			for aid, r := range pa {
				if aid&0xffff == id {
					sent, ok = r, true
				}
			}
		}
		if !ok {
			t.Errorf("flow %d in lab B's records was never sent from lab A (A's flows: %d)", id, len(pa))
			continue
		}
		// A's records are the send side, from the socket to the driver.
		if first := sent[0]; first.Function != "udp_send_skb" && !strings.HasSuffix(first.File, "udp.c") {
			t.Errorf("flow %d starts in lab A at %s (%s), want udp_send_skb", id, first.Function, first.File)
		}
		if !slicesContainsFile(sent, "e1000_main.c") || !slicesContainsFile(sent, "ip_output.c") {
			t.Errorf("flow %d in lab A does not pass ip_output.c and e1000_main.c: %v", id, funcs(sent))
		}
		// B's are the receive side, from the socket UDP's lookup found
		// (the xout reads the ID there) to the socket read.
		if fs := funcs(recs); fs[0] != "udp_queue_rcv_skb" || !slices.Contains(fs, "udp_recvmsg") {
			t.Errorf("flow %d in lab B does not go from udp_queue_rcv_skb to udp_recvmsg: %v", id, fs)
		}
		if crossed == 0 {
			t.Logf("flow %d: lab A %v\n  lab B %v", id, funcs(sent), funcs(recs))
		}
		crossed++
	}
	if crossed < flows {
		t.Errorf("%d flows crossed from lab A to lab B, want %d (A's flows %d, B's %d)", crossed, flows, len(pa), len(pb))
	}

	for _, l := range []*lab.Lab{a, b} {
		woven[l] = false
		klasy("unweave", "--lab", l.Name(), "netflow_lan")
	}
	if after := state(); after != unwoven {
		t.Errorf("after unweave, modules and kprobes:\n%q\nbefore:\n%q", after, unwoven)
	}

	// The same datagrams with one weave of both labs (--domains: one ID
	// space) exported to a tracing backend (issue 24): each flow from A
	// to B is one trace in Jaeger, a hop in each lab, in order.
	jaeger := jaegertest.Start(t)
	dfile := filepath.Join(t.TempDir(), "labs.yaml")
	if err := os.WriteFile(dfile, []byte("domains:\n  - name: a\n    lab: "+a.Name()+"\n  - name: b\n    lab: "+b.Name()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	klasy("weave", "--domains", dfile, aspect)
	domainsWoven := true
	defer func() {
		if domainsWoven {
			klasy("unweave", "--domains", dfile, "netflow_lan")
		}
	}()
	klasy("trace", "--domains", dfile) // what came before
	guest(b, "sh", "-c", fmt.Sprintf("/tmp/udp_prog recv 9002 %d 60 >/tmp/recv2.out 2>&1 </dev/null &", flows))
	time.Sleep(time.Second)
	guest(a, "/tmp/udp_prog", "send", bAddr, "9002", fmt.Sprint(flows), "200")
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(guest(b, "cat", "/tmp/recv2.out"), "got") && time.Now().Before(deadline); {
		time.Sleep(500 * time.Millisecond)
	}
	out := klasy("trace", "--domains", dfile, "--flow", "--otlp", jaeger.OTLPHTTP)
	checkJaegerFlows(t, jaeger, parseFlowPaths(out), "a", "b")
	domainsWoven = false
	klasy("unweave", "--domains", dfile, "netflow_lan")
}

func slicesContainsFile(rs []flowRecord, file string) bool {
	for _, r := range rs {
		if strings.HasSuffix(r.File, file) {
			return true
		}
	}
	return false
}

// funcs are the functions of rs's records in order, each record's
// out-of-line function where its code was inlined.
func funcs(rs []flowRecord) []string {
	var out []string
	for _, r := range rs {
		f := r.Function
		if r.InlinedIn != "" {
			f = r.InlinedIn
		}
		if len(out) == 0 || out[len(out)-1] != f {
			out = append(out, f)
		}
	}
	return out
}
