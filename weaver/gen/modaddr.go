package gen

import (
	"fmt"

	"github.com/klasy/klasy/weaver/ctxvalue"
)

// ModuleLoc is where an address of a module's .ko is in the running
// kernel, read when the advice module is generated, and how kallsyms
// names that address there: Symbol+Offset.
type ModuleLoc struct {
	Addr   uint64
	Symbol string
	Offset uint64
}

// addrCheck is one running address in a module that the advice module
// uses: a hook's, or a static's its advice reads (target(x) of a struct
// GCC made a constant). The runtime compares kallsyms' name for it with
// symbol+offset [module] before registering anything: a module reloaded
// since the generation has moved, and the weave is refused.
type addrCheck struct {
	hook           int
	static         bool
	module, symbol string
	addr, offset   uint64
}

// relocate reads the running address of every hook in a module
// (modAddrs) and of every module static a context value reads
// (relocated), each with its check.
func (g *cgen) relocate(opt GenOptions) error {
	checked := map[uint64]bool{}
	loc := func(i int, static bool, module string, addr uint64) (uint64, error) {
		h := g.m.Hooks[i]
		if opt.ModuleAddr == nil {
			return 0, fmt.Errorf("hook at %s: in module %s, whose load address is not known", h.Function, module)
		}
		l, err := opt.ModuleAddr(module, addr)
		if err != nil {
			return 0, err
		}
		if !checked[l.Addr] {
			checked[l.Addr] = true
			g.checks = append(g.checks, addrCheck{hook: i, static: static, module: module, symbol: l.Symbol, addr: l.Addr, offset: l.Offset})
		}
		return l.Addr, nil
	}
	for i, h := range g.m.Hooks {
		if h.Module != "" {
			if g.modAddrs == nil {
				g.modAddrs = make([]uint64, len(g.m.Hooks))
			}
			a, err := loc(i, false, h.Module, h.Addr)
			if err != nil {
				return err
			}
			g.modAddrs[i] = a
		}
		for _, jp := range h.Points {
			for _, a := range jp.Args {
				if a.Value == nil || g.relocated[a.Value] != nil || len(a.Value.ModuleAddrs()) == 0 {
					continue
				}
				r, err := a.Value.Relocate(func(module string, addr uint64) (uint64, error) {
					return loc(i, true, module, addr)
				})
				if err != nil {
					return fmt.Errorf("hook at %s: %s: %w", h.Function, a.Var, err)
				}
				if g.relocated == nil {
					g.relocated = map[*ctxvalue.Value]*ctxvalue.Value{}
				}
				g.relocated[a.Value] = r
			}
		}
	}
	return nil
}

// checkTable writes the checks (klasy_rt.h: struct klasy_addr_check).
func (g *cgen) checkTable() {
	if len(g.checks) == 0 {
		return
	}
	g.p("")
	g.p("/*")
	g.p(" * What kallsyms must name at each module address this module uses,")
	g.p(" * as it was when the module was generated: the runtime compares before")
	g.p(" * it registers a hook, so a module reloaded since (moved) is refused.")
	g.p(" */")
	g.p("static const struct klasy_addr_check klasy_checks[%d] = {", len(g.checks))
	for _, c := range g.checks {
		static := ""
		if c.static {
			static = " .is_static = true,"
		}
		g.p("\t{ .addr = %#xUL, .module = %s, .symbol = %s, .offset = %#xUL, .hook = %d,%s },",
			c.addr, cString(c.module), cString(c.symbol), c.offset, c.hook, static)
	}
	g.p("};")
}
