package timeline

import (
	"cmp"
	"slices"

	"github.com/klasy/klasy/weaver/records"
)

// Domain is one kernel's records with its clock.
type Domain struct {
	Name    string
	Clock   Clock
	Records []records.TraceRecord
}

// Event is one record on the merged timeline: its domain and the host
// time it maps to, beside the record as the domain stamped it (TimeNS
// stays the guest's).
type Event struct {
	Domain string `json:"domain"`
	HostNS int64  `json:"host_ns"`
	records.TraceRecord
}

// Merge puts every domain's records on one timeline, in host time order;
// records at the same host time keep the domains' order, then each
// domain's own.
func Merge(ds []Domain) []Event {
	var n int
	for _, d := range ds {
		n += len(d.Records)
	}
	type keyed struct {
		Event
		domain, index int
	}
	ks := make([]keyed, 0, n)
	for di, d := range ds {
		for i, r := range d.Records {
			ks = append(ks, keyed{Event{Domain: d.Name, HostNS: d.Clock.Host(r.TimeNS), TraceRecord: r}, di, i})
		}
	}
	slices.SortFunc(ks, func(a, b keyed) int {
		return cmp.Or(cmp.Compare(a.HostNS, b.HostNS), cmp.Compare(a.domain, b.domain), cmp.Compare(a.index, b.index))
	})
	es := make([]Event, len(ks))
	for i, k := range ks {
		es[i] = k.Event
	}
	return es
}
