package gen

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/klasy/klasy/aspect"
	"github.com/klasy/klasy/kbuild"
	"github.com/klasy/klasy/weaver/ctxvalue"
	"github.com/klasy/klasy/weaver/joinpoint"
	"github.com/klasy/klasy/weaver/taskfilter"
)

// The advice module is C written from Go rather than from a template:
// advice bodies carry #line directives and a column map back to the
// aspect, which needs the generated line numbers as they are written.

// KASLRRef is a function of the kernel whose link-time address the
// advice module compares with its address in the running kernel, to add
// the KASLR slide to every hook address. register_kprobe is exported,
// and every advice module needs it anyway.
const KASLRRef = "register_kprobe"

// Module is a generated advice module.
type Module struct {
	Name   string // the kernel module's name: klasy_a_<aspect>
	Aspect string // the aspect's name
	// Files are the module's sources: NAME.c and Kbuild (klasy_rt.h comes
	// from the runtime).
	Files map[string][]byte
	Hooks []*joinpoint.Hook
	lines map[int]bodyLine // aspect line -> where its code is
	file  *aspect.File
}

// bodyLine maps one line of advice code in the generated C back to the
// aspect file: cols[i] is the offset in the advice body's text of the
// character at column i+1 of the generated line.
type bodyLine struct {
	body *aspect.Text
	cols []int
}

// Position maps a compiler diagnostic at line:col of the aspect file
// (through the module's #line directives) to the aspect's own position,
// correcting the column for $pc$/$retval$ and XML escapes.
func (m *Module) Position(line, col int) (aspect.Position, bool) {
	bl, ok := m.lines[line]
	if !ok || col < 1 {
		return aspect.Position{}, false
	}
	i := min(col-1, len(bl.cols)-1)
	if i < 0 {
		return aspect.Position{}, false
	}
	return m.file.Position(bl.body.Offset(bl.cols[i])), true
}

var nonIdent = regexp.MustCompile(`[^A-Za-z0-9_]`)

// CIdent makes s a C identifier's characters: every character other
// than [A-Za-z0-9_] becomes _.
func CIdent(s string) string { return nonIdent.ReplaceAllString(s, "_") }

// ModuleName is the kernel module name of an aspect: klasy_a_ and the
// aspect's name with every other character than [A-Za-z0-9_] made _,
// cut to the kernel's 55 characters.
func ModuleName(aspectName string) string {
	n := "klasy_a_" + CIdent(aspectName)
	if len(n) > 55 {
		n = n[:55]
	}
	return n
}

// AspectName is the name of the aspect in file path: its base name
// without .klasy.
func AspectName(path string) string {
	return strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
}

// GenOptions are what the generator needs beyond the aspect.
type GenOptions struct {
	// Path is the aspect file as the user named it: #line directives
	// use it, so compiler errors name it.
	Path string
	// RefAddr is KASLRRef's link-time address in the image.
	RefAddr uint64
	// ModuleAddr gives where an address of a module's .ko is in the
	// running kernel, and the symbol kallsyms names there (nil: no hook
	// or static may be in a module).
	ModuleAddr func(module string, addr uint64) (ModuleLoc, error)
	// Flows are the flows the (translated) advice names: the module
	// declares each, gets the runtime's table before its hooks go in
	// and puts it after they are out.
	Flows []string
	// Tasks are the tasks the advice runs for: every handler asks
	// first (taskfilter.Func).
	Tasks taskfilter.Filter
}

// Generate writes the advice module of aspect f for its resolved join
// points. Join points that are skipped are listed in a comment.
func Generate(f *aspect.File, jps []*joinpoint.JoinPoint, opt GenOptions) (*Module, error) {
	name := AspectName(opt.Path)
	SkipUnrunnable(f, jps)
	m := &Module{Name: ModuleName(name), Aspect: name, Hooks: joinpoint.Hooks(jps), lines: map[int]bodyLine{}, file: f}
	if len(m.Hooks) == 0 {
		return nil, fmt.Errorf("nothing to weave: no join point of %s can be woven", opt.Path)
	}
	used := map[int]bool{}
	for _, h := range m.Hooks {
		for _, jp := range h.Points {
			used[jp.Advice] = true
		}
	}
	if err := checkEvents(m.Hooks); err != nil {
		return nil, err
	}
	g := &cgen{m: m, file: m.Name + ".c", events: events(jps), filtered: !opt.Tasks.Empty(), returns: returnHooks(m)}
	if err := g.relocate(opt); err != nil {
		return nil, err
	}
	g.header(f, opt, jps)
	if err := g.callDecls(); err != nil {
		return nil, err
	}
	if err := g.sharedMapDecls(); err != nil {
		return nil, err
	}
	returns := map[int]string{} // the <replace> advice's return types
	for _, jp := range jps {
		if jp.Timing == joinpoint.Replace && jp.Skipped == "" {
			returns[jp.Advice] = jp.Returns
		}
	}
	g.retvals = retvalTypes(m.Hooks)
	for i, a := range f.Advice {
		if used[i+1] {
			if err := g.advice(i+1, a, opt.Path, returns[i+1]); err != nil {
				return nil, err
			}
		}
	}
	for i, h := range m.Hooks {
		if err := g.hook(i, h); err != nil {
			return nil, err
		}
	}
	g.tables(opt)
	m.Files = map[string][]byte{
		m.Name + ".c": []byte(g.b.String()),
		"Kbuild":      []byte(fmt.Sprintf("# Generated by klasy for aspect %s.\nobj-m := %s.o\nccflags-y := -I$(src)\n", name, m.Name)),
	}
	return m, nil
}

