package resolve

import (
	"fmt"
	"slices"
	"strings"

	"github.com/klasy/klasy/aspect"
	"github.com/klasy/klasy/dwarfmap"
	"github.com/klasy/klasy/weaver/joinpoint"
	"github.com/klasy/klasy/weaver/resolve/linecode"
	"github.com/klasy/klasy/x86code"
)

// Basic-block join points: block(F) selects the entry of every basic
// block of the out-of-line bodies of the functions F matches (static
// ones of several files too; within_file picks among them), as GILK put
// hooks on any basic block and KernInst counted them. The blocks are
// dwarfmap's (calls do not end a block; the kernel's static branches
// do), over all of a body's ranges, its .cold part too. Inlined copies
// of F are not F's blocks: their code is in the blocks of the functions
// it is inlined into, which block(G) of those counts. When the kernel
// refuses a hook on a block's first instruction (a static call site),
// the hook goes on the next instruction it accepts, which runs as often;
// the entry block's goes past the ftrace site (see blocks).
// A function with an indirect jump (a jump table) has blocks only that
// jump reaches, whose targets klasy does not follow: those blocks are
// skipped, with the jump named, as where they start is unknown.

// blockGroup resolves an AND-group of block(F).
func (r *resolver) blockGroup(n int, pc *aspect.Pointcut, g []*aspect.Term, timing joinpoint.Timing) error {
	var refs []funcRef
	var files []*aspect.WithinFile
	var locals []*aspect.LocalVar
	var args []*aspect.Argument
	for _, t := range g {
		switch {
		case t.Block != nil:
			refs = append(refs, funcRef{"block", t.Pos.Offset, t.Block.Func})
		case t.WithinFile != nil:
			files = append(files, t.WithinFile)
		case t.LocalVar != nil:
			locals = append(locals, t.LocalVar)
		case t.Argument != nil:
			args = append(args, t.Argument)
		default:
			return r.errAt(pc, t.Pos.Offset, "%s cannot be woven at basic-block join points", t.Designator())
		}
	}
	if timing == joinpoint.After {
		return r.errAt(pc, refs[0].off, "block(...) selects the entries of basic blocks, which have no after: use <before> advice")
	}
	params := joinpoint.PointcutParams(pc)
	kernel := r.x
	defer func() { r.x, r.cur = kernel, nil }()
	var nameErr error
	found, inlineOnly := 0, []string(nil)
	for i, im := range r.images() {
		r.x, r.cur = im.X, im
		names, err := r.functionsOf(pc, refs)
		if err != nil {
			if i == 0 {
				nameErr = err
			}
			continue
		}
		b, err := im.Batch()
		if err != nil {
			return err
		}
		for _, name := range names {
			for _, fi := range r.x.Funcs(name) {
				if fi.InlineOnly {
					inlineOnly = append(inlineOnly, name)
					continue
				}
				if !matchFiles(files, fi.File) {
					continue
				}
				found++
				if err := r.blocks(n, b, im, fi, args, locals, params); err != nil {
					return err
				}
			}
		}
	}
	if found == 0 {
		if nameErr != nil && len(inlineOnly) == 0 {
			return nameErr
		}
		why := "no out-of-line body of it is in the file within_file(...) names"
		if len(inlineOnly) > 0 {
			why = fmt.Sprintf("%s is only ever inlined: its code is in the blocks of the functions it is inlined into (block(CALLER))", strings.Join(slices.Compact(inlineOnly), ", "))
		}
		return r.errAt(pc, refs[0].off, "block(%s): %s", refs[0].fn.Value, why)
	}
	return nil
}

// blocks adds the join points of the basic blocks of body fi.
func (r *resolver) blocks(n int, b *dwarfmap.Batch, im *linecode.Image, fi dwarfmap.FuncInfo, args []*aspect.Argument, locals []*aspect.LocalVar, params []string) error {
	g, err := b.Graph(fi)
	if err != nil {
		jp := &joinpoint.JoinPoint{Advice: n, Kind: joinpoint.Kprobe, Addr: fi.Entry, Block: fi.Entry, Module: im.Module, Function: fi.Name, File: fi.File, Line: fi.Line}
		jp.Skipped = "no code: " + err.Error()
		r.add(jp)
		return nil
	}
	unbounded := UnboundedBlocks(g)
	for _, blk := range g.Blocks {
		if blk.Padding {
			continue
		}
		jp := &joinpoint.JoinPoint{Advice: n, Kind: joinpoint.Kprobe, Addr: blk.Start, Block: blk.Start, Module: im.Module, Function: fi.Name, File: fi.File, Line: fi.Line}
		if file, line, ok := b.Index().LineAt(blk.Start); ok {
			jp.File, jp.Line = file, line
		}
		if why, ok := unbounded[blk.Start]; ok {
			jp.Skipped = why
			r.add(jp)
			continue
		}
		// The first instruction of the block the kernel accepts a hook
		// on. Past the ftrace site at a function's entry (a nop once
		// booted, so it runs as often): a kprobe on the site is an
		// ftrace-based one, which takes a hundred times longer to
		// register (an ftrace update, patching and waiting for every
		// CPU), and a cover registers one per function.
		insns := b.Insns(blk.Start, blk.End)
		if len(insns) > 1 && b.FtraceSite(insns[0].PC) {
			insns = insns[1:]
		}
		for _, in := range insns {
			why := linecode.CheckHookAddr(b, im, fi.Name, in.PC)
			if why == "" {
				jp.Addr, jp.Skipped = in.PC, ""
				break
			}
			if jp.Skipped == "" {
				jp.Skipped = why
			}
		}
		if jp.Skipped != "" {
			r.add(jp)
			continue
		}
		vals, skip, inScope := r.bindAt(b, im, jp.Addr, fi.Name, args, locals, params)
		if !inScope {
			continue
		}
		jp.Args, jp.Skipped = vals, skip
		r.add(jp)
	}
	return nil
}

// UnboundedBlocks says, for each block of g that only an indirect jump
// reaches (none of the known arcs from the entry does), why it is
// skipped: klasy does not follow the jump's targets (a jump table's),
// so where the blocks there start is unknown. Without an indirect jump,
// none is.
func UnboundedBlocks(g *x86code.Graph) map[uint64]string {
	out := map[uint64]string{}
	if len(g.Indirect) == 0 {
		return out
	}
	var jumps []string
	for _, in := range g.Indirect {
		jumps = append(jumps, fmt.Sprintf("%v at %#x", in.Inst, in.PC))
	}
	reach := g.Reachable()
	for _, blk := range g.Blocks {
		if !reach[blk.Start] && !blk.Padding {
			out[blk.Start] = fmt.Sprintf("unbounded: only an indirect jump reaches this code (%s), and klasy does not follow its targets (a jump table's): where its basic blocks start is unknown", strings.Join(jumps, ", "))
		}
	}
	return out
}
