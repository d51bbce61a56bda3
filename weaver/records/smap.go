package records

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// SharedMap is one shared map of an aspect (MAP_SET, MAP_GET,
// MAP_DELETE in its advice): its keys and values when the file was
// read, in key order.
type SharedMap struct {
	Index int
	Name  string
	// Size is how many keys it may hold; Overflow counts the MAP_SETs
	// of a new key that found no room (a full bucket, a key too long),
	// Busy the operations in NMI context that found their bucket locked
	// and did nothing.
	Size     int
	Overflow uint64
	Busy     uint64 `json:",omitempty"`
	Entries  []SharedEntry

	entries int // as the map's line says
}

// SharedEntry is one key of a shared map and its value.
type SharedEntry struct {
	Key   []Value
	Value uint64
}

// Bounds of a shared map (klasy_rt.h).
const (
	// SmapEntries is KLASY_SMAP_ENTRIES: the keys one holds.
	SmapEntries = 4096
	// SmapWays is KLASY_SMAP_WAYS: the slots of one of its hash
	// buckets (it has twice SmapEntries slots).
	SmapWays = 16
)

func parseSharedMap(kv kvs) (SharedMap, error) {
	var m SharedMap
	var err error
	if m.Index, err = kv.int("index"); err != nil {
		return m, err
	}
	if m.Name, err = kv.name("name"); err != nil {
		return m, err
	}
	if m.entries, err = kv.int("entries"); err != nil {
		return m, err
	}
	if m.Size, err = kv.int("size"); err != nil {
		return m, err
	}
	if m.Overflow, err = kv.uint("overflow", 64); err != nil {
		return m, err
	}
	m.Busy, err = kv.uint("busy", 64)
	return m, err
}

// parseSKey reads an skey line: t= the key's typed bitmap, w= its words
// in hex, v= its value.
func (m *SharedMap) parseSKey(kv kvs) error {
	if m == nil {
		return fmt.Errorf("an skey outside a shared map")
	}
	key, err := parseKeyWords(kv)
	if err != nil {
		return err
	}
	v, err := kv.uint("v", 64)
	if err != nil {
		return err
	}
	m.Entries = append(m.Entries, SharedEntry{Key: key, Value: v})
	return nil
}

// check is done when the lines of m have all been read; it puts the
// keys in order (the runtime lists them by bucket).
func (m *SharedMap) check() error {
	if m == nil {
		return nil
	}
	if len(m.Entries) != m.entries {
		return fmt.Errorf("shared map %d has %d skey lines, its line says entries=%d", m.Index, len(m.Entries), m.entries)
	}
	slices.SortFunc(m.Entries, func(a, b SharedEntry) int { return compareKeys(a.Key, b.Key) })
	return nil
}

// compareKeys orders keys value by value: integers by number, strings
// by their bytes, integers before strings.
func compareKeys(a, b []Value) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		x, y := a[i], b[i]
		if c := cmp.Compare(x.Kind, y.Kind); c != 0 {
			return c
		}
		var c int
		switch {
		case x.IsString():
			c = strings.Compare(x.Str, y.Str)
		case x.Kind == 0:
			c = cmp.Compare(x.Int, y.Int)
		default:
			c = strings.Compare(x.String(), y.String())
		}
		if c != 0 {
			return c
		}
	}
	return cmp.Compare(len(a), len(b))
}

// parseKeyWords reads a _BY key from t= (its typed bitmap in hex) and
// w= (its words in hex), as the runtime prints a struct klasy_key.
func parseKeyWords(kv kvs) ([]Value, error) {
	typed, err := kv.hex("t")
	if err != nil {
		return nil, err
	}
	ws, err := kv.str("w")
	if err != nil {
		return nil, err
	}
	var r Record
	r.Typed = uint32(typed)
	for _, w := range strings.Split(ws, ",") {
		n, err := strconv.ParseUint(w, 16, 64)
		if err != nil {
			return nil, fmt.Errorf("w=%s: not hex words", ws)
		}
		r.Values = append(r.Values, n)
	}
	if len(r.Values) > KeyWords || typed>>32 != 0 {
		return nil, fmt.Errorf("w=%s t=%x: at most %d words", ws, typed, KeyWords)
	}
	key, err := r.Items()
	if err != nil {
		return nil, fmt.Errorf("key %s: %v", ws, err)
	}
	return key, nil
}
