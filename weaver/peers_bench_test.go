package weaver_test

// make bench's peers (issue 22): on the same function and the same loop,
// in one -icount boot of Debian's kernel (1 guest instruction = 1 ns,
// figures that repeat), what a hit costs with klasy's advice and with
// what users would run instead: BPF fentry, fexit and kprobe programs
// (null, and 8 bytes to a BPF ring buffer; internal/bpfpeer, with
// cilium/ebpf) and a kprobe_events probe (perf probe's mechanism). One
// table, each figure beside its ratio to BPF fentry's null program.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/klasy/klasy/lab"
	"github.com/klasy/klasy/lab/labboot"
	"github.com/klasy/klasy/weaver"
	"github.com/klasy/klasy/weaver/target"
)

// bpfPeer builds internal/bpfpeer static for the guest.
func bpfPeer(tb testing.TB) []byte {
	tb.Helper()
	out := filepath.Join(tb.TempDir(), "bpfpeer")
	cmd := exec.Command("go", "build", "-o", out, "github.com/klasy/klasy/internal/bpfpeer")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("building bpfpeer: %v\n%s", err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// peer is a BPF program running in the guest: started by startPeer,
// stopped by stop, which returns what it printed.
type peer struct {
	bl  *benchLab
	pid string
}

const peerBin = "/tmp/bpfpeer"

// startPeer runs bpfpeer MECH PROG FUNC... in the guest's background and
// waits until it has attached.
func (bl *benchLab) startPeer(args ...string) (*peer, error) {
	bl.b.Helper()
	out := bl.run("sh", "-c", fmt.Sprintf("%s %s >/tmp/bpfpeer.out 2>&1 </dev/null & echo $!", peerBin, strings.Join(args, " ")))
	p := &peer{bl: bl, pid: strings.TrimSpace(out)}
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		log := bl.run("cat", "/tmp/bpfpeer.out")
		if strings.Contains(log, "attached") {
			return p, nil
		}
		if strings.Contains(log, "bpfpeer:") || time.Now().After(deadline) {
			return nil, fmt.Errorf("bpfpeer %s: %s", strings.Join(args, " "), log)
		}
	}
}

// stop ends the peer and returns its output.
func (p *peer) stop() string {
	p.bl.run("sh", "-c", fmt.Sprintf("kill %s; while kill -0 %s 2>/dev/null; do sleep 0.1; done", p.pid, p.pid))
	return p.bl.run("cat", "/tmp/bpfpeer.out")
}

// peerAspect weaves a one-advice aspect at benchSite's entry: advice is
// its <before> or <after> element.
func (bl *benchLab) peerAspect(name, advice string) error {
	src := fmt.Sprintf("<aspect><advice><pointcut>execution(%s)</pointcut>%s</advice></aspect>\n", benchSite, advice)
	path := filepath.Join(bl.b.TempDir(), name+".klasy")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		return err
	}
	f, err := weaver.LoadAspect(path, []byte(src))
	if err != nil {
		return err
	}
	_, err = weaver.Weave(bl.ctx, bl.sess, f)
	return err
}