// cgen writes C, counting lines so #line can return to the generated
// file after advice code.
type cgen struct {
	m    *Module
	file string
	b    strings.Builder
	line int // lines written so far
	// modAddrs are the running addresses of hooks in modules, by hook
	// index (nil when no hook is in a module).
	modAddrs []uint64
	// relocated are the context values that read a module's static, at
	// its running address (by the resolver's value).
	relocated map[*ctxvalue.Value]*ctxvalue.Value
	// checks are what the runtime compares with kallsyms before it
	// registers a hook: each module address this module was generated for.
	checks []addrCheck
	// retvals are the types of $retval$ in advice that has one: by
	// advice number (retvalTypes).
	retvals map[int]string
	// events are the tracepoints of tracepoint advice, by advice number.
	events map[int]*joinpoint.Event
	// filtered: the handlers return at once for tasks opt.Tasks leaves
	// out.
	filtered bool
	// returns are the functions hooked on return when the aspect has
	// per-call variables (returnHooks).
	returns map[funcKey]bool
}

// skip returns from a handler, with ret ("" for a void one), for a
// task the advice does not run for.
func (g *cgen) skip(ret string) {
	if !g.filtered {
		return
	}
	if ret != "" {
		ret = " " + ret
	}
	g.p("	if (%s())", taskfilter.Func)
	g.p("		return%s;", ret)
}

// narrowInts are the integer types, as DWARF and dwarfmap.Return.C spell
// them, narrower than the 64-bit rax they come back in.
var narrowInts = map[string]bool{
	"_Bool": true, "char": true, "signed char": true, "unsigned char": true,
	"short int": true, "short unsigned int": true, "unsigned short": true,
	"int": true, "unsigned int": true,
}

// intType says whether the C type t (JoinPoint.Returns) is an integer.
func intType(t string) bool {
	return t != "" && t != "void" && !strings.HasSuffix(t, "*")
}

// returnValue is the C of a kretprobe hook's return value, as an unsigned
// long. An integer narrower than 64 bits comes back in the low bits of
// rax and the x86-64 ABI leaves the rest unspecified (a function
// returning int may leave 0 in the upper half, so -EINVAL reads
// 4294967274): cast to the function's type first, which sign- or
// zero-extends as the caller would.
func returnValue(h *joinpoint.Hook) string {
	t := ""
	if len(h.Points) > 0 {
		t = h.Points[0].Returns
	}
	if narrowInts[t] {
		return "(unsigned long)(" + t + ")regs_return_value(regs)"
	}
	return "regs_return_value(regs)"
}

// retvalTypes gives $retval$ the type of the function it comes from,
// for each advice whose kretprobe hooks all return one integer type: so
// that $retval$ < 0 means what it says for an int or long function.
// Advice at hooks of other kinds or types keeps unsigned long.
func retvalTypes(hooks []*joinpoint.Hook) map[int]string {
	types := map[int]string{}
	mixed := map[int]bool{}
	for _, h := range hooks {
		for _, jp := range h.Points {
			t := ""
			if h.Kind == joinpoint.Kretprobe && intType(jp.Returns) {
				t = jp.Returns
			}
			if prev, ok := types[jp.Advice]; ok && prev != t {
				mixed[jp.Advice] = true
			}
			types[jp.Advice] = t
		}
	}
	for n := range mixed {
		delete(types, n)
	}
	return types
}

func (g *cgen) p(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	g.b.WriteString(s)
	g.b.WriteByte('\n')
	g.line += strings.Count(s, "\n") + 1
}

