package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/klasy/klasy/cmd/klasy/internal/tracerun"
	"github.com/klasy/klasy/internal/golden"
	"github.com/klasy/klasy/weaver/records"
	"github.com/klasy/klasy/weaver/target"
)

// fakeSource gives klasy trace records as a session would: saved ones,
// then one batch per Drain. Past the last batch, with interrupt, it
// sends the process SIGINT, as Ctrl-C would, and waits for the trace to
// see it.
type fakeSource struct {
	saved     []records.TraceRecord
	batches   [][]records.TraceRecord
	status    *records.Status
	interrupt bool
	// out is the command's standard output, to see what it printed
	// before each Drain.
	out     *bytes.Buffer
	printed []int // len(out) at each Drain
	drains  int
	closed  bool
	// takes counts TakeSaved calls, dones their done calls; putBack is
	// what trace saved again, not written.
	takes, dones int
	putBack      []records.TraceRecord
}

func (f *fakeSource) Name() string { return "lab fake" }
func (f *fakeSource) Close() error { f.closed = true; return nil }

func (f *fakeSource) TakeSaved() ([]records.TraceRecord, func() error, error) {
	f.takes++
	return f.saved, func() error { f.dones++; return nil }, nil
}

func (f *fakeSource) SaveRecords(rs []records.TraceRecord) error {
	f.putBack = append(f.putBack, rs...)
	return nil
}

func (f *fakeSource) Drain(ctx context.Context) ([]records.TraceRecord, *records.Status, error) {
	f.printed = append(f.printed, f.out.Len())
	f.drains++
	if f.drains <= len(f.batches) {
		return f.batches[f.drains-1], f.status, nil
	}
	if f.interrupt {
		syscall.Kill(os.Getpid(), syscall.SIGINT)
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-time.After(10 * time.Second):
			return nil, nil, errors.New("SIGINT did not end the trace")
		}
	}
	return nil, f.status, nil
}

// runTraceOn runs 'klasy trace' with args, the real command from its
// arguments to its output, on src's records.
func runTraceOn(t *testing.T, src *fakeSource, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out bytes.Buffer
	stderr, err = runTraceTo(t, src, &out, &out, args...)
	return out.String(), stderr, err
}

// runTraceTo is runTraceOn with standard output w, which writes what it
// is given to out.
func runTraceTo(t *testing.T, src *fakeSource, w io.Writer, out *bytes.Buffer, args ...string) (stderr string, err error) {
	t.Helper()
	var errb bytes.Buffer
	src.out = out
	opened := false
	// The real seams are put back after: a lab test later in the same
	// binary opens real sessions through them.
	open, poll := openTraceSource, tracePoll
	defer func() { openTraceSource, tracePoll = open, poll }()
	openTraceSource = func(ctx context.Context, s *stdio, opt target.TargetOptions) (tracerun.Source, error) {
		opened = true
		if opt.Lab != "fake" {
			t.Errorf("trace opened lab %q, want fake", opt.Lab)
		}
		return src, nil
	}
	tracePoll = time.Millisecond
	err = run(&stdio{In: strings.NewReader(""), Out: w, Err: &errb}, append([]string{"trace", "--lab", "fake"}, args...))
	if opened && !src.closed {
		t.Errorf("klasy trace %s did not close its session", strings.Join(args, " "))
	}
	return errb.String(), err
}

const (
	skbA   = int64(-0x777ffc4b1800) // 0xffff888003b4e800
	skbB   = int64(-0x777ffc4b1000) // 0xffff888003b4f000
	table0 = 35_120_034_000         // packet 1's first record, ns since boot
)

