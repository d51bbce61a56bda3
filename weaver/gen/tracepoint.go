package gen

import (
	"fmt"
	"strings"

	"github.com/klasy/klasy/weaver/joinpoint"
)

// events are the tracepoints the advice of jps runs on, by advice
// number: a tracepoint's advice takes the event's arguments.
func events(jps []*joinpoint.JoinPoint) map[int]*joinpoint.Event {
	evs := map[int]*joinpoint.Event{}
	for _, jp := range jps {
		if jp.Event != nil && jp.Skipped == "" {
			evs[jp.Advice] = jp.Event
		}
	}
	return evs
}

// eventHeaders includes the headers that declare the events: they give
// the types of the events' arguments (struct task_struct).
func (g *cgen) eventHeaders(jps []*joinpoint.JoinPoint) {
	seen := map[string]bool{}
	for _, jp := range jps {
		if ev := jp.Event; ev != nil && jp.Skipped == "" && !seen[ev.Header] {
			if len(seen) == 0 {
				g.p("")
				g.p("/* The headers of the tracepoints, for their arguments' types. */")
			}
			seen[ev.Header] = true
			g.p("#include <%s>", ev.Header)
		}
	}
}

// tracepointHook writes hook i's probe: a function with the event's
// prototype that the runtime registers on the tracepoint, the hook as
// its data. The kernel calls it with preemption off. Like every klasy
// handler it claims the CPU's hit with klasy_enter: an event raised
// while another klasy handler runs on the CPU (in an interrupt, or from
// inside advice) is counted as missed, not run in the middle of it.
func (g *cgen) tracepointHook(i int, h *joinpoint.Hook) {
	ev := h.Points[0].Event
	g.p("static void klasy_tp_h%d(void *data, %s)", i, ev.Proto())
	g.p("{")
	g.p("\tstruct klasy_hook *h = data;")
	g.p("\tunsigned long pc = (unsigned long)h->rp.kp.addr;")
	g.p("\tstruct klasy_hit *hit = this_cpu_ptr(&klasy_hit);")
	g.p("")
	g.skip("")
	g.p("\tif (unlikely(!klasy_enter(hit, h)))")
	g.p("\t\treturn;")
	g.p("\tklasy_count_hit(h);")
	if AggRoomOf(g.m.file).timers() > 0 || UsesStacks(g.m.file) {
		// No probed registers: TIMER_START's depth and STACK_ID unwind
		// from here.
		g.p("\thit->sp = current_stack_pointer;")
		g.p("\thit->regs = NULL;")
	}
	var names []string
	for _, p := range ev.Params {
		names = append(names, p.Name)
	}
	for _, jp := range h.Points {
		g.call(jp, append([]string{"hit", "pc", "0"}, names...))
	}
	g.p("\tklasy_leave(hit);")
	g.p("}")
}

// eventParams are the C parameters advice n takes for its event's
// arguments (none for advice at other join points).
func (g *cgen) eventParams(n int) []string {
	ev := g.events[n]
	if ev == nil {
		return nil
	}
	return strings.Split(ev.Proto(), ", ")
}

// tracepointEntry fills hook i's entry of the hook table.
func (g *cgen) tracepointEntry(i int, h *joinpoint.Hook) {
	ev := h.Points[0].Event
	g.p("\t\t.kind = KLASY_HOOK_TRACEPOINT,")
	g.p("\t\t.tracepoint = %s,", cString(ev.Name))
	g.p("\t\t.probe = klasy_tp_h%d,", i)
}

// checkEvents refuses a hook on an event whose join points disagree on
// its arguments (one resolve never makes one).
func checkEvents(hooks []*joinpoint.Hook) error {
	for _, h := range hooks {
		if h.Kind != joinpoint.Tracepoint {
			continue
		}
		for _, jp := range h.Points {
			if jp.Event == nil || jp.Event.Proto() != h.Points[0].Event.Proto() {
				return fmt.Errorf("tracepoint hook %s: join points without the event's arguments", h.Function)
			}
		}
	}
	return nil
}