func (g *cgen) header(f *aspect.File, opt GenOptions, jps []*joinpoint.JoinPoint) {
	g.p("// SPDX-License-Identifier: GPL-2.0")
	g.p("/*")
	g.p(" * %s - advice module of aspect %s, generated by klasy from", g.m.Name, g.m.Aspect)
	g.p(" * %s. Loaded by 'klasy weave', removed by 'klasy unweave'.", cComment(opt.Path))
	var skipped []*joinpoint.JoinPoint
	for _, jp := range jps {
		if jp.Skipped != "" {
			skipped = append(skipped, jp)
		}
	}
	if len(skipped) > 0 {
		g.p(" *")
		g.p(" * Join points not woven:")
		for _, jp := range skipped {
			g.p(" *   advice %d %s %s: %s", jp.Advice, jp.Timing, cComment(jp.Where()), cComment(jp.Skipped))
		}
	}
	g.p(" */")
	g.p("#define pr_fmt(fmt) KBUILD_MODNAME \": \" fmt")
	g.p("")
	g.p("#include <linux/kernel.h>")
	g.p("#include <linux/module.h>")
	g.p("#include <linux/kprobes.h>")
	g.p("#include <linux/ptrace.h>")
	g.p("#include <linux/uaccess.h>")
	g.p("#include <asm/msr.h>")
	g.p("#include \"klasy_rt.h\"")
	if len(f.Imports) > 0 {
		g.p("")
		g.p("/* The aspect's <import>s. */")
	}
	dir := filepath.Dir(opt.Path)
	for _, im := range f.Imports {
		h := strings.TrimSpace(im.Header)
		// A header next to the aspect (the dissertation's local.h) wins
		// over a kernel header of the same name.
		if p := filepath.Join(dir, h); fileExists(p) {
			if abs, err := filepath.Abs(p); err == nil {
				g.p("#include %q", abs)
				continue
			}
		}
		g.p("#include <%s>", h)
	}
	g.eventHeaders(jps)
	if c := opt.Tasks.C(); c != "" {
		g.p("")
		g.p("%s", c)
	}
	if len(opt.Flows) > 0 {
		g.p("")
		g.p("/* The flow tables of the aspect's <xflow>s, the runtime's. */")
		for _, fl := range opt.Flows {
			g.p("KLASY_DECLARE_FLOW(%s);", fl)
		}
	}
	g.p("")
	g.p("static struct klasy_hook klasy_hooks[%d];", len(g.m.Hooks))
	g.p("")
	g.p("/* The running kernel's KASLR slide, set by klasy_init. */")
	g.p("static unsigned long klasy_slide;")
	if n := postValues(g.m.Hooks); n > 0 {
		g.p("")
		g.p("/*")
		g.p(" * The context values of after advice at an accessing instruction, taken")
		g.p(" * before it by the kprobe's pre handler for its post handler: the kernel")
		g.p(" * single-steps the instruction in between with interrupts off, so one")
		g.p(" * per CPU is enough.")
		g.p(" */")
		g.p("struct klasy_after {")
		g.p("	u64 ok;")
		g.p("	u64 v[%d];", n)
		g.p("};")
		g.p("static DEFINE_PER_CPU(struct klasy_after, klasy_after);")
	}
}

