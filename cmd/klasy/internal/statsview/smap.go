package statsview

import (
	"fmt"
	"io"

	"github.com/klasy/klasy/internal/human"
	"github.com/klasy/klasy/weaver/records"
)

// printShared prints a shared map as bpftrace prints a map at exit,
// "@start[173]: 123456" a key each, in key order, then what it could
// not keep.
func printShared(w io.Writer, m records.SharedMap) {
	fmt.Fprintf(w, "@%s: shared map (MAP_SET), %s of %d\n", m.Name, human.Plural(len(m.Entries), "key"), m.Size)
	for _, e := range m.Entries {
		fmt.Fprintf(w, "@%s[%s]: %d\n", m.Name, keyText(e.Key), e.Value)
	}
	if m.Overflow > 0 {
		fmt.Fprintf(w, "  %s of a new key kept nothing: no room (at most %d keys of %d bytes; seldom, a full hash bucket of %d)\n",
			human.Plural(int(m.Overflow), "MAP_SET"), m.Size, 8*records.KeyWords, records.SmapWays)
	}
	if m.Busy > 0 {
		fmt.Fprintf(w, "  %s in NMI context found the key's bucket locked and did nothing\n", human.Plural(int(m.Busy), "operation"))
	}
}

// SharedMapJSON is one shared map of klasy stats --json.
type SharedMapJSON struct {
	Aspect   string            `json:"aspect"`
	Map      string            `json:"map"`
	Kind     string            `json:"kind"` // "shared"
	Size     int               `json:"size"`
	Overflow uint64            `json:"overflow"`
	Busy     uint64            `json:"busy"`
	Entries  []SharedEntryJSON `json:"entries"`
}

// SharedEntryJSON is one key of a shared map and its value.
type SharedEntryJSON struct {
	Key   []records.Value `json:"key"`
	Value uint64          `json:"value"`
}

func sharedView(aspect string, m records.SharedMap) SharedMapJSON {
	v := SharedMapJSON{Aspect: aspect, Map: m.Name, Kind: "shared", Size: m.Size, Overflow: m.Overflow, Busy: m.Busy, Entries: []SharedEntryJSON{}}
	for _, e := range m.Entries {
		v.Entries = append(v.Entries, SharedEntryJSON{Key: e.Key, Value: e.Value})
	}
	return v
}
