// Package inlexit finds the exits of an inlined copy of a function from
// its host's machine code: the first instructions run after the copy's
// code (its DWARF ranges) is left, where the after advice of the copy
// runs as kprobes. The caller's code that the compiler scheduled inside
// the copy's (run straight back into it, entered from nothing else)
// counts as the copy's, and an entry DWARF puts just before the copy's
// code as its start. It refuses, with the reason, a copy whose exits
// cannot all be found: one left by an indirect jump, a return or a tail
// call, one whose code is also entered around its entry, one whose exit
// is also reached from code outside the copy (unless only jmps of the
// copy go there: the hooks then go on those jmps). The kernel's static
// branches (jump labels) come in the host's graph as two-way branches,
// so both of their ways are followed.
package inlexit

import (
	"fmt"
	"slices"

	"golang.org/x/arch/x86/x86asm"

	"github.com/klasy/klasy/x86code"
)

// Exit is one exit of a copy: Addr is the first instruction outside the
// copy's ranges, From the copy's instructions that go there. Jump: every
// From is an unconditional jmp, so the hook may go on the jmps (Addr is
// also reached from outside the copy).
type Exit struct {
	Addr uint64
	From []uint64
	Jump bool
}

// Hooks are the addresses a hook of the copy's after advice goes on for
// this exit: Addr, or the jmps leaving for it.
func (e Exit) Hooks() []uint64 {
	if e.Jump {
		return e.From
	}
	return []uint64{e.Addr}
}

// Find returns the exits of the copy whose code is ranges and whose
// entry is entry, inside the function whose graph is g; insns decodes
// the host's code in [lo, hi). An error says why the exits cannot be
// found soundly.
func Find(g *x86code.Graph, insns func(lo, hi uint64) []x86code.Insn, ranges [][2]uint64, entry uint64) ([]Exit, error) {
	c := newCode(g, insns)
	inR := func(a uint64) bool {
		for _, r := range ranges {
			if a >= r[0] && a < r[1] {
				return true
			}
		}
		return false
	}
	if _, ok := c.at[entry]; !ok {
		return nil, fmt.Errorf("its entry %#x is not an instruction of its function", entry)
	}
	// DWARF may put the entry before the copy's code (in the caller's
	// prologue): the code from there must run straight into it, so that
	// the entry's hook and the copy's code run as often.
	for at := entry; ; {
		if inR(at) {
			entry = at
			break
		}
		e := &c.list[c.at[at]]
		if len(e.succs) != 1 || e.indirect || e.leaves {
			return nil, fmt.Errorf("its entry %#x is outside its code and does not run straight into it (a branch at %#x)", entry, at)
		}
		next := e.succs[0]
		if _, ok := c.at[next]; !ok || next <= at {
			return nil, fmt.Errorf("its entry %#x is outside its code and does not run straight into it", entry)
		}
		for _, p := range c.preds[next] {
			if p != at && c.live[p] {
				return nil, fmt.Errorf("its entry %#x is outside its code, and the way from it to the code at %#x is also entered from %#x", entry, next, p)
			}
		}
		at = next
	}
	// The copy's code run from its entry, up to where it is left.
	seen := map[uint64]bool{entry: true}
	stack := []uint64{entry}
	exits := map[uint64][]uint64{}
	for len(stack) > 0 {
		pc := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		n := c.at[pc]
		in := &c.list[n].in
		switch {
		case c.list[n].indirect:
			return nil, fmt.Errorf("an indirect jump at %#x leaves its code for places the machine code does not name", pc)
		case c.list[n].leaves:
			if in.Inst.Op == x86asm.RET {
				return nil, fmt.Errorf("a return at %#x is inside its code (the copy's exit is the host's return)", pc)
			}
			return nil, fmt.Errorf("a jump out of its function at %#x (a tail call or a return thunk) is inside its code", pc)
		}
		for _, s := range c.list[n].succs {
			if s == entry {
				return nil, fmt.Errorf("its entry %#x is the head of a loop inside its code (%#x goes back to it)", entry, pc)
			}
			if !inR(s) {
				run := c.straightBack(s, pc, inR)
				if run == nil {
					exits[s] = append(exits[s], pc)
					continue
				}
				// The caller's code scheduled inside the copy's.
				for _, x := range run[:len(run)-1] {
					seen[x] = true
				}
				s = run[len(run)-1]
			}
			if _, ok := c.at[s]; !ok {
				return nil, fmt.Errorf("%#x goes to %#x, inside its code but not an instruction of it", pc, s)
			}
			if !seen[s] {
				seen[s] = true
				stack = append(stack, s)
			}
		}
	}
	// Code of the copy that its entry does not lead to but that runs
	// (the host's entry reaches it) and does not run straight into the
	// entry either: entered around the entry, its exits would be
	// unmatched.
	for _, e := range c.list {
		pc := e.in.PC
		if inR(pc) && !seen[pc] && c.live[pc] && !c.leadsTo(pc, entry) {
			return nil, fmt.Errorf("its code at %#x is reached around its entry %#x (interleaved with its caller's code, or entered elsewhere)", pc, entry)
		}
	}
	// Code of the copy after its entry entered from outside it.
	for pc := range seen {
		if pc == entry {
			continue
		}
		for _, p := range c.preds[pc] {
			if !seen[p] && c.live[p] {
				return nil, fmt.Errorf("its code at %#x is also reached from %#x, outside the copy's code run from its entry", pc, p)
			}
		}
	}
	var out []Exit
	for addr, from := range exits {
		slices.Sort(from)
		e := Exit{Addr: addr, From: slices.Compact(from)}
		for _, p := range c.preds[addr] {
			if seen[p] || !c.live[p] {
				continue
			}
			// Reached from outside too: the hook goes on the jmps that
			// leave the copy for it, if only jmps do.
			e.Jump = true
			for _, f := range e.From {
				if in := &c.list[c.at[f]].in; in.Inst.Op != x86asm.JMP {
					return nil, fmt.Errorf("its exit %#x (from %#x) is also reached from %#x outside the copy", addr, f, p)
				}
			}
			break
		}
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b Exit) int {
		if a.Addr < b.Addr {
			return -1
		}
		if a.Addr > b.Addr {
			return 1
		}
		return 0
	})
	if len(out) == 0 {
		return nil, fmt.Errorf("its code is never left (a loop without exit, or it ends in a call that does not return)")
	}
	return out, nil
}

