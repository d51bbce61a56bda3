package resolve

import (
	"fmt"

	"github.com/klasy/klasy/aspect"
	"github.com/klasy/klasy/dwarfmap"
	"github.com/klasy/klasy/dwarfmap/elfimage"
	"github.com/klasy/klasy/weaver/joinpoint"
	"github.com/klasy/klasy/weaver/resolve/inlexit"
	"github.com/klasy/klasy/weaver/resolve/linecode"
	"github.com/klasy/klasy/x86code"
)

// inlinedAfter is the after advice n of an inlined copy whose entry's
// join point is base: a kprobe at each of the copy's exits (package
// inlexit), or base skipped with the reason they cannot be found or the
// advice cannot run there. All of a copy's exits or none: a timer
// started at its entry must stop on every way out. copies are all the
// copies of the function: an exit inside another's code would run this
// copy's after advice in the middle of that one (at its entry: after
// its before advice, in advice order).
func (r *resolver) inlinedAfter(n int, c dwarfmap.InlineEntry, copies []dwarfmap.InlineEntry, base *joinpoint.JoinPoint, args []*aspect.Argument, params []string) []*joinpoint.JoinPoint {
	skip := func(format string, a ...any) []*joinpoint.JoinPoint {
		base.Skipped = "after advice of an inlined copy: " + fmt.Sprintf(format, a...)
		return []*joinpoint.JoinPoint{base}
	}
	for _, s := range aspect.Specials(r.f.Advice[n-1].Body.S) {
		if s.Name == aspect.SpecialRetval {
			return skip("$retval$ is not known at its exits: an inlined copy returns no value in a register, the caller's code keeps it where it likes")
		}
	}
	if len(args) > 0 {
		return skip("argument(%s, %s): the copy's parameters are out of scope at its exits", args[0].Param.Value, args[0].Var.Value)
	}
	im := r.cur
	if im == nil {
		im = r.images()[0]
	}
	b, err := im.Batch()
	if err != nil {
		return skip("%v", err)
	}
	host, ok := b.FuncAt(c.Entry)
	if !ok {
		return skip("its entry %#x is in no function with debug info", c.Entry)
	}
	g, err := b.Graph(host)
	if err != nil {
		return skip("%v", err)
	}
	exits, err := inlexit.Find(g, b.Insns, c.Ranges, c.Entry)
	if err != nil {
		return skip("its exits cannot all be found: %v", err)
	}
	if why := r.patchedIn(im, c.Ranges); why != "" {
		return skip("its exits cannot all be found: %s", why)
	}
	var out []*joinpoint.JoinPoint
	for _, e := range exits {
		for _, h := range e.Hooks() {
			if why := linecode.CheckHookAddr(b, im, host.Name, h); why != "" {
				return skip("its exit at %#x cannot be hooked: %s", h, why)
			}
			for _, o := range copies {
				if o.Entry == c.Entry {
					continue
				}
				if _, in := linecode.InRanges(o.Ranges, h); in || h == o.Entry {
					return skip("its exit at %#x is in another copy of %s (at %#x, in %s)", h, c.Name, o.Entry, o.Caller)
				}
			}
			jp := *base
			jp.Addr = h
			if l, f := r.lineAt(h); l > 0 {
				jp.Line, jp.File = l, f
			}
			jp.Args, jp.Skipped = r.bind(h, "inline "+c.Name, c.Name, nil, params, false, false)
			out = append(out, &jp)
		}
	}
	return out
}

// patchedIn says why the alternatives (code the kernel rewrites at
// boot) inside ranges of image im may leave them where the image's code
// does not ("" if none does).
func (r *resolver) patchedIn(im *linecode.Image, ranges [][2]uint64) string {
	if r.alts == nil {
		r.alts = map[*linecode.Image][]elfimage.Alternative{}
	}
	alts, ok := r.alts[im]
	if !ok {
		alts, _ = im.X.Image().Alternatives() // a damaged table: none known
		r.alts[im] = alts
	}
	img := im.X.Image()
	for _, a := range alts {
		if _, in := linecode.InRanges(ranges, a.Site); !in || a.ReplLen == 0 {
			continue
		}
		code := img.ReadText(a.Repl, uint64(a.ReplLen))
		if code == nil {
			return fmt.Sprintf("the replacement of the alternative at %#x is not in the image", a.Site)
		}
		if repl := x86code.Decode(code, a.Repl); len(repl) > 0 {
			if err := inlexit.CheckPatched(a.Site, repl, a.Repl+uint64(a.ReplLen), ranges); err != nil {
				return err.Error()
			}
		}
	}
	return ""
}
