// Package labview prints klasy lab status as a table: a row per lab
// (state, kernel, QEMU and its mux, memory, address, console log), a
// line per Xen domain, and what to do about a lab in trouble.
package labview

import (
	"fmt"
	"io"

	"github.com/klasy/klasy/lab"
)

// Table prints the labs sts to out, their trouble to errw.
func Table(out, errw io.Writer, sts []lab.Status) {
	if len(sts) == 0 {
		fmt.Fprintln(errw, "no labs (start one with: klasy lab up)")
		return
	}
	fmt.Fprintf(out, "%-12s %-8s %-7s %-18s %-8s %-8s %-6s %-5s %-16s %s\n", "NAME", "STATE", "KERNEL", "RELEASE", "PID", "MUX", "MEM", "CPUS", "ADDR", "CONSOLE LOG")
	for _, st := range sts {
		addr := st.Addr
		if st.LANAddr != "" {
			addr += "," + st.LANAddr
		}
		mux := "-"
		if st.MuxPID > 0 {
			mux = fmt.Sprint(st.MuxPID)
		}
		mem, cpus := "-", "-"
		if st.MemMB > 0 {
			mem, cpus = fmt.Sprintf("%dM", st.MemMB), fmt.Sprint(st.CPUs)
		}
		fmt.Fprintf(out, "%-12s %-8s %-7s %-18s %-8d %-8s %-6s %-5s %-16s %s\n", st.Name, st.State, orDash(st.Kernel), orDash(st.Release), st.PID,
			mux, mem, cpus, orDash(addr), st.ConsoleLog)
		for _, d := range st.Domains {
			fmt.Fprintf(out, "  %-10s %-14s agent %s (mutual TLS, %s)\n", d.Name, d.GuestAddr, d.Agent, st.DomainsFile)
		}
		switch {
		case st.State == "running" && st.Problem != "":
			fmt.Fprintf(errw, "lab %s: %s; its QEMU runs as pid %d: klasy lab down %s stops it\n", st.Name, st.Problem, st.PID, st.Name)
		case st.State == "hung":
			fmt.Fprintf(errw, "lab %s: hung: %s; klasy lab down %s stops it\n", st.Name, st.Problem, st.Name)
		case st.State == "stale":
			fmt.Fprintf(errw, "lab %s: QEMU is gone; klasy lab down %s removes its state\n", st.Name, st.Name)
		}
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