// postValues is the most context values a kprobe-post hook takes.
func postValues(hooks []*joinpoint.Hook) int {
	n := 0
	for _, h := range hooks {
		if h.Kind != joinpoint.KprobePost {
			continue
		}
		k := 0
		for _, jp := range h.Points {
			for _, a := range jp.Args {
				if a.Value != nil {
					k++
				}
			}
		}
		n = max(n, k)
	}
	return n
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

// cComment makes s safe inside a C block comment.
func cComment(s string) string { return strings.ReplaceAll(s, "*/", "* /") }

// cString quotes s as a C string literal.
func cString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, c := range []byte(s) {
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < ' ' || c > '~':
			fmt.Fprintf(&b, "\\%03o", c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

var specialNames = map[string]string{
	aspect.SpecialPC:     "__klasy_pc",
	aspect.SpecialRetval: "__klasy_retval",
}

// advice writes advice number n as a C function whose body is the
// aspect's code under #line directives. A <replace> advice returns the
// replaced function's type (ret): gcc's -Wreturn-type is an error in it,
// and its closing brace stands where </replace> does in the aspect, so
// that a path that does not return is reported at the aspect's line.
func (g *cgen) advice(n int, a *aspect.Advice, path, ret string) error {
	retval := "unsigned long"
	if t := g.retvals[n]; t != "" {
		retval = t
	}
	params := []string{"struct klasy_hit *__klasy_hit", "unsigned long __klasy_pc", declare(retval, "__klasy_retval")}
	for _, p := range joinpoint.Params(a) {
		params = append(params, "void *"+p)
	}
	params = append(params, g.eventParams(n)...)
	replace := a.When == aspect.Replace
	if replace && ret == "" {
		return fmt.Errorf("advice %d: <replace> of a function whose return type is not known", n)
	}
	g.p("")
	g.p("/* advice %d: <%s> %s */", n, a.When, cComment(strings.Join(strings.Fields(a.Pointcut.Expr.String()), " ")))
	if replace {
		g.p("#pragma GCC diagnostic push")
		g.p("#pragma GCC diagnostic error \"-Wreturn-type\"")
		g.p("static %s klasy_advice_%d(%s)", declare(ret, ""), n, strings.Join(params, ", "))
	} else {
		g.p("static void klasy_advice_%d(%s)", n, strings.Join(params, ", "))
	}
	g.p("{")
	body := &a.Body
	s := body.S
	specials := aspect.Specials(s)
	next := -1 // the aspect line the compiler expects next
	for start := 0; start <= len(s); {
		end := strings.IndexByte(s[start:], '\n')
		if end < 0 {
			end = len(s)
		} else {
			end += start
		}
		text := s[start:end]
		if strings.TrimSpace(text) == "" && (start == 0 || end == len(s)) {
			// The blank first and last lines around the code.
			start = end + 1
			continue
		}
		pos := g.m.file.Position(body.Offset(start))
		if pos.Line != next {
			g.p("#line %d %s", pos.Line, cString(path))
		}
		// Pad the first line to its column so columns match the aspect.
		var out strings.Builder
		var cols []int
		for i := 1; i < pos.Col; i++ {
			out.WriteByte(' ')
			cols = append(cols, start)
		}
		for i := start; i < end; {
			if sp := specialAt(specials, i); sp != nil {
				r := specialNames[sp.Name]
				if r == "" {
					return fmt.Errorf("%s: unknown context variable $%s$", g.m.file.Position(body.Offset(i)), sp.Name)
				}
				out.WriteString(r)
				for range r {
					cols = append(cols, i)
				}
				i = sp.End
				continue
			}
			out.WriteByte(s[i])
			cols = append(cols, i)
			i++
		}
		cols = append(cols, end) // a diagnostic at the end of the line
		g.m.lines[pos.Line] = bodyLine{body: body, cols: cols}
		g.b.WriteString(out.String())
		g.b.WriteByte('\n')
		g.line++
		next = pos.Line + 1
		start = end + 1
	}
	if replace {
		// The closing brace at </replace>: gcc reports a path that
		// reaches the end of a non-void function there.
		end := g.m.file.Position(body.Offset(len(s)))
		g.p("#line %d %s", end.Line, cString(path))
		if _, ok := g.m.lines[end.Line]; !ok {
			cols := make([]int, end.Col)
			for i := range cols {
				cols[i] = len(s)
			}
			g.m.lines[end.Line] = bodyLine{body: body, cols: cols}
		}
		g.p("%s}", strings.Repeat(" ", max(end.Col-1, 0)))
		g.p("#line %d %s", g.line+2, cString(g.file))
		g.p("#pragma GCC diagnostic pop")
		return nil
	}
	g.p("#line %d %s", g.line+2, cString(g.file))
	g.p("}")
	return nil
}

// declare spells a declaration of name with the C type typ ("long int
// x", "struct sock *x"; a bare type when name is empty).
func declare(typ, name string) string {
	if name == "" || strings.HasSuffix(typ, "*") {
		return typ + name
	}
	return typ + " " + name
}

func specialAt(sp []aspect.Special, off int) *aspect.Special {
	for i := range sp {
		if sp[i].Off == off {
			return &sp[i]
		}
	}
	return nil
}

// hook writes hook i's handler(s): compute each advice's context
// variables from the saved registers, then call the advice in order.
func (g *cgen) hook(i int, h *joinpoint.Hook) error {
	g.p("")
	where := h.Function
	if h.InlinedIn != "" {
		where += " inlined in " + h.InlinedIn
	}
	image := "image"
	if h.Module != "" {
		image = cComment(h.Module) + ".ko"
	}
	g.p("/* hook %d: %s %s at %s:%d, %s address %#x */", i, h.Kind, cComment(where), cComment(h.File), h.Line, image, h.Addr)
	var entry []joinpoint.Arg // kretprobe: values taken at entry
	for _, jp := range h.Points {
		for _, a := range jp.Args {
			if a.AtEntry && a.Value != nil {
				entry = append(entry, a)
			}
		}
	}
	if h.Kind == joinpoint.Kretprobe && len(entry) > 0 {
		g.p("struct klasy_entry_%d {", i)
		g.p("\tu64 v[%d];", len(entry))
		g.p("};")
		g.p("")
		g.p("static int klasy_entry_h%d(struct kretprobe_instance *ri, struct pt_regs *regs)", i)
		g.p("{")
		g.p("\tstruct klasy_entry_%d *e = (struct klasy_entry_%d *)ri->data;", i, i)
		g.p("")
		g.skip("1") // and no return handler
		reads := false
		for k, a := range entry {
			if err := g.value(a, fmt.Sprintf("e->v[%d]", k)); err != nil {
				return fmt.Errorf("hook at %s: %s: %w", h.Function, a.Var, err)
			}
			reads = reads || a.Value.Reads()
		}
		g.p("\treturn 0;")
		if reads {
			g.p("fail:")
			g.p("\treturn 1; /* a value could not be read: no advice on return */")
		}
		g.p("}")
		g.p("")
	}
	if h.Kind == joinpoint.KprobePost {
		return g.postHook(i, h)
	}
	if h.Kind == joinpoint.Tracepoint {
		g.tracepointHook(i, h)
		return nil
	}
	var rep *joinpoint.JoinPoint // the replacement, last in a KprobeReplace hook
	if h.Kind == joinpoint.KprobeReplace {
		if rep = h.Points[len(h.Points)-1]; rep.Timing != joinpoint.Replace {
			return fmt.Errorf("hook at %s: a replacement hook without its <replace> advice", h.Function)
		}
	}
	if h.Kind == joinpoint.Kretprobe {
		g.p("static int klasy_h%d(struct kretprobe_instance *ri, struct pt_regs *regs)", i)
	} else {
		g.p("static int klasy_h%d(struct kprobe *kp, struct pt_regs *regs)", i)
	}
	g.p("{")
	g.p("\tstruct klasy_hook *h = &klasy_hooks[%d];", i)
	g.p("\tunsigned long pc = (unsigned long)h->rp.kp.addr;")
	retval := "0"
	if h.Kind == joinpoint.Kretprobe {
		retval = returnValue(h)
		if len(entry) > 0 {
			g.p("\tstruct klasy_entry_%d *e = (struct klasy_entry_%d *)ri->data;", i, i)
		}
	}
	g.p("\tstruct klasy_hit *hit = this_cpu_ptr(&klasy_hit);")
	// a<point>_<arg>: by the join point's index in the hook, as one
	// advice may have several join points at one hook.
	var vals []string
	for pi, jp := range h.Points {
		for k, a := range jp.Args {
			if a.Value != nil && !a.AtEntry {
				vals = append(vals, fmt.Sprintf("a%d_%d", pi, k))
			}
		}
	}
	if len(vals) > 0 {
		g.p("\tu64 %s;", strings.Join(vals, ", "))
	}
	if rep != nil && rep.Returns != "void" {
		g.p("\t%s;", declare(rep.Returns, "ret"))
	}
	g.p("")
	g.skip("0")
	g.enter(rep != nil)
	g.p("\tklasy_count_hit(h);")
	g.hitSP()
	g.callFrame(h)
	fails := false
	for pi, jp := range h.Points {
		for k, a := range jp.Args {
			if a.Value == nil || a.AtEntry {
				continue
			}
			if err := g.value(a, fmt.Sprintf("a%d_%d", pi, k)); err != nil {
				return fmt.Errorf("%s: %s: %w", jp.Where(), a.Var, err)
			}
			fails = fails || a.Value.Reads()
		}
	}
	ei := 0
	for pi, jp := range h.Points {
		args := []string{"hit", "pc", retval}
		for k, a := range jp.Args {
			switch {
			case a.Value == nil:
				args = append(args, "NULL")
			case a.AtEntry:
				args = append(args, fmt.Sprintf("&e->v[%d]", ei))
				ei++
			default:
				args = append(args, argRef(a, fmt.Sprintf("a%d_%d", pi, k)))
			}
		}
		if jp == rep {
			g.replaceCall(jp, args)
			continue
		}
		g.call(jp, args)
	}
	g.callEnd(h)
	g.p("\tklasy_leave(hit);")
	if rep != nil {
		g.p("\treturn 1; /* regs->ip is the return stub: the body does not run */")
	} else {
		g.p("\treturn 0;")
	}
	if fails && rep != nil {
		g.p("fail:")
		g.p("\tklasy_leave(hit);")
		g.p("\treturn 0; /* a context value could not be read: no advice, the original body runs */")
	} else if fails {
		g.p("fail:")
		g.callEnd(h)
		g.p("\tklasy_leave(hit);")
		g.p("\treturn 0; /* a context value could not be read: no advice */")
	}
	g.p("}")
	return nil
}

// enter claims the CPU's hit for the handler (klasy_rt.h: klasy_enter):
// a hit inside another klasy handler on this CPU is counted as missed
// and runs no advice (a replaced function's own body then runs).
func (g *cgen) enter(replace bool) {
	g.p("\tif (unlikely(!klasy_enter(hit, h)))")
	if replace {
		g.p("\t\treturn 0; /* the original body runs */")
	} else {
		g.p("\t\treturn 0;")
	}
}

// hitSP stores the probed context's stack pointer and registers in the
// hit, for TIMER_START's depth (klasy_agg.c) and STACK_ID's unwinding
// (klasy_stack.c), when the aspect has timers or saves stacks.
func (g *cgen) hitSP() {
	if AggRoomOf(g.m.file).timers() > 0 || UsesStacks(g.m.file) {
		g.p("\thit->sp = kernel_stack_pointer(regs);")
		g.p("\thit->regs = regs;")
	}
}

// replaceCall calls the <replace> advice jp and makes the function
// return its value to the caller (klasy_rt.h: klasy_replace_return).
func (g *cgen) replaceCall(jp *joinpoint.JoinPoint, args []string) {
	g.p("\tklasy_hit_begin(hit);")
	ret := "0"
	if jp.Returns == "void" {
		g.p("\tklasy_advice_%d(%s);", jp.Advice, strings.Join(args, ", "))
	} else {
		g.p("\tret = klasy_advice_%d(%s);", jp.Advice, strings.Join(args, ", "))
		ret = "(unsigned long)ret"
	}
	g.p("\tif (unlikely(hit->n || hit->dropped))")
	g.p("\t\tklasy_emit(h, %d, hit);", jp.Advice)
	g.p("\tklasy_replace_return(regs, %s);", ret)
}

// value writes a block computing a's value into the u64 lvalue dst
// from the saved registers (regs), jumping to fail when a read faults.
func (g *cgen) value(a joinpoint.Arg, dst string) error {
	var b strings.Builder
	b.WriteString("\t{\n")
	v := a.Value
	if r := g.relocated[v]; r != nil {
		v = r
	}
	if err := v.C(&b, "\t\t", dst, "regs", "s", "fail"); err != nil {
		return err
	}
	b.WriteString("\t}")
	g.p("%s", b.String())
	return nil
}

// argRef passes the value in the u64 v to advice: its address, or for
// target(x) the value itself, the struct's address.
func argRef(a joinpoint.Arg, v string) string {
	if a.ByValue {
		return "(void *)(unsigned long)" + v
	}
	return "&" + v
}

// call calls jp's advice with args and emits what it stored.
func (g *cgen) call(jp *joinpoint.JoinPoint, args []string) {
	g.p("\tklasy_hit_begin(hit);")
	g.p("\tklasy_advice_%d(%s);", jp.Advice, strings.Join(args, ", "))
	g.p("\tif (unlikely(hit->n || hit->dropped))")
	g.p("\t\tklasy_emit(h, %d, hit);", jp.Advice)
}

// postHook writes a kprobe-post hook: its pre handler takes the context
// values before the instruction, its post handler runs the advice after.
func (g *cgen) postHook(i int, h *joinpoint.Hook) error {
	var vals []joinpoint.Arg
	for _, jp := range h.Points {
		for _, a := range jp.Args {
			if a.Value != nil {
				vals = append(vals, a)
			}
		}
	}
	g.p("static int klasy_h%d(struct kprobe *kp, struct pt_regs *regs)", i)
	g.p("{")
	reads := false
	if len(vals) > 0 {
		g.p("\tstruct klasy_after *st = this_cpu_ptr(&klasy_after);")
		g.p("")
		g.p("\tst->ok = 0;")
		g.skip("0")
		for k, a := range vals {
			if err := g.value(a, fmt.Sprintf("st->v[%d]", k)); err != nil {
				return fmt.Errorf("hook at %s: %s: %w", h.Function, a.Var, err)
			}
			reads = reads || a.Value.Reads()
		}
		g.p("\tst->ok = 1;")
	} else {
		g.skip("0")
	}
	g.p("\treturn 0;")
	if reads {
		g.p("fail:")
		g.p("\treturn 0; /* a context value could not be read: no advice */")
	}
	g.p("}")
	g.p("")
	g.p("static void klasy_post_h%d(struct kprobe *kp, struct pt_regs *regs, unsigned long flags)", i)
	g.p("{")
	g.p("\tstruct klasy_hook *h = &klasy_hooks[%d];", i)
	g.p("\tunsigned long pc = (unsigned long)h->rp.kp.addr;")
	if len(vals) > 0 {
		g.p("\tstruct klasy_after *st = this_cpu_ptr(&klasy_after);")
	}
	g.p("\tstruct klasy_hit *hit = this_cpu_ptr(&klasy_hit);")
	g.p("")
	if len(vals) > 0 {
		g.p("\tif (!st->ok)")
		g.p("\t\treturn;")
		g.p("\tst->ok = 0;")
	}
	g.skip("")
	g.p("\tif (unlikely(!klasy_enter(hit, h)))")
	g.p("\t\treturn;")
	g.p("\tklasy_count_hit(h);")
	g.hitSP()
	vi := 0
	for _, jp := range h.Points {
		args := []string{"hit", "pc", "0"}
		for _, a := range jp.Args {
			if a.Value == nil {
				args = append(args, "NULL")
				continue
			}
			args = append(args, argRef(a, fmt.Sprintf("st->v[%d]", vi)))
			vi++
		}
		g.call(jp, args)
	}
	g.p("\tklasy_leave(hit);")
	g.p("}")
	return nil
}

// ftraceArgRegs are the DWARF registers ftrace saves without
// FTRACE_OPS_FL_SAVE_REGS (x86-64 6.1, ftrace_caller): ax, dx, cx, si,
// di, bp, sp, r8, r9, ip.
const ftraceArgRegs = 1<<0 | 1<<1 | 1<<2 | 1<<4 | 1<<5 | 1<<6 | 1<<7 | 1<<8 | 1<<9 | 1<<16

// argsOnly: hook h's context values read only ftraceArgRegs, so on an
// ftrace_ops its handler needs no full pt_regs.
func argsOnly(h *joinpoint.Hook) bool {
	for _, jp := range h.Points {
		for _, a := range jp.Args {
			if a.Value != nil && a.Value.Regs()&^ftraceArgRegs != 0 {
				return false
			}
		}
	}
	return true
}

// regArgs: every join point of the after hook h says its function takes
// its arguments in registers (the runtime may run it on its trampoline).
func regArgs(h *joinpoint.Hook) bool {
	for _, jp := range h.Points {
		if !jp.RegArgs {
			return false
		}
	}
	return len(h.Points) > 0
}

// tables writes the hook table, the aspect and the module's init/exit.
func (g *cgen) tables(opt GenOptions) {
	for i, h := range g.m.Hooks {
		var nums []string
		for _, jp := range h.Points {
			nums = append(nums, fmt.Sprint(jp.Advice))
		}
		g.p("")
		g.p("static const u16 klasy_advice_of_%d[] = { %s };", i, strings.Join(nums, ", "))
	}
	g.p("")
	g.p("static struct klasy_hook klasy_hooks[%d] = {", len(g.m.Hooks))
	for i, h := range g.m.Hooks {
		g.p("\t[%d] = {", i)
		if h.Kind == joinpoint.Kretprobe {
			g.p("\t\t.kind = KLASY_HOOK_KRETPROBE,")
			g.p("\t\t.rp.handler = klasy_h%d,", i)
			entry := false
			for _, jp := range h.Points {
				for _, a := range jp.Args {
					entry = entry || a.AtEntry && a.Value != nil
				}
			}
			if entry {
				g.p("\t\t.rp.entry_handler = klasy_entry_h%d,", i)
				g.p("\t\t.rp.data_size = sizeof(struct klasy_entry_%d),", i)
			}
			if regArgs(h) {
				g.p("\t\t.direct_ok = true,")
			}
		} else if h.Kind == joinpoint.Tracepoint {
			g.tracepointEntry(i, h)
		} else if h.Kind == joinpoint.KprobeReplace {
			g.p("\t\t.kind = KLASY_HOOK_REPLACE,")
			g.p("\t\t.rp.kp.pre_handler = klasy_h%d,", i)
		} else {
			g.p("\t\t.kind = KLASY_HOOK_KPROBE,")
			g.p("\t\t.rp.kp.pre_handler = klasy_h%d,", i)
			if h.Kind == joinpoint.KprobePost {
				g.p("\t\t.rp.kp.post_handler = klasy_post_h%d,", i)
			} else if argsOnly(h) {
				g.p("\t\t.args_only = true,")
			}
		}
		g.p("\t\t.image_addr = %#xUL,", h.Addr)
		if h.Module != "" {
			g.p("\t\t.module = %s,", cString(h.Module))
		}
		g.p("\t\t.function = %s,", cString(h.Function))
		if h.InlinedIn != "" {
			g.p("\t\t.inlined_in = %s,", cString(h.InlinedIn))
		}
		g.p("\t\t.file = %s,", cString(h.File))
		g.p("\t\t.line = %d,", h.Line)
		if k := accessKinds(h); k != "" {
			g.p("\t\t.access = %s,", cString(k))
		}
		g.p("\t\t.nadvice = ARRAY_SIZE(klasy_advice_of_%d),", i)
		g.p("\t\t.advice = klasy_advice_of_%d,", i)
		g.p("\t},")
	}
	g.p("};")
	g.checkTable()
	g.p("")
	g.p("static struct klasy_aspect klasy_aspect = {")
	g.p("\t.name = %s,", cString(g.m.Aspect))
	g.p("\t.owner = THIS_MODULE,")
	g.p("\t.nhooks = ARRAY_SIZE(klasy_hooks),")
	g.p("\t.hooks = klasy_hooks,")
	g.aggRoom()
	g.sharedMapField()
	if len(CallVars(g.m.file)) > 0 {
		g.p("\t.calls = &klasy_calls,")
	}
	if len(g.checks) > 0 {
		g.p("\t.nchecks = ARRAY_SIZE(klasy_checks),")
		g.p("\t.checks = klasy_checks,")
	}
	g.p("};")
	g.p("")
	g.p("/* %s's address in the image this module was generated for. */", KASLRRef)
	g.p("#define KLASY_REF_IMAGE %#xUL", opt.RefAddr)
	if g.modAddrs != nil {
		g.p("")
		g.p("/*")
		g.p(" * The running addresses of the hooks in modules (0 for the kernel's),")
		g.p(" * from the modules' section addresses when this module was generated:")
		g.p(" * it is built for that load of them.")
		g.p(" */")
		g.p("static const unsigned long klasy_module_addr[%d] = {", len(g.m.Hooks))
		for i, a := range g.modAddrs {
			if a != 0 {
				g.p("\t[%d] = %#xUL,", i, a)
			}
		}
		g.p("};")
	}
	g.p("")
	g.p("static int __init klasy_init(void)")
	g.p("{")
	g.p("\t/* The KASLR slide: where %s is now, minus where the image has it. */", KASLRRef)
	g.p("\tunsigned long slide = (unsigned long)&%s - KLASY_REF_IMAGE;", KASLRRef)
	g.p("\tunsigned int i, failed = 0;")
	if len(opt.Flows) > 0 {
		g.p("\tint err;")
	}
	g.p("")
	g.p("\tklasy_slide = slide;")
	g.p("\tfor (i = 0; i < ARRAY_SIZE(klasy_hooks); i++)")
	if g.modAddrs != nil {
		g.p("\t\tklasy_hooks[i].rp.kp.addr = (kprobe_opcode_t *)(klasy_hooks[i].module ?")
		g.p("\t\t\tklasy_module_addr[i] : klasy_hooks[i].image_addr + slide);")
	} else {
		g.p("\t\tklasy_hooks[i].rp.kp.addr = (kprobe_opcode_t *)(klasy_hooks[i].image_addr + slide);")
	}
	if len(opt.Flows) == 0 {
		g.p("\treturn klasy_register_aspect(&klasy_aspect, &failed);")
	} else {
		// The tables exist before a hook can use them and stay until no
		// handler runs any more.
		for i, fl := range opt.Flows {
			g.p("\terr = KLASY_FLOW_GET(%s);", fl)
			g.p("\tif (err)")
			g.p("\t\tgoto put%d;", i)
		}
		g.p("\terr = klasy_register_aspect(&klasy_aspect, &failed);")
		g.p("\tif (!err)")
		g.p("\t\treturn 0;")
		for i := len(opt.Flows) - 1; i >= 0; i-- {
			g.p("\tKLASY_FLOW_PUT(%s);", opt.Flows[i])
			g.p("put%d:", i)
		}
		g.p("\treturn err;")
	}
	g.p("}")
	g.p("")
	g.p("static void __exit klasy_exit(void)")
	g.p("{")
	g.p("\tklasy_unregister_aspect(&klasy_aspect);")
	for i := len(opt.Flows) - 1; i >= 0; i-- {
		g.p("\tKLASY_FLOW_PUT(%s);", opt.Flows[i])
	}
	g.p("}")
	g.p("")
	g.p("module_init(klasy_init);")
	g.p("module_exit(klasy_exit);")
	g.p("MODULE_LICENSE(\"GPL\");")
	g.p("MODULE_DESCRIPTION(%s);", cString("klasy aspect "+g.m.Aspect))
}

// AdviceDiagnostics maps the compiler's errors in advice code to the
// aspect's positions; nil if none of them is in advice code.
func (m *Module) AdviceDiagnostics(ds []kbuild.Diagnostic) aspect.Diagnostics {
	var out aspect.Diagnostics
	for i, d := range ds {
		if !d.IsError() {
			continue
		}
		at, ok := d, d.File == m.file.Name
		if !ok {
			// An error inside a macro (LHIST's bounds in klasy_rt.h): at
			// the advice's use of it, which a note that follows names.
			if at, ok = m.expandedAt(ds[i+1:]); !ok {
				continue
			}
		}
		pos, ok := m.Position(at.Line, at.Col)
		if !ok {
			pos = m.file.Position(0)
			pos.Line, pos.Col = at.Line, at.Col
		}
		out = append(out, aspect.Diagnostic{Pos: pos, Msg: "advice does not compile: " + d.Msg})
	}
	return out
}

// expandedAt finds, in the notes after an error, the macro use in the
// aspect's advice that the error comes from.
func (m *Module) expandedAt(notes []kbuild.Diagnostic) (kbuild.Diagnostic, bool) {
	for _, n := range notes {
		if n.Severity != "note" {
			break
		}
		if n.File == m.file.Name && strings.HasPrefix(n.Msg, "in expansion of macro") {
			return n, true
		}
	}
	return kbuild.Diagnostic{}, false
}
