package score

import (
	"slices"
	"strings"

	"golang.org/x/arch/x86/x86asm"

	"github.com/klasy/klasy/accessinfer"
	"github.com/klasy/klasy/debugklasy"
	"github.com/klasy/klasy/dwarfmap"
	"github.com/klasy/klasy/x86code"
)

// israConfirmed says whether a is a load that IPA-SRA moved out of a
// clone into its caller: GCC's f.isra.N takes the value of p->m where
// f took p, and every caller loads p->m before the call. The plugin
// records the read in f, through f's parameter, at f's line
// (TestPluginMissesISRA); the instruction is in the caller, under the
// call's line. a agrees when the loaded register (or a register it is
// moved to) is an argument register at the first call or jump after
// it in its block, that call's target is such a clone (its symbol has
// ".isra." and is not the function's own name), and the plugin
// records a read of a's member through a parameter of that function.
func (c *comparer) israConfirmed(a *accessinfer.Access) bool {
	if a.Kind != x86code.Load || c.img == nil {
		return false
	}
	bl, ok := c.block(a.PC)
	if !ok {
		return false
	}
	insns, ok := c.insns[bl[0]]
	if !ok {
		insns = c.b.Insns(bl[0], bl[1])
		c.insns[bl[0]] = insns
	}
	var held uint16 // registers (by number) holding the loaded value
	for i := range insns {
		in := &insns[i].Inst
		switch {
		case insns[i].PC < a.PC:
			continue
		case insns[i].PC == a.PC:
			if r, ok := regNum(in.Args[0]); ok {
				held = 1 << r
			}
			continue
		case in.Op == x86asm.CALL || in.Op == x86asm.JMP:
			const args = 1<<7 | 1<<6 | 1<<2 | 1<<1 | 1<<8 | 1<<9 // rdi rsi rdx rcx r8 r9
			rel, ok := in.Args[0].(x86asm.Rel)
			if !ok || held&args == 0 {
				return false
			}
			return c.israClone(insns[i].End()+uint64(int64(rel)), a)
		}
		// A register the instruction writes no longer holds the value
		// unless it is a copy of it.
		dst, ok := regNum(in.Args[0])
		if !ok || in.Op == x86asm.CMP || in.Op == x86asm.TEST || in.Op == x86asm.PUSH {
			continue
		}
		src, srcOK := regNum(in.Args[1])
		if in.Op == x86asm.MOV && srcOK && held&(1<<src) != 0 {
			held |= 1 << dst
		} else {
			held &^= 1 << dst
		}
	}
	return false
}

// israClone says whether target is the entry of an IPA-SRA clone of a
// function the plugin records reading a's member through a parameter.
func (c *comparer) israClone(target uint64, a *accessinfer.Access) bool {
	fi, ok := c.b.FuncAt(target)
	if !ok || fi.Entry != target {
		return false
	}
	clone, ok := c.clones[target]
	if !ok {
		syms, _ := c.img.SymbolsAt(target)
		for _, s := range syms {
			clone = clone || (s != fi.Name && strings.HasPrefix(s, fi.Name+".") && strings.Contains(s, ".isra."))
		}
		c.clones[target] = clone
	}
	if !clone {
		return false
	}
	if c.readsParam(fi.Name, a) {
		return true
	}
	// The read may be in a helper the clone's body calls, inlined
	// there before IPA-SRA moved its load out
	// (pde_data(file_inode(file)) in write_irq_affinity): the plugin
	// records it in the helper, through the helper's parameter.
	end := c.b.NextDecl(fi.File, fi.Line)
	if end == 0 || end > fi.Line+300 {
		end = fi.Line + 300
	}
	for l := fi.Line; l < end; l++ {
		for _, f := range calledNames(c.src.line(fi.File, l)) {
			if c.inlined(f) && c.readsParam(f, a) {
				return true
			}
		}
	}
	return false
}

// readsParam says whether the plugin records function f reading a's
// member through a parameter.
func (c *comparer) readsParam(f string, a *accessinfer.Access) bool {
	return c.helperIn[hostVarKey{hostKey{0, a.Struct, a.Member}, f}]&(1<<debugklasy.Read) != 0
}

// regNum numbers a general register of 16, 32 or 64 bits as x86
// encodes it (rax 0 ... r15 15).
func regNum(a x86asm.Arg) (uint, bool) {
	r, ok := a.(x86asm.Reg)
	switch {
	case !ok:
		return 0, false
	case r >= x86asm.RAX && r <= x86asm.R15:
		return uint(r - x86asm.RAX), true
	case r >= x86asm.EAX && r <= x86asm.R15L:
		return uint(r - x86asm.EAX), true
	case r >= x86asm.AX && r <= x86asm.R15W:
		return uint(r - x86asm.AX), true
	}
	return 0, false
}

// baseConfirmed says whether a is the access of a helper that the
// plugin names in the base expression of a record at one of the lines
// of a's block, the plugin recording that helper accessing a's member
// through its parameter in a mode a's use fits: inode.i_mode read
// through "file_inode(file)" at file_start_write's line in vfs_write,
// where the scheduler moved file_inode's load among the instructions
// of the line before and its own row is lost; qdisc_skb_cb.pkt_len
// written through "qdisc_skb_cb(skb)", which takes &skb->cb and has no
// code of its own (TestHelperBaseConfirmed). A helper with an
// out-of-line body does its access there, not here.
func (c *comparer) baseConfirmed(a *accessinfer.Access) bool {
	for _, l := range c.linesOf(a, false) {
		for _, f := range c.baseCalls[l] {
			modes := c.helperIn[hostVarKey{hostKey{0, a.Struct, a.Member}, f}]
			for m := debugklasy.Read; m <= debugklasy.Addr; m++ {
				if modes&(1<<m) != 0 && c.fits(a, m) && !c.outOfLine(f) {
					return true
				}
			}
		}
	}
	return false
}

// outOfLine says whether the image holds an out-of-line body of f.
func (c *comparer) outOfLine(f string) bool {
	is, ok := c.ool[f]
	if !ok {
		is = slices.ContainsFunc(c.b.Instances(f, ""), func(in dwarfmap.Instance) bool { return !in.Inlined })
		c.ool[f] = is
	}
	return is
}