func BenchmarkPeers(b *testing.B) {
	l := labboot.Boot(b, lab.Config{Name: labboot.Name("peers"), Kernel: lab.Debian, ICount: true})
	labboot.Install(b, l, prog, labboot.StaticProgram(b, "testdata/prog/klasy_prog.c"))
	labboot.Install(b, l, peerBin, bpfPeer(b))
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	sess, err := weaver.OpenSession(ctx, weaver.SessionOptions{TargetOptions: target.TargetOptions{Lab: l.Name()}})
	if err != nil {
		b.Fatal(err)
	}
	defer sess.Close()
	bl := &benchLab{b: b, ctx: ctx, l: l, sess: sess}
	bl.run("sh", "-c", "mount -t tracefs none /sys/kernel/tracing 2>/dev/null; mount -t debugfs none /sys/kernel/debug 2>/dev/null; true")

	klasyConfig := func(name, advice string) config {
		return config{name: name, load: func() error { return bl.peerAspect("peer_"+strings.ReplaceAll(name, " ", "_"), advice) },
			unload: func() {
				if _, err := weaver.Unweave(ctx, sess, nil, true); err != nil {
					b.Fatal(err)
				}
			}}
	}
	var p *peer
	calls, _ := strconv.Atoi(benchCalls)
	bpfConfig := func(mech, kind string) config {
		fn := benchSite // BTF knows the body
		if mech == "kprobe" {
			fn = bareSym // kallsyms' name at the same address
		}
		return config{name: "BPF " + mech + " " + kind, load: func() (err error) { p, err = bl.startPeer(mech, kind, fn); return err },
			unload: func() {
				// Each hit ran the program: the ring buffer holds a
				// record of each call at least.
				out := p.stop()
				var n, records int
				var ns int64
				i := strings.Index(out, "detached ")
				if i >= 0 {
					fmt.Sscanf(out[i:], "detached %d in %d ns records %d", &n, &ns, &records)
				}
				if n != 1 || kind == "ringbuf" && records < calls {
					b.Errorf("bpfpeer %s %s: %q, want 1 detached and %d records or more", mech, kind, out, calls)
				}
			}}
	}
	events := "/sys/kernel/tracing"
	configs := []config{
		{name: "no hook", load: func() error { return nil }, unload: func() {}},
		klasyConfig("klasy null", "<before>;</before>"),
		klasyConfig("klasy STORE_DATA(1)", "<before>STORE_DATA(1);</before>"),
		klasyConfig("klasy COUNT(1)", "<before>COUNT(1);</before>"),
		klasyConfig("klasy after null", "<after>;</after>"),
		{name: "klasy after (kretprobe)", load: func() error {
			// The runtime's fexit=0 keeps after hooks kretprobes: set
			// it once an aspect elsewhere has loaded the runtime.
			src := "<aspect><advice><pointcut>execution(vfs_mkdir)</pointcut><before>;</before></advice></aspect>\n"
			if _, err := weaver.Weave(ctx, sess, mustAspect("peer_loader.klasy", []byte(src))); err != nil {
				return err
			}
			bl.run("sh", "-c", "echo 0 > /sys/module/klasy_runtime/parameters/fexit")
			return bl.peerAspect("peer_after_kretprobe", "<after>;</after>")
		}, unload: func() {
			if _, err := weaver.Unweave(ctx, sess, nil, true); err != nil {
				b.Fatal(err)
			}
		}},
		bpfConfig("fentry", "null"),
		bpfConfig("fentry", "ringbuf"),
		bpfConfig("fexit", "null"),
		bpfConfig("kprobe", "null"),
		bpfConfig("kprobe", "ringbuf"),
		{name: "kprobe_events p:", load: func() error {
			bl.run("sh", "-c", fmt.Sprintf("echo 'p:klasy_peer %s' >> %s/kprobe_events && echo 1 > %s/events/kprobes/klasy_peer/enable", bareSym, events, events))
			return nil
		}, unload: func() {
			bl.run("sh", "-c", fmt.Sprintf("echo 0 > %s/events/kprobes/klasy_peer/enable; echo '-:klasy_peer' >> %s/kprobe_events; echo > %s/trace", events, events, events))
		}},
	}
	const reps = 5
	ns := map[string][]float64{}
	for r := range reps {
		for _, c := range configs {
			if err := c.load(); err != nil {
				b.Fatalf("%s: %v", c.name, err)
			}
			ns[c.name] = append(ns[c.name], bl.nsPerCall())
			c.unload()
		}
		b.Logf("round %d of %d done", r+1, reps)
	}
	bare := median(ns["no hook"])
	fentry := median(ns["BPF fentry null"]) - bare
	var table strings.Builder
	fmt.Fprintf(&table, "guest ns per hit at the entry of %s above the bare syscall (%.1f ns), median of %d interleaved runs of %s calls, one -icount boot:\n",
		benchSite, bare, reps, benchCalls)
	fmt.Fprintf(&table, "%-24s %10s %12s\n", "mechanism", "ns/hit", "vs fentry")
	for _, c := range configs[1:] {
		v := median(ns[c.name]) - bare
		fmt.Fprintf(&table, "%-24s %10.1f %11.2fx\n", c.name, v, v/fentry)
		b.ReportMetric(v, strings.ReplaceAll(c.name, " ", "_")+"-ns/hit")
	}
	b.Log("\n" + table.String())
}