// table63 is the dissertation's Table 6.3: a packet's path from the
// driver to the free, with the µs since its first record for two
// packets.
var table63 = []struct {
	function, file string
	line           int
	packet1        string
	packet2        string
}{
	{"e1000_rx_checksum", "e1000_main.c", 2773, "0.00", "0.00"},
	{"netif_receive_skb", "dev.c", 1638, "1.06", "1.39"},
	{"netif_rx", "dev.c", 1500, "1.68", "2.17"},
	{"ip_rcv", "ip_input.c", 367, "3.43", "4.35"},
	{"ip_local_deliver", "ip_input.c", 275, "5.56", "6.67"},
	{"tcp_v4_rcv", "tcp_ipv4.c", 1741, "6.84", "8.05"},
	{"tcp_rcv_established", "tcp_input.c", 4238, "11.14", "12.62"},
	{"tcp_event_data_rcv", "tcp_input.c", 554, "13.36", "14.54"},
	{"tcp_rcv_established", "tcp_input.c", 4355, "14.23", "15.43"},
	{"skb_copy_datagram_iovec", "datagram.c", 234, "25.93", "703.76"},
	{"_kfree_skb", "skbuff.c", 225, "27.14", "707.25"},
}

// pc is the address a record of an advice at line would store as $pc$.
func pc(line int) int64 {
	base := uint64(0xffffffff81000000)
	return int64(base + uint64(line))
}

// netRecords is what net_trace.klasy stores (pc, skb, time) as two
// packets take Table 6.3's path, the second starting 20 µs after the
// first, interleaved in time as the buffer gives them; then skb A again
// 2.5 s later (freed and reallocated), two records of another aspect
// storing skb A too, and two of an aspect storing one value only.
func netRecords(t *testing.T) []records.TraceRecord {
	var rs []records.TraceRecord
	rec := func(aspect string, at uint64, fn, file string, line int, vals ...int64) records.TraceRecord {
		r := records.TraceRecord{Aspect: aspect, Advice: 1, TimeNS: at, CPU: 0, PID: 0, Comm: "swapper/0",
			PC: fmt.Sprintf("%#x", uint64(pc(line))), Function: fn, File: file, Line: line, Values: records.Ints(vals...)}
		if fn == "skb_copy_datagram_iovec" || fn == "_kfree_skb" {
			r.CPU, r.PID, r.Comm = 1, 412, "sshd"
		}
		return r
	}
	micros := func(s string) uint64 {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatal(err)
		}
		return uint64(math.Round(f * 1000))
	}
	for i, start := range []uint64{table0, table0 + 20_000} {
		skb := []int64{skbA, skbB}[i]
		for _, row := range table63 {
			at := start + micros([]string{row.packet1, row.packet2}[i])
			rs = append(rs, rec("net_trace", at, row.function, row.file, row.line, pc(row.line), skb, int64(at)))
		}
	}
	again := uint64(table0 + 2_500_000_000)
	rs = append(rs,
		rec("skb_alloc", table0-5_000, "__alloc_skb", "skbuff.c", 500, pc(0x500), skbA),
		rec("skb_alloc", again-5_000, "__alloc_skb", "skbuff.c", 500, pc(0x500), skbA),
		rec("net_trace", again, table63[0].function, table63[0].file, table63[0].line, pc(0xad5), skbA, int64(again)),
		rec("net_trace", again+1_200, table63[1].function, table63[1].file, table63[1].line, pc(0x666), skbA, int64(again+1_200)),
		rec("skb_count", again+2_000, "kfree_skb_list_reason", "skbuff.c", 800, 1),
		rec("skb_count", again+3_000, "kfree_skb_list_reason", "skbuff.c", 800, 2),
	)
	slices.SortStableFunc(rs, func(a, b records.TraceRecord) int { return cmp.Compare(a.TimeNS, b.TimeNS) })
	return rs
}

// table64 is the dissertation's Table 6.4: how many CPU time quanta
// (ms) fell in each range; the last is 14 ms and more.
var table64 = []struct {
	from, to float64
	count    int
}{
	{0, 2, 10481}, {2, 4, 1537}, {4, 6, 2174}, {6, 8, 125}, {8, 10, 136}, {10, 12, 709}, {12, 14, 127}, {14, 30, 30},
}

