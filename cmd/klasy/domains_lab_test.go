package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/klasy/klasy/domains"
	"github.com/klasy/klasy/lab"
	"github.com/klasy/klasy/lab/labboot"
	"github.com/klasy/klasy/weaver"
)

// domAspect goes to two domains: advice 1 to a only, 2 to b only, 3 to
// both.
const domAspect = `<aspect>
  <advice>
    <pointcut>execution(ksys_pread64) AND within_file(%read_write.c@a)</pointcut>
    <before>STORE_DATA(1);</before>
  </advice>
  <advice>
    <pointcut>execution(ksys_write) AND within_function(ksys_write@b)</pointcut>
    <before>STORE_DATA(2);</before>
  </advice>
  <advice>
    <pointcut>execution(ksys_lseek)</pointcut>
    <before>STORE_DATA(3);</before>
  </advice>
</aspect>
`

// refusedAspect weaves ksys_sync into both domains and exc_int3, which
// the kernel refuses (noinstr), into b only.
// flowAspect has a flow: its IDs must be made as the runtime's domain.
const flowAspect = `<aspect>
  <xflow name="syncs">
    <start>
      <pointcut>execution(ksys_sync)</pointcut>
      <action>register_flowid(syncs, current, get_new_flowid());</action>
    </start>
  </xflow>
</aspect>
`

const refusedAspect = `<aspect>
  <advice>
    <pointcut>execution(ksys_sync)</pointcut>
    <before>STORE_DATA(1);</before>
  </advice>
  <advice>
    <pointcut>execution(exc_int3) AND within_file(%traps.c@b)</pointcut>
    <before>STORE_DATA(2);</before>
  </advice>
</aspect>
`