// insn is one instruction of the host and where it may go next.
type insn struct {
	in       x86code.Insn
	succs    []uint64
	indirect bool // an indirect jump: successors unknown
	leaves   bool // a return, or a jump out of the function
}

// code is the host's instructions, block by block, with their arcs.
type code struct {
	list  []insn
	at    map[uint64]int // instruction address → index in list
	preds map[uint64][]uint64
	live  map[uint64]bool // the instructions the host's entry leads to
}

func newCode(g *x86code.Graph, insns func(lo, hi uint64) []x86code.Insn) *code {
	c := &code{at: map[uint64]int{}, preds: map[uint64][]uint64{}, live: map[uint64]bool{}}
	for _, b := range g.Blocks {
		ins := insns(b.Start, b.End)
		for i, in := range ins {
			e := insn{in: in}
			if i+1 < len(ins) {
				e.succs = []uint64{ins[i+1].PC}
			} else {
				e.succs, e.indirect, e.leaves = b.Succs, b.Indirect, b.Exit
			}
			c.at[in.PC] = len(c.list)
			c.list = append(c.list, e)
		}
	}
	for _, e := range c.list {
		for _, s := range e.succs {
			c.preds[s] = append(c.preds[s], e.in.PC)
		}
	}
	c.live[g.Entry] = true
	for stack := []uint64{g.Entry}; len(stack) > 0; {
		pc := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		i, ok := c.at[pc]
		if !ok {
			continue
		}
		for _, s := range c.list[i].succs {
			if !c.live[s] {
				c.live[s] = true
				stack = append(stack, s)
			}
		}
	}
	return c
}

// straightBack returns the instructions from s, which from goes to
// outside the copy, up to the first one back inside it (inR), if they
// run straight there (no branch) and are entered from nothing else: the
// caller's code the compiler scheduled in the middle of the copy's,
// which runs once each time the copy does. Nil if they do not.
func (c *code) straightBack(s, from uint64, inR func(uint64) bool) []uint64 {
	var run []uint64
	for x, prev := s, from; len(run) < 32; {
		if inR(x) {
			return append(run, x)
		}
		i, ok := c.at[x]
		if !ok {
			return nil
		}
		for _, p := range c.preds[x] {
			if p != prev && c.live[p] {
				return nil
			}
		}
		e := &c.list[i]
		if len(e.succs) != 1 || e.indirect || e.leaves {
			return nil
		}
		run = append(run, x)
		x, prev = e.succs[0], x
	}
	return nil
}

// leadsTo reports whether from runs straight (no branch) into to: code
// of the copy the compiler hoisted above its entry.
func (c *code) leadsTo(from, to uint64) bool {
	for pc := from; pc != to; {
		i, ok := c.at[pc]
		if !ok || len(c.list[i].succs) != 1 || c.list[i].indirect || c.list[i].leaves || c.list[i].succs[0] <= pc {
			return false
		}
		pc = c.list[i].succs[0]
	}
	return true
}

// CheckPatched says why a copy whose code is ranges cannot have its
// exits found if the kernel may replace the code at site with repl
// (decoded at its own addresses, which end at replEnd): an alternative
// whose replacement returns, or jumps neither inside itself nor inside
// the copy, leaves the copy where the image's code does not.
func CheckPatched(site uint64, repl []x86code.Insn, replEnd uint64, ranges [][2]uint64) error {
	in := func(a uint64) bool {
		if a >= repl[0].PC && a < replEnd {
			return true
		}
		for _, r := range ranges {
			if a >= r[0] && a < r[1] {
				return true
			}
		}
		return false
	}
	for _, r := range repl {
		op := r.Inst.Op
		if op == x86asm.RET || op == x86asm.JMP && len(r.Inst.Args) > 0 && r.Inst.Args[0] != nil {
			if rel, ok := r.Inst.Args[0].(x86asm.Rel); ok && in(uint64(int64(r.End())+int64(rel))) {
				continue
			}
			return fmt.Errorf("an alternative at %#x (code the kernel patches at boot) may be replaced by one that leaves its code at %#x", site, r.PC)
		}
		if x86code.EndsBlock(&r.Inst) && op != x86asm.UD2 {
			rel, ok := r.Inst.Args[0].(x86asm.Rel)
			if !ok || !in(uint64(int64(r.End())+int64(rel))) {
				return fmt.Errorf("an alternative at %#x (code the kernel patches at boot) may be replaced by one that branches out of its code at %#x", site, r.PC)
			}
		}
	}
	return nil
}