// quantaRecords stores Table 6.4's quanta in ns as process_switch's
// advice 1 would (quantum, pid), spread evenly over each range from its
// first value; advice 2 stores one small, signed value per record.
func quantaRecords() []records.TraceRecord {
	var rs []records.TraceRecord
	at := uint64(table0)
	for _, row := range table64 {
		lo, hi := int64(row.from*1e6), int64(row.to*1e6)
		for k := range row.count {
			at += 1000
			q := lo + int64(k)*(hi-lo)/int64(row.count)
			rs = append(rs, records.TraceRecord{Aspect: "process_switch", Advice: 1, TimeNS: at, CPU: k % 2, PID: 100 + k%7, Comm: "java",
				Function: "__schedule", File: "kernel/sched/stats.h", Line: 267, Values: records.Ints(q, int64(100+k%7))})
		}
	}
	for _, v := range []int64{-3, -1, 0, 0, 1, 5, 7, 1 << 40, math.MaxInt64} {
		at += 1000
		rs = append(rs, records.TraceRecord{Aspect: "process_switch", Advice: 2, TimeNS: at, Function: "__schedule", File: "kernel/sched/stats.h", Line: 240, Values: records.Ints(v)})
	}
	return rs
}

// pathRecords are opensnoop's records (pid, path) of a few opens: paths
// seen more than once, one cut at 64 bytes, one unreadable; advice 2
// stores an integer where advice 1 has the path.
func pathRecords() []records.TraceRecord {
	path := func(s string) records.Value { return records.Value{Kind: records.KindUString, Str: s} }
	long := path(strings.Repeat("/very/long", 6) + "/nam")
	long.Truncated = true
	var rs []records.TraceRecord
	at := uint64(table0)
	for i, p := range []records.Value{
		path("/etc/passwd"), path("/tmp/a"), path("/etc/passwd"), long, {Kind: records.KindUString, Bad: true},
		path("/etc/passwd"), long, path("/tmp/a\tb"),
	} {
		at += 1500
		rs = append(rs, records.TraceRecord{Aspect: "opensnoop", Advice: 1, TimeNS: at, CPU: i % 2, PID: 300 + i%3, Comm: "cat",
			Function: "do_sys_openat2", File: "fs/open.c", Line: 1320, Values: []records.Value{{Int: int64(300 + i%3)}, p}})
	}
	rs = append(rs, records.TraceRecord{Aspect: "opensnoop", Advice: 2, TimeNS: at + 10, Function: "do_sys_openat2", File: "fs/open.c", Line: 1330, Values: records.Ints(300, 3)})
	return rs
}

