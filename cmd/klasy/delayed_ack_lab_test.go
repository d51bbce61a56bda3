package main

// DKM's delayed-ACK experiment (issue 13) on Debian's 6.1: two labs on
// one LAN, a TCP transfer from one to the other before, during and after
// examples/delayed_ack.klasy is woven into the receiver, through the
// commands a user types. The receiver's own counters show it: TcpExt
// DelayedACKs (ACKs sent by the delayed-ACK timer) grows before, stays
// still while tcp_send_delayed_ack is replaced by an immediate ACK, and
// grows again after the unweave; Tcp OutSegs against InSegs gives the
// ACKs per segment received.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klasy/klasy/lab"
	"github.com/klasy/klasy/lab/labboot"
)

// tcpCounters are the receiver's TCP counters of interest.
type tcpCounters struct {
	InSegs, OutSegs, DelayedACKs int64
}

func (c tcpCounters) sub(d tcpCounters) tcpCounters {
	return tcpCounters{c.InSegs - d.InSegs, c.OutSegs - d.OutSegs, c.DelayedACKs - d.DelayedACKs}
}

// parseTCPCounters reads Tcp InSegs/OutSegs from /proc/net/snmp and
// TcpExt DelayedACKs from /proc/net/netstat, given one after the other:
// each protocol is a header line of names and a line of values.
func parseTCPCounters(text string) (tcpCounters, error) {
	vals := map[string]int64{}
	lines := strings.Split(text, "\n")
	for i := 0; i+1 < len(lines); i++ {
		names, values := strings.Fields(lines[i]), strings.Fields(lines[i+1])
		if len(names) < 2 || len(names) != len(values) || names[0] != values[0] || (names[0] != "Tcp:" && names[0] != "TcpExt:") {
			continue
		}
		for j := 1; j < len(names); j++ {
			if v, err := strconv.ParseInt(values[j], 10, 64); err == nil {
				vals[names[0]+names[j]] = v
			}
		}
		i++
	}
	c := tcpCounters{InSegs: vals["Tcp:InSegs"], OutSegs: vals["Tcp:OutSegs"], DelayedACKs: vals["TcpExt:DelayedACKs"]}
	for _, k := range []string{"Tcp:InSegs", "Tcp:OutSegs", "TcpExt:DelayedACKs"} {
		if _, ok := vals[k]; !ok {
			return c, fmt.Errorf("no %s in /proc/net/snmp and /proc/net/netstat", k)
		}
	}
	return c, nil
}

