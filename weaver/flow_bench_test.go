package weaver_test

// make bench: log bytes with and without xflow for the same traffic
// (dissertation Table 6.9). One built lab; the same advice (STORE_DATA of
// the skb at every sk_buff access of the IPv4 UDP path's files) woven
// twice: once for every packet, once bound by xflow to the flow's skbs.
// The traffic both times: UDP datagrams over loopback (each one a flow,
// started where udp_send_skb sends it) beside as many ICMP echoes (ping,
// the same files but no flow).

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klasy/klasy/lab"
	"github.com/klasy/klasy/lab/labboot"
	"github.com/klasy/klasy/weaver"
	"github.com/klasy/klasy/weaver/records"
	"github.com/klasy/klasy/weaver/target"
)

// The path the advice logs: loopback has no driver file of its own
// worth logging (drivers/net/loopback.c is one call).
const flowLogFiles = `within_file(net/ipv4/udp.c) OR within_file(net/ipv4/ip_output.c) OR
  within_file(net/ipv4/ip_input.c) OR within_file(net/core/dev.c)`

func flowLogAspect(xflow bool) string {
	if !xflow {
		return fmt.Sprintf(`<aspect>
  <import>linux/skbuff.h</import>
  <advice>
    <pointcut>access(sk_buff.%%) AND target(skb) AND (%s)</pointcut>
    <before>STORE_DATA(skb);</before>
  </advice>
</aspect>
`, flowLogFiles)
	}
	return fmt.Sprintf(`<aspect>
  <import>linux/skbuff.h</import>
  <xflow name="udpflow">
    <start><pointcut>access(sk_buff.len) AND within_function(udp_send_skb)</pointcut></start>
  </xflow>
  <advice>
    <pointcut>access(sk_buff.%%) AND target(skb) AND xflow(udpflow, skb, id) AND (%s)</pointcut>
    <before>STORE_DATA(skb);</before>
  </advice>
</aspect>
`, flowLogFiles)
}

// table69 is XenLASY's Table 6.9: log bytes of one network workload,
// with and without xflow, in Dom0 and DomU.
var table69 = []struct {
	domain        string
	with, without int64
}{
	{"Dom0", 1557248, 13598976},
	{"DomU", 10587776, 15739968},
}

func BenchmarkFlowLog(b *testing.B) {
	const batches, datagrams, pings = 10, 5, 5
	l := labboot.Boot(b, lab.Config{Name: labboot.Name("flowlog"), Kernel: lab.Built})
	labboot.Install(b, l, "/tmp/udp_prog", labboot.StaticProgram(b, "../cmd/klasy/testdata/udp_prog.c"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	sess, err := weaver.OpenSession(ctx, weaver.SessionOptions{TargetOptions: target.TargetOptions{Lab: l.Name()}})
	if err != nil {
		b.Fatal(err)
	}
	defer sess.Close()
	bl := &benchLab{b: b, ctx: ctx, l: l, sess: sess}

	type result struct {
		bytes, records, flowRecords int64
		joinPoints                  int
	}
	measure := func(xflow bool) result {
		name := "flowlog_all"
		if xflow {
			name = "flowlog_xflow"
		}
		path := filepath.Join(b.TempDir(), name+".klasy")
		src := flowLogAspect(xflow)
		if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
			b.Fatal(err)
		}
		rep, err := weaver.Weave(ctx, sess, mustAspect(path, []byte(src)))
		if err != nil {
			b.Fatalf("%s: %v", name, err)
		}
		defer func() {
			if _, err := weaver.Unweave(ctx, sess, []string{name}, false); err != nil {
				b.Fatal(err)
			}
		}()
		if _, _, err := sess.Drain(ctx); err != nil { // what weaving logged
			b.Fatal(err)
		}
		bl.run("sh", "-c", fmt.Sprintf("/tmp/udp_prog recv 9000 %d 120 >/tmp/recv.out 2>&1 </dev/null &", batches*datagrams))
		time.Sleep(time.Second)
		r := result{joinPoints: rep.Woven()}
		// In batches, drained after each: the buffer (1 MiB per CPU)
		// holds one batch's records without xflow, not all of them.
		for i := 0; i < batches; i++ {
			bl.run("sh", "-c", fmt.Sprintf("ping -q -c %d -i 0.02 127.0.0.1 >/tmp/ping.out 2>&1 & /tmp/udp_prog send 127.0.0.1 9000 %d 200; wait", pings, datagrams))
			if out := bl.run("cat", "/tmp/ping.out"); !strings.Contains(out, fmt.Sprintf("%d packets received", pings)) {
				b.Fatalf("%s: ping printed %q", name, out)
			}
			rs, st, err := sess.Drain(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if lost := st.TotalLost(); lost > 0 {
				b.Fatalf("%s: %d records lost (buffer full): the byte count would be short", name, lost)
			}
			for _, tr := range rs {
				r.bytes += int64(records.HeaderSize + 8*len(tr.Values))
				r.records++
				if tr.Flow != 0 {
					r.flowRecords++
				}
			}
		}
		if got := strings.TrimSpace(bl.run("cat", "/tmp/recv.out")); got != fmt.Sprintf("got %d", batches*datagrams) {
			b.Fatalf("%s: the receiver printed %q", name, got)
		}
		// Without xflow nothing carries a flow ID; with it, everything.
		if want := map[bool]int64{false: 0, true: r.records}[xflow]; r.flowRecords != want || r.records == 0 {
			b.Fatalf("%s: %d records, %d with a flow ID: want some, and %d with one", name, r.records, r.flowRecords, want)
		}
		return r
	}
	without := measure(false)
	with := measure(true)

	saved := func(w, wo int64) float64 { return 100 * (1 - float64(w)/float64(wo)) }
	fmt.Printf("\nlog bytes with and without xflow for the same traffic, built lab kernel (%s):\n", l.Kernel().Release)
	fmt.Printf("%d UDP datagrams over loopback (each a flow from udp_send_skb) and %d pings (no flow);\n", batches*datagrams, batches*pings)
	fmt.Printf("STORE_DATA(skb) at every sk_buff access of udp.c, ip_output.c, ip_input.c and dev.c (%d join points),\n", without.joinPoints)
	fmt.Printf("for every packet, or bound by xflow to the flow's skbs (records: 48-byte header + 8 per value)\n\n")
	fmt.Printf("  %-26s %12s %12s %8s\n", "", "with xflow", "without", "saved")
	fmt.Printf("  %-26s %12d %12d %7.1f%%   (%d and %d records)\n", "klasy, one kernel", with.bytes, without.bytes,
		saved(with.bytes, without.bytes), with.records, without.records)
	var tw, two int64
	for _, r := range table69 {
		fmt.Printf("  %-26s %12d %12d %7.1f%%\n", "Table 6.9, "+r.domain, r.with, r.without, saved(r.with, r.without))
		tw, two = tw+r.with, two+r.without
	}
	fmt.Printf("  %-26s %12d %12d %7.1f%%\n", "Table 6.9, total", tw, two, saved(tw, two))
	b.ReportMetric(float64(with.bytes), "log-bytes-xflow")
	b.ReportMetric(float64(without.bytes), "log-bytes-all")
	b.ReportMetric(saved(with.bytes, without.bytes), "%saved")
}
