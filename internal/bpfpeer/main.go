// Command bpfpeer is the BPF side of make bench's peers: what a BPF
// tool pays where klasy hooks, measured in the same lab boot as klasy.
// It loads one of two programs (null: returns at once; ringbuf: 8 bytes
// to a BPF ring buffer, read when it stops) as fentry, fexit or a
// kprobe on each function named, with github.com/cilium/ebpf, the
// library BPF tools in Go use; it is built static and copied into the
// lab's guest.
//
//	bpfpeer [-skip] fentry|fexit|kprobe null|ringbuf FUNC...
//
// It prints "attached N in NS ns" (CLOCK_MONOTONIC, program loads and
// attaches of all N), waits for SIGTERM or SIGINT, detaches, reads the
// ring buffer and prints "detached N in NS ns records R". With -skip, a
// function the kernel refuses is left out with a line "skipped FUNC:
// REASON" (BPF refuses some functions klasy hooks), and "functions
// FUNC..." before "attached" names those attached.
package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "bpfpeer: %v\n", err)
		os.Exit(1)
	}
}

// program is the instructions of the null or the ring buffer program.
func program(kind string, rb *ebpf.Map) (asm.Instructions, error) {
	switch kind {
	case "null":
		return asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()}, nil
	case "ringbuf":
		// bpf_ringbuf_output(&rb, &(u64){1}, 8, BPF_RB_NO_WAKEUP), as a tool records a
		// value.
		return asm.Instructions{
			asm.Mov.Imm(asm.R1, 1),
			asm.StoreMem(asm.RFP, -8, asm.R1, asm.DWord),
			asm.LoadMapPtr(asm.R1, rb.FD()),
			asm.Mov.Reg(asm.R2, asm.RFP),
			asm.Add.Imm(asm.R2, -8),
			asm.Mov.Imm(asm.R3, 8),
			asm.Mov.Imm(asm.R4, 1), // BPF_RB_NO_WAKEUP: read at the end
			asm.FnRingbufOutput.Call(),
			asm.Mov.Imm(asm.R0, 0),
			asm.Return(),
		}, nil
	}
	return nil, fmt.Errorf("program %q: want null or ringbuf", kind)
}

func run(args []string) error {
	skip := len(args) > 0 && args[0] == "-skip"
	if skip {
		args = args[1:]
	}
	if len(args) < 3 {
		return errors.New("usage: bpfpeer [-skip] fentry|fexit|kprobe null|ringbuf FUNC...")
	}
	mech, kind, funcs := args[0], args[1], args[2:]
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)

	var rb *ebpf.Map
	if kind == "ringbuf" {
		var err error
		// Room for every record of a timed loop: none is dropped, and
		// none is read until the end (klasy's records are not either),
		// so no reader's wake-ups count against the program.
		rb, err = ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.RingBuf, MaxEntries: 16 << 20})
		if err != nil {
			return fmt.Errorf("ring buffer: %w", err)
		}
		defer rb.Close()
	}
	insns, err := program(kind, rb)
	if err != nil {
		return err
	}

	start := time.Now()
	var links []link.Link
	var progs []*ebpf.Program
	var attached []string
	defer func() {
		for _, p := range progs {
			p.Close()
		}
	}()
	for _, fn := range funcs {
		spec := &ebpf.ProgramSpec{Instructions: insns, License: "GPL"}
		switch mech {
		case "fentry", "fexit":
			spec.Type, spec.AttachTo = ebpf.Tracing, fn
			spec.AttachType = map[string]ebpf.AttachType{"fentry": ebpf.AttachTraceFEntry, "fexit": ebpf.AttachTraceFExit}[mech]
		case "kprobe":
			spec.Type = ebpf.Kprobe
		default:
			return fmt.Errorf("mechanism %q: want fentry, fexit or kprobe", mech)
		}
		p, err := ebpf.NewProgram(spec)
		if err != nil && skip {
			fmt.Printf("skipped %s: %v\n", fn, err)
			continue
		}
		if err != nil {
			return fmt.Errorf("%s program for %s: %w", mech, fn, err)
		}
		progs = append(progs, p)
		var l link.Link
		if mech == "kprobe" {
			l, err = link.Kprobe(fn, p, nil)
		} else {
			l, err = link.AttachTracing(link.TracingOptions{Program: p, AttachType: spec.AttachType})
		}
		if err != nil && skip {
			fmt.Printf("skipped %s: %v\n", fn, err)
			continue
		}
		if err != nil {
			for _, l := range links {
				l.Close()
			}
			return fmt.Errorf("attaching %s to %s: %w", mech, fn, err)
		}
		links = append(links, l)
		attached = append(attached, fn)
	}
	took := time.Since(start)
	if skip {
		fmt.Printf("functions %s\n", strings.Join(attached, " "))
	}
	fmt.Printf("attached %d in %d ns\n", len(links), took.Nanoseconds())

	<-sigs
	start = time.Now()
	for _, l := range links {
		l.Close()
	}
	detach := time.Since(start)
	records := 0
	if rb != nil {
		rd, err := ringbuf.NewReader(rb)
		if err != nil {
			return err
		}
		defer rd.Close()
		rd.SetDeadline(time.Now())
		for {
			if _, err := rd.Read(); err != nil {
				break
			}
			records++
		}
	}
	fmt.Printf("detached %d in %d ns records %d\n", len(links), detach.Nanoseconds(), records)
	return nil
}
