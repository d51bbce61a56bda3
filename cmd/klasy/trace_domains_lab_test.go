package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klasy/klasy/lab"
	"github.com/klasy/klasy/lab/labboot"
	"github.com/klasy/klasy/timeline"
)

// TestTraceDomainsInLabs weaves one aspect into two labs, each a kernel
// with its own clock, runs preads in them one after the other between
// readings of the host's clock, and merges their traces through the
// code trace --domains runs. Each guest clock's bound must be half the
// round trip it came from; each record, mapped to host time, must fall
// between the host readings around the command that made it, give or
// take its domain's bound; the timeline must interleave the labs as the
// commands ran; and estimates made apart in time must agree within their
// bounds.
func TestTraceDomainsInLabs(t *testing.T) {
	if testing.Short() {
		t.Skip("boots two labs")
	}
	const prog = "/tmp/klasy_prog"
	bin := labboot.StaticProgram(t, "../../weaver/testdata/prog/klasy_prog.c")
	labs := make([]*lab.Lab, 2)
	var wg sync.WaitGroup
	for i, name := range []string{"tla", "tlb"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			labs[i] = labboot.Boot(t, lab.Config{Name: labboot.Name(name), Kernel: lab.Debian})
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	klasy := func(args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		if err := run(&stdio{In: strings.NewReader(""), Out: &out, Err: &errb}, args); err != nil {
			t.Fatalf("klasy %s: %v\n%s", strings.Join(args, " "), err, errb.String())
		}
		return out.String()
	}
	aspect := filepath.Join(t.TempDir(), "views.klasy")
	if err := os.WriteFile(aspect, []byte(viewsAspect), 0o644); err != nil {
		t.Fatal(err)
	}
	// The domains a and b are the two labs: one weave, one trace.
	names := []string{"a", "b"}
	dfile := filepath.Join(t.TempDir(), "labs.yaml")
	text := "domains:\n"
	for i, l := range labs {
		labboot.Install(t, l, prog, bin)
		text += "  - name: " + names[i] + "\n    lab: " + l.Name() + "\n"
	}
	if err := os.WriteFile(dfile, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	state := func() (s [2]string) {
		for i, l := range labs {
			s[i] = klasy("lab", "exec", l.Name(), "--", "sh", "-c", labboot.KernelState)
		}
		return s
	}
	before := state()
	klasy("weave", "--domains", dfile, aspect)
	woven := true
	defer func() {
		if woven {
			klasy("unweave", "--domains", dfile, "views")
		}
	}()

	// Each command's pread position names it; the host's clock brackets it.
	type window struct {
		lab        int
		pos        int64
		start, end int64
	}
	var windows []window
	for i, li := range []int{0, 1, 0, 1, 1, 0} {
		pos := int64(1_000_000 + i)
		start := timeline.HostNow()
		klasy("lab", "exec", labs[li].Name(), "--", prog, "pread", "/proc/self/stat", "1", fmt.Sprint(pos), "1")
		windows = append(windows, window{li, pos, start, timeline.HostNow()})
	}

	ctx := context.Background()
	out := klasy("trace", "--domains", dfile, "--json", "--aspect", "views")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var head struct {
		Domains []struct {
			Name string `json:"name"`
			timeline.Clock
		} `json:"domains"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &head); err != nil || len(head.Domains) != 2 {
		t.Fatalf("header %s: %v", lines[0], err)
	}
	bound := map[string]int64{}
	for _, d := range head.Domains {
		t.Logf("domain %s: offset %d ns ± %d ns, best round trip %d ns of %d", d.Name, d.OffsetNS, d.BoundNS, d.RTTNS, d.Samples)
		if d.BoundNS != d.RTTNS-d.RTTNS/2 || d.RTTNS <= 0 || d.Samples != timeline.DefaultSamples {
			t.Errorf("domain %s: bound %d for a round trip of %d over %d samples, want half the round trip over %d", d.Name, d.BoundNS, d.RTTNS, d.Samples, timeline.DefaultSamples)
		}
		bound[d.Name] = d.BoundNS
	}
	var order []string
	for _, l := range lines[1:] {
		var e struct {
			Domain string  `json:"domain"`
			HostNS int64   `json:"host_ns"`
			Values []int64 `json:"values"`
		}
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatal(err)
		}
		w := windows[e.Values[1]-1_000_000]
		if e.Domain != names[w.lab] {
			t.Errorf("pread at %d recorded in domain %s, ran in %s", e.Values[1], e.Domain, names[w.lab])
		}
		b := bound[e.Domain]
		t.Logf("pread at %d: host %d, %d ns after its command started, %d ns before it ended (bound %d)", e.Values[1], e.HostNS, e.HostNS-w.start, w.end-e.HostNS, b)
		if e.HostNS < w.start-b || e.HostNS > w.end+b {
			t.Errorf("pread at %d: host time %d outside its command's [%d, %d] ± %d", e.Values[1], e.HostNS, w.start, w.end, b)
		}
		order = append(order, fmt.Sprintf("%s@%d", e.Domain, e.Values[1]))
	}
	var want []string
	for _, w := range windows {
		want = append(want, fmt.Sprintf("%s@%d", names[w.lab], w.pos))
	}
	if strings.Join(order, " ") != strings.Join(want, " ") {
		t.Errorf("timeline %v, want %v", order, want)
	}

	// Estimates a second apart: each interval holds the true offset, so
	// they overlap.
	for i, l := range labs {
		var cs []timeline.Clock
		for k := 0; k < 3; k++ {
			c, err := timeline.Measure(ctx, 0, timeline.HostNow, l.Client().Clock)
			if err != nil {
				t.Fatal(err)
			}
			cs = append(cs, c)
			time.Sleep(time.Second)
		}
		for _, a := range cs {
			for _, b := range cs {
				if d := a.OffsetNS - b.OffsetNS; d > a.BoundNS+b.BoundNS || -d > a.BoundNS+b.BoundNS {
					t.Errorf("lab %d: offsets %d ± %d and %d ± %d do not overlap", i, a.OffsetNS, a.BoundNS, b.OffsetNS, b.BoundNS)
				}
			}
		}
		t.Logf("lab %s: later estimates %+v", l.Name(), cs)
	}

	woven = false
	klasy("unweave", "--domains", dfile, "views")
	if after := state(); after != before {
		t.Errorf("after unweave --domains, modules and kprobes:\n%q\nbefore:\n%q", after, before)
	}
}
