package timeline

import (
	"fmt"
	"slices"
)

// Flow is the events of one flow ID, across domains, in host time order.
type Flow struct {
	ID     int32
	Events []Event
}

// Domains lists the domains the flow passed through, in the order it
// first reached each.
func (f Flow) Domains() []string {
	var ds []string
	for _, e := range f.Events {
		if !slices.Contains(ds, e.Domain) {
			ds = append(ds, e.Domain)
		}
	}
	return ds
}

// Flows gathers the events that carry a flow ID (events in host time
// order, as Merge gives them) into one flow per ID, in the order of
// their first events. IDs are unique across the domains of one weave,
// so one ID seen in two domains is one flow crossing between them.
func Flows(es []Event) []Flow {
	var fls []Flow
	for _, l := range FlowLinks(es) {
		fl := Flow{ID: es[l.Events[0]].Flow}
		for _, i := range l.Events {
			fl.Events = append(fl.Events, es[i])
		}
		fls = append(fls, fl)
	}
	return fls
}

// FlowLinks returns each flow of es as a link of indices into es, for
// WritePerfetto's arrows.
func FlowLinks(es []Event) []Link {
	var ls []Link
	at := map[int32]int{}
	for i, e := range es {
		if e.Flow == 0 {
			continue
		}
		j, ok := at[e.Flow]
		if !ok {
			j = len(ls)
			at[e.Flow] = j
			ls = append(ls, Link{Name: fmt.Sprintf("flow %d", e.Flow)})
		}
		ls[j].Events = append(ls[j].Events, i)
	}
	return ls
}