// Each view on the records, through the whole command, against a
// golden of its output (stdout, then what it said on stderr).
func TestTraceViewsGolden(t *testing.T) {
	split := func(rs []records.TraceRecord, at ...int) (saved []records.TraceRecord, batches [][]records.TraceRecord) {
		saved = rs[:at[0]]
		for i := range at {
			end := len(rs)
			if i+1 < len(at) {
				end = at[i+1]
			}
			batches = append(batches, rs[at[i]:end])
		}
		return saved, batches
	}
	net := netRecords(t)
	netSaved, netBatches := split(net, 5, 15)
	// A record late from another CPU: the first record of skb B in
	// batch 1 comes in batch 2, after later ones of B.
	b1 := netBatches[0]
	late := slices.IndexFunc(b1, func(r records.TraceRecord) bool { return len(r.Values) > 1 && r.Values[1].Int == skbB })
	if late < 0 || !slices.ContainsFunc(b1[late+1:], func(r records.TraceRecord) bool { return r.Values[1].Int == skbB }) {
		t.Fatal("batch 1 has no two records of skb B to swap")
	}
	netBatches[1] = append([]records.TraceRecord{b1[late]}, netBatches[1]...)
	netBatches[0] = slices.Delete(slices.Clone(b1), late, late+1)
	quanta := quantaRecords()
	qSaved, qBatches := split(quanta, 100, 9000)
	lost := &records.Status{Lost: []uint64{0, 3}}
	paths := [][]records.TraceRecord{pathRecords()}

	tests := []struct {
		name    string
		args    []string
		saved   []records.TraceRecord
		batches [][]records.TraceRecord
		status  *records.Status
	}{
		{"group-by", []string{"--group-by", "2", "--follow"}, netSaved, netBatches, nil},
		{"group-by-aspect", []string{"--group-by=2", "--aspect", "net_trace", "--follow"}, netSaved, netBatches, nil},
		{"group-gap-0", []string{"--group-by", "2", "--group-gap", "0", "--aspect", "net_trace", "--follow"}, netSaved, netBatches, nil},
		{"group-gap-1ms", []string{"--group-by", "2", "--group-gap", "1ms", "--aspect", "net_trace"}, nil, [][]records.TraceRecord{net}, nil},
		{"group-by-json", []string{"--group-by", "2", "--json", "--aspect", "net_trace", "--follow"}, netSaved, netBatches, lost},
		{"hist", []string{"--hist", "1", "--follow"}, qSaved, qBatches, nil},
		{"hist-index-2", []string{"--hist", "2"}, nil, [][]records.TraceRecord{quanta}, nil},
		{"hist-json", []string{"--hist", "1", "--json"}, nil, [][]records.TraceRecord{quanta}, lost},
		{"lhist-table64", []string{"--lhist", "1,0,14000000,2000000", "--aspect", "process_switch", "--follow"}, qSaved, qBatches, nil},
		{"lhist-json", []string{"--lhist", "1,0,14000000,2000000", "--json"}, nil, [][]records.TraceRecord{quanta}, nil},
		{"lhist-mega", []string{"--lhist", "1,0,0x1000000,0x200000"}, nil, [][]records.TraceRecord{quanta}, nil},
		{"lhist-negative", []string{"--lhist", "1,-4,8,4"}, nil, [][]records.TraceRecord{quanta}, nil},
		// Issue 23: a string value is grouped by, as bpftrace groups by
		// a str(); --hist counts each string (@[str] = count()).
		{"group-by-string", []string{"--group-by", "2"}, nil, paths, nil},
		{"group-by-string-json", []string{"--group-by", "2", "--json"}, nil, paths, nil},
		{"hist-string", []string{"--hist", "2"}, nil, paths, nil},
		{"hist-string-json", []string{"--hist", "2", "--json"}, nil, paths, nil},
		{"hist-none-of-the-aspect", []string{"--hist", "1", "--aspect", "nosuch"}, nil, [][]records.TraceRecord{quanta}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := &fakeSource{saved: tt.saved, batches: tt.batches, status: tt.status, interrupt: slices.Contains(tt.args, "--follow")}
			if src.status == nil {
				src.status = &records.Status{Lost: []uint64{0, 0}}
			}
			stdout, stderr, err := runTraceOn(t, src, tt.args...)
			if err != nil {
				t.Fatalf("klasy trace %s: %v\n%s", strings.Join(tt.args, " "), err, stderr)
			}
			// A view prints when the trace ends: nothing before.
			for i, n := range src.printed {
				if n != 0 {
					t.Errorf("klasy trace %s printed %d bytes before Drain %d, want nothing before the end", strings.Join(tt.args, " "), n, i+1)
				}
			}
			got := stdout
			if stderr != "" {
				got += "--- stderr\n" + stderr
			}
			golden.Check(t, filepath.Join("testdata", "trace_views", tt.name+".golden"), got)
		})
	}
}

var groupRow = regexp.MustCompile(`^  +([0-9]+\.[0-9]{2})  `)

// The grouped view shows each packet's path as Table 6.3 shows it: the
// same µs since the packet's first record, row by row, however the
// records of the two packets were interleaved and split across reads.
func TestGroupByIsTable63(t *testing.T) {
	net := netRecords(t)
	// Record 5 (packet 1's ip_local_deliver) comes late, in the last
	// read, after later records of its packet.
	saved := slices.Concat(net[:5], net[6:7])
	last := slices.Concat(net[5:6], net[13:])
	src := &fakeSource{saved: saved, batches: [][]records.TraceRecord{net[7:13], last}, interrupt: true}
	stdout, stderr, err := runTraceOn(t, src, "--group-by", "2", "--aspect", "net_trace", "--follow")
	if err != nil {
		t.Fatal(err, stderr)
	}
	blocks := strings.Split(stdout, "\n\n")
	if len(blocks) != 3 {
		t.Fatalf("%d groups, want packet 1, packet 2 and skb A again:\n%s", len(blocks), stdout)
	}
	for i, want := range []string{"0xffff888003b4e800", "0xffff888003b4f000"} {
		lines := strings.Split(strings.TrimSpace(blocks[i]), "\n")
		if !strings.Contains(lines[0], "= "+want+":") {
			t.Errorf("group %d is %q, want the skb %s", i+1, lines[0], want)
		}
		rows := lines[2:]
		if len(rows) != len(table63) {
			t.Fatalf("group %d has %d rows, want %d:\n%s", i+1, len(rows), len(table63), blocks[i])
		}
		for j, row := range table63 {
			m := groupRow.FindStringSubmatch(rows[j])
			wantUS := []string{row.packet1, row.packet2}[i]
			where := fmt.Sprintf("%s:%d", row.file, row.line)
			if m == nil || m[1] != wantUS || !strings.Contains(rows[j], row.function) || !strings.Contains(rows[j], where) {
				t.Errorf("packet %d row %d is %q, want %s µs at %s %s", i+1, j+1, rows[j], wantUS, row.function, where)
			}
		}
	}
}