func TestDelayedACKInLab(t *testing.T) {
	if testing.Short() {
		t.Skip("boots two labs")
	}
	const prog = "/tmp/klasy_prog"
	labboot.Need(t, lab.Debian)
	agent := labboot.Agent(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	names := []string{labboot.Name("ack-send"), labboot.Name("ack-recv")}
	labs := make([]*lab.Lab, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i, n := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			labs[i], errs[i] = lab.Up(ctx, lab.Config{Name: n, Kernel: lab.Debian, Agent: agent, LAN: true, DieWithCaller: true})
		}()
	}
	wg.Wait()
	for i, l := range labs {
		if l != nil {
			t.Cleanup(func() { l.Down(context.Background()) })
		}
		if errs[i] != nil {
			t.Fatalf("booting lab %s: %v", names[i], errs[i])
		}
	}
	sender, receiver := labs[0], labs[1]
	bin := labboot.StaticProgram(t, "../../weaver/testdata/prog/klasy_prog.c")
	labboot.Install(t, sender, prog, bin)
	labboot.Install(t, receiver, prog, bin)
	recvAddr, _, _ := strings.Cut(receiver.LANAddr(), "/")

	klasy := func(args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		if err := run(&stdio{In: strings.NewReader(""), Out: &out, Err: &errb}, args); err != nil {
			t.Fatalf("klasy %s: %v\n%s", strings.Join(args, " "), err, errb.String())
		}
		return out.String()
	}
	guest := func(l *lab.Lab, argv ...string) (string, error) {
		res, err := l.Client().Run(ctx, argv, nil)
		if err == nil && res.ExitCode != 0 {
			err = fmt.Errorf("exit %d: %s%s", res.ExitCode, res.Stdout, res.Stderr)
		}
		if err != nil {
			return "", fmt.Errorf("lab %s: %q: %w", l.Name(), argv, err)
		}
		return string(res.Stdout), nil
	}
	counters := func() tcpCounters {
		t.Helper()
		out, err := guest(receiver, "cat", "/proc/net/snmp", "/proc/net/netstat")
		if err != nil {
			t.Fatal(err)
		}
		c, err := parseTCPCounters(out)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	port := 5000
	// transfer sends n blocks of size bytes gapMS apart from the sender
	// to the receiver, which reads them once they have all come (an
	// application that reads at once gets its ACK sent by the read, as
	// the queue empties), and returns what the receiver's counters did.
	transfer := func(size, n, gapMS int) tcpCounters {
		t.Helper()
		port++
		before := counters()
		recv := make(chan error, 1)
		go func() {
			out, err := guest(receiver, prog, "tcp-recv", strconv.Itoa(port), strconv.Itoa(size*n), strconv.Itoa(n*gapMS+500))
			if err == nil && !strings.Contains(out, fmt.Sprintf("received %d", size*n)) {
				err = fmt.Errorf("tcp-recv printed %q", out)
			}
			recv <- err
		}()
		if _, err := guest(sender, prog, "tcp-send", recvAddr, strconv.Itoa(port), strconv.Itoa(size), strconv.Itoa(n), strconv.Itoa(gapMS)); err != nil {
			t.Fatal(err)
		}
		if err := <-recv; err != nil {
			t.Fatal(err)
		}
		// The last ACKs and the FIN's go out as the socket closes.
		time.Sleep(300 * time.Millisecond)
		return counters().sub(before)
	}
	state := func() string {
		out, err := guest(receiver, "sh", "-c", labboot.KernelState)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}

	// 40 blocks of 512 bytes 100 ms apart: each less than a segment and
	// further apart than the delayed-ACK timer (40 ms: the LAN's RTT
	// bounds it to its floor) but closer than the retransmission timeout
	// (a longer gap puts the receiver back in quick-ACK mode). Once
	// quick-ACK mode ends (16 ACKs or so after the connection starts),
	// each block's ACK waits for the timer.
	type phase struct {
		name  string
		paced tcpCounters
	}
	var phases []phase
	measure := func(name string) phase {
		p := phase{name: name, paced: transfer(512, 40, 100)}
		phases = append(phases, p)
		return p
	}
	clean := state()
	before := measure("before")
	t.Log(klasy("weave", "--lab", receiver.Name(), "-v", "../../examples/delayed_ack.klasy"))
	woven := measure("woven")
	var st struct {
		Aspects []struct {
			Name  string `json:"name"`
			Hooks []struct {
				Kind      string `json:"kind"`
				Mechanism string `json:"mechanism"`
				Hits      uint64 `json:"hits"`
			} `json:"hooks"`
		} `json:"aspects"`
	}
	if err := json.Unmarshal([]byte(klasy("status", "--lab", receiver.Name(), "--json")), &st); err != nil {
		t.Fatal(err)
	}
	t.Log(klasy("status", "--lab", receiver.Name()))
	klasy("unweave", "--lab", receiver.Name(), "delayed_ack")
	after := measure("after")
	if now := state(); now != clean {
		t.Errorf("the receiver's modules and kprobes after unweave:\n%s\nbefore the weave:\n%s", now, clean)
	}

	var table strings.Builder
	fmt.Fprintf(&table, "40 blocks of 512 B, 100 ms apart; the receiver's counters over the transfer:\n")
	fmt.Fprintf(&table, "%-8s %8s %9s %12s %13s\n", "", "segs in", "segs out", "DelayedACKs", "sent at once")
	for _, p := range phases {
		fmt.Fprintf(&table, "%-8s %8d %9d %12d %13d\n", p.name, p.paced.InSegs, p.paced.OutSegs, p.paced.DelayedACKs, p.paced.OutSegs-p.paced.DelayedACKs)
	}
	t.Logf("Tcp InSegs and OutSegs (/proc/net/snmp; the receiver sends only ACKs, its SYN-ACK and FIN), TcpExt DelayedACKs (/proc/net/netstat: ACKs the delayed-ACK timer sent):\n%s", table.String())

	if len(st.Aspects) != 1 || len(st.Aspects[0].Hooks) != 1 || st.Aspects[0].Hooks[0].Kind != "replace" || st.Aspects[0].Hooks[0].Mechanism != "ftrace" {
		t.Fatalf("status while woven: %+v, want one replace hook on ftrace", st)
	}
	hits := st.Aspects[0].Hooks[0].Hits
	t.Logf("tcp_send_delayed_ack replaced %d times while woven", hits)
	if before.paced.DelayedACKs < 5 || after.paced.DelayedACKs < 5 {
		t.Errorf("DelayedACKs grew by %d before and %d after the weave over the paced transfer, want several each", before.paced.DelayedACKs, after.paced.DelayedACKs)
	}
	if woven.paced.DelayedACKs != 0 {
		t.Errorf("DelayedACKs grew by %d while woven, want 0: no ACK waits for the timer", woven.paced.DelayedACKs)
	}
	if hits < uint64(before.paced.DelayedACKs) {
		t.Errorf("the replacement ran %d times, fewer than the %d ACKs delayed before the weave over the same transfer", hits, before.paced.DelayedACKs)
	}
}