// One weave into two Debian labs named by a domains file: each kernel
// gets only the hooks of the advice its @domain qualifiers allow (its
// kprobes list and klasy status --domains say so); a weave that one
// kernel refuses, and one with a domain that does not answer, leave both
// kernels' modules and kprobes as they were; unweave --domains takes
// klasy out of both.
func TestWeaveDomainsInLabs(t *testing.T) {
	if testing.Short() {
		t.Skip("boots two labs")
	}
	la := labboot.Boot(t, lab.Config{Name: labboot.Name("doma"), Kernel: lab.Debian})
	lb := labboot.Boot(t, lab.Config{Name: labboot.Name("domb"), Kernel: lab.Debian})
	dir := t.TempDir()
	write := func(name, text string) string { return writeFile(t, dir, name, text) }
	labsText := "domains:\n  - name: a\n    lab: " + la.Name() + "\n  - name: b\n    lab: " + lb.Name() + "\n"
	dfile := write("labs.yaml", labsText)
	dom := write("dom.klasy", domAspect)
	refused := write("refused.klasy", refusedAspect)
	flows := write("flows.klasy", flowAspect)

	klasyErr := func(args ...string) (string, string, error) {
		t.Helper()
		var out, errb bytes.Buffer
		err := run(&stdio{In: strings.NewReader(""), Out: &out, Err: &errb}, args)
		return out.String(), errb.String(), err
	}
	klasy := func(args ...string) string {
		t.Helper()
		out, errs, err := klasyErr(args...)
		if err != nil {
			t.Fatalf("klasy %s: %v\n%s", strings.Join(args, " "), err, errs)
		}
		return out
	}
	exec := func(l *lab.Lab, argv ...string) string {
		t.Helper()
		return klasy(append([]string{"lab", "exec", l.Name(), "--"}, argv...)...)
	}
	state := func(l *lab.Lab) string {
		t.Helper()
		return exec(l, "sh", "-c", labboot.KernelState)
	}
	beforeA, beforeB := state(la), state(lb)
	woven := false
	defer func() {
		if woven {
			klasyErr("unweave", "--domains", dfile, "--all")
		}
	}()

	out := klasy("weave", "--domains", dfile, dom)
	woven = true
	t.Logf("klasy weave --domains:\n%s", out)
	for _, w := range []string{"dom: woven into domain a (lab " + la.Name() + "): 4 join points", "dom: woven into domain b (lab " + lb.Name() + "): 2 join points"} {
		if !strings.Contains(out, w) {
			t.Errorf("weave --domains printed\n%s\nwithout %q", out, w)
		}
	}
	// Each runtime makes flow IDs as its domain: the index in the file
	// in the low bits, so no two domains make the same ID.
	for i, l := range []*lab.Lab{la, lb} {
		got := exec(l, "cat", "/sys/module/klasy_runtime/parameters/flow_domain", "/sys/module/klasy_runtime/parameters/flow_domains")
		if want := fmt.Sprintf("%d\n2\n", i); got != want {
			t.Errorf("lab %s's runtime makes flow IDs as domain/domains %q, want %q", l.Name(), got, want)
		}
	}
	// A flow woven into one lab alone would make IDs as the only domain:
	// refused while the runtime there is domain 0 of 2, nothing changed.
	wovenKernel := state(la)
	if _, errs, err := klasyErr("weave", "--lab", la.Name(), flows); err == nil || !strings.Contains(err.Error(), "makes flow IDs as domain 0 of 2, this weave needs domain 0 of 1") {
		t.Errorf("a flow weave into lab a alone: %v\n%s; want it refused for the runtime's flow domain", err, errs)
	}
	if now := state(la); now != wovenKernel {
		t.Errorf("the refused flow weave changed lab a:\n%s\nbefore it:\n%s", now, wovenKernel)
	}
	// Each kernel's hooks: its own functions, not the other's (entries
	// on the aspect's ftrace_ops, in ftrace's enabled functions).
	for _, c := range []struct {
		l        *lab.Lab
		has, not []string
	}{
		{la, []string{"\nksys_pread64 (", "\nksys_lseek ("}, []string{"ksys_write"}},
		{lb, []string{"\nksys_write (", "\nksys_lseek ("}, []string{"ksys_pread64"}},
	} {
		kp := exec(c.l, "sh", "-c", "cat /sys/kernel/debug/kprobes/list; echo; cat /sys/kernel/debug/tracing/enabled_functions")
		for _, h := range c.has {
			if !strings.Contains(kp, h) {
				t.Errorf("lab %s's kprobes and ftrace's enabled functions lack %q:\n%s", c.l.Name(), h, kp)
			}
		}
		for _, n := range c.not {
			if strings.Contains(kp, n) {
				t.Errorf("lab %s has a kprobe on %s, advice of the other domain:\n%s", c.l.Name(), n, kp)
			}
		}
	}
	var st struct {
		Domains []struct {
			Domain  string `json:"domain"`
			Target  string `json:"target"`
			Runtime bool   `json:"runtime"`
			Aspects []struct {
				Name  string `json:"name"`
				Hooks []struct {
					Advice    []int  `json:"advice"`
					Function  string `json:"function"`
					InlinedIn string `json:"inlined_in"`
				} `json:"hooks"`
			} `json:"aspects"`
		} `json:"domains"`
	}
	if err := json.Unmarshal([]byte(klasy("status", "--domains", dfile, "--json")), &st); err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{"a": {"1 ksys_pread64", "1 ksys_pread64 in __ia32_sys_pread64", "1 ksys_pread64 in __x64_sys_pread64", "3 ksys_lseek"},
		"b": {"2 ksys_write", "3 ksys_lseek"}}
	if len(st.Domains) != 2 || st.Domains[0].Domain != "a" || st.Domains[1].Domain != "b" {
		t.Fatalf("status --domains --json: %+v", st)
	}
	for _, d := range st.Domains {
		if !d.Runtime || len(d.Aspects) != 1 || d.Aspects[0].Name != "dom" {
			t.Errorf("domain %s: %+v, want the runtime and aspect dom", d.Domain, d)
			continue
		}
		var got []string
		for _, h := range d.Aspects[0].Hooks {
			s := strings.Trim(fmt.Sprint(h.Advice), "[]") + " " + h.Function
			if h.InlinedIn != "" {
				s += " in " + h.InlinedIn
			}
			got = append(got, s)
		}
		slices.Sort(got)
		if !slices.Equal(got, want[d.Domain]) {
			t.Errorf("domain %s's hooks %q, want %q", d.Domain, got, want[d.Domain])
		}
	}
	text := klasy("status", "--domains", dfile)
	for _, w := range []string{"domain a (lab " + la.Name() + "): klasy runtime", "domain b (lab " + lb.Name() + "): klasy runtime", "aspect dom (module klasy_a_dom): 4 hooks", "aspect dom (module klasy_a_dom): 2 hooks"} {
		if !strings.Contains(text, w) {
			t.Errorf("status --domains printed\n%s\nwithout %q", text, w)
		}
	}
	wovenA, wovenB := state(la), state(lb)

	// b's kernel refuses exc_int3 (noinstr: no kprobe, no ftrace site)
	// after a's took ksys_sync: a is rolled back.
	t.Setenv(weaver.NoPrecheckEnv, "1")
	_, _, err := klasyErr("weave", "--domains", dfile, refused)
	t.Logf("weave refused in b: %v", err)
	if err == nil || !strings.Contains(err.Error(), "domain b: ") || !strings.Contains(err.Error(), "exc_int3") || !strings.Contains(err.Error(), "rolled back from domain a") {
		t.Errorf("weave refused in b: %v, want b's refusal of exc_int3 and a rolled back", err)
	}
	if a, b := state(la), state(lb); a != wovenA || b != wovenB {
		t.Errorf("a weave refused in b changed the kernels:\na before %q\na after  %q\nb before %q\nb after  %q", wovenA, a, wovenB, b)
	}
	t.Setenv(weaver.NoPrecheckEnv, "")

	// A third domain whose agent does not answer: nothing is woven.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	k := la.Kernel()
	threeText := "ca: {cert: keys/ca.crt, key: keys/ca.key}\ncontroller: {cert: keys/c.crt, key: keys/c.key}\n" + labsText +
		"  - name: c\n    address: " + addr + "\n    cert: keys/c-agent.crt\n    key: keys/c-agent.key\n    vmlinux: " + k.Vmlinux + "\n    headers: " + k.BuildDir + "\n"
	three := write("three.yaml", threeText)
	f, err := domains.Parse(three, []byte(threeText))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := domains.GenerateKeys(f); err != nil {
		t.Fatal(err)
	}
	if _, _, err := klasyErr("weave", "--domains", three, refused); err == nil || !strings.Contains(err.Error(), "domain c: its agent at "+addr) {
		t.Errorf("weave with domain c unreachable: %v, want an error naming c", err)
	}
	if a, b := state(la), state(lb); a != wovenA || b != wovenB {
		t.Errorf("a weave with an unreachable domain changed the kernels")
	}

	out = klasy("unweave", "--domains", dfile, "dom")
	woven = false
	for _, w := range []string{"dom: unwoven from domain a (lab " + la.Name() + ")", "dom: unwoven from domain b (lab " + lb.Name() + ")", "the klasy runtime is removed from domain b"} {
		if !strings.Contains(out, w) {
			t.Errorf("unweave --domains printed\n%s\nwithout %q", out, w)
		}
	}
	if a, b := state(la), state(lb); a != beforeA || b != beforeB {
		t.Errorf("after unweave --domains the kernels are not as before:\na %q\nwas %q\nb %q\nwas %q", a, beforeA, b, beforeB)
	}
	if _, _, err := klasyErr("unweave", "--domains", dfile, "dom"); err == nil || !strings.Contains(err.Error(), "aspect dom is not woven into any domain") {
		t.Errorf("unweave of an aspect woven nowhere: %v", err)
	}
}