// Table 6.4's ranges as --lhist buckets hold exactly its frequencies,
// values on a range's lower bound included.
func TestLhistIsTable64(t *testing.T) {
	stdout, stderr, err := runTraceOn(t, &fakeSource{batches: [][]records.TraceRecord{quantaRecords()}},
		"--lhist", "1,0,14000000,2000000", "--json", "--aspect", "process_switch")
	if err != nil {
		t.Fatal(err, stderr)
	}
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(stdout), "\n") {
		if strings.Contains(l, `"advice":1,`) {
			got = append(got, l)
		}
	}
	if len(got) != 1 {
		t.Fatalf("want one histogram of advice 1, got:\n%s", stdout)
	}
	for i, row := range table64 {
		var b string
		switch {
		case i < len(table64)-1:
			b = fmt.Sprintf(`{"min":%d,"max":%d,"count":%d}`, int64(row.from*1e6), int64(row.to*1e6)-1, row.count)
		default:
			b = fmt.Sprintf(`{"min":%d,"count":%d}`, int64(row.from*1e6), row.count)
		}
		if !strings.Contains(got[0], b) {
			t.Errorf("no bucket %s in %s", b, got[0])
		}
	}
}

// bpftrace's own output, from its reference guide (docs/reference_guide.md,
// "hist(): Log2 Histogram" and "lhist(): Linear Histogram"): the same
// counts drawn by klasy must match it character for character.
func TestHistDrawsLikeBpftrace(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--hist", "1"}, `(..., 0)             117 |@@@@@@@@@@@@                                        |
[0]                    5 |                                                    |
[1]                  325 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@                  |
[2, 4)                 6 |                                                    |
[4, 8)                 3 |                                                    |
[8, 16)              495 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|
[16, 32)              35 |@@@                                                 |
[32, 64)              25 |@@                                                  |
[64, 128)             21 |@@                                                  |
[128, 256)             1 |                                                    |
[256, 512)             3 |                                                    |
[512, 1K)              2 |                                                    |
[1K, 2K)               1 |                                                    |
[2K, 4K)               2 |                                                    |
`},
		{[]string{"--lhist", "1,0,10000,1000"}, `[0, 1000)            480 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|
[1000, 2000)          49 |@@@@@                                               |
[2000, 3000)          12 |@                                                   |
[3000, 4000)          39 |@@@@                                                |
[4000, 5000)         267 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@                        |
`},
	}
	for _, tt := range tests {
		// Values that fall in each row's bucket, as many as it counts:
		// the row's lower bound, or -1, and the bound plus the count
		// when it stays in the bucket.
		var rs []records.TraceRecord
		for _, line := range strings.Split(strings.TrimSuffix(tt.want, "\n"), "\n") {
			label := strings.TrimSpace(line[:16])
			n, err := strconv.Atoi(strings.TrimSpace(line[16:24]))
			if err != nil {
				t.Fatal(err)
			}
			lo := int64(-1)
			if label != "(..., 0)" {
				lo = labelValue(t, strings.Trim(strings.SplitN(label, ",", 2)[0], "[]"))
			}
			for range n {
				rs = append(rs, records.TraceRecord{Aspect: "bytes", Advice: 1, Values: records.Ints(lo)})
			}
		}
		stdout, stderr, err := runTraceOn(t, &fakeSource{batches: [][]records.TraceRecord{rs}}, tt.args...)
		if err != nil {
			t.Fatal(err, stderr)
		}
		if want := "@bytes#1:\n" + tt.want + "\n"; stdout != want {
			t.Errorf("klasy trace %s printed\n%s\nbpftrace prints\n%s", strings.Join(tt.args, " "), stdout, want)
		}
	}
}

// labelValue reads a bpftrace bucket label's number: 512, 1K, 2M.
func labelValue(t *testing.T, s string) int64 {
	mult := int64(1)
	if k := strings.IndexAny(s, "KMGTPE"); k > 0 {
		mult = int64(1) << (10 * (strings.IndexByte("KMGTPE", s[k]) + 1))
		s = s[:k]
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n * mult
}

// Bad view options: one clear usage error, before any target is opened.
func TestTraceViewErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--group-by", "0"}, "--group-by: value index 0: want 1..16"},
		{[]string{"--group-by", "17"}, "--group-by: value index 17: want 1..16"},
		{[]string{"--hist", "-1"}, "--hist: value index -1: want 1..16"},
		{[]string{"--hist", "x"}, `invalid value "x" for flag -hist: want the 1-based index of a stored value`},
		{[]string{"--hist", "1", "--group-by", "2"}, "--group-by and --hist are different views: give one"},
		{[]string{"--hist", "1", "--lhist", "1,0,10,1"}, "--hist and --lhist are different views: give one"},
		{[]string{"--group-gap", "1s"}, "--group-gap needs --group-by"},
		{[]string{"--group-by", "1", "--group-gap", "-1s"}, "want a duration of 0 (never split a group) or more"},
		{[]string{"--group-by", "1", "--group-gap", "soon"}, "want a duration such as 1s"},
		{[]string{"--lhist", "1,0,10"}, "want N,MIN,MAX,STEP"},
		{[]string{"--lhist", "0,0,10,1"}, "value index 0: want 1..16"},
		{[]string{"--lhist", "1,0,ten,1"}, `"ten" is not an integer`},
		{[]string{"--lhist", "1,0,10,0"}, "STEP must be positive"},
		{[]string{"--lhist", "1,10,10,1"}, "MAX (10) must be above MIN (10)"},
		{[]string{"--lhist", "1,0,10,3"}, "MAX-MIN (10) must be a multiple of STEP (3)"},
		{[]string{"--lhist", "1,0,1001,1"}, "(MAX-MIN)/STEP is 1001 buckets, at most 1000"},
		{[]string{"--lhist", "1,-9223372036854775808,9223372036854775807,1"}, "must be above MIN"},
	}
	for _, tt := range tests {
		src := &fakeSource{}
		_, stderr, err := runTraceOn(t, src, tt.args...)
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "klasy help trace") {
			t.Errorf("klasy trace %s: %v, want a usage error with %q", strings.Join(tt.args, " "), err, tt.want)
		}
		if src.drains > 0 || stderr != "" {
			t.Errorf("klasy trace %s read records (%d drains) or warned %q before refusing its options", strings.Join(tt.args, " "), src.drains, stderr)
		}
	}
}

// The plain trace with --follow prints each read's records before the
// next read, not when 64 KiB are buffered.
func TestTraceFollowPrintsAsItReads(t *testing.T) {
	net := netRecords(t)
	src := &fakeSource{batches: [][]records.TraceRecord{net[:3], net[3:6]}, interrupt: true}
	stdout, stderr, err := runTraceOn(t, src, "--follow")
	if err != nil {
		t.Fatal(err, stderr)
	}
	if len(src.printed) != 3 || src.printed[0] != 0 || src.printed[1] == 0 || src.printed[2] <= src.printed[1] {
		t.Errorf("bytes printed before each read: %v, want 0 and then more at each read", src.printed)
	}
	if n := strings.Count(stdout, "\n"); n != 6 {
		t.Errorf("printed %d lines, want 6:\n%s", n, stdout)
	}
}
