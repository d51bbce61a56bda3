package records

import (
	"fmt"
	"strings"
)

// Limits of the _BY maps (klasy_rt.h).
const (
	// KeyWords is KLASY_KEY_WORDS: the u64s a _BY key holds.
	KeyWords = 8
	// ByKeys is KLASY_AGG_BY_KEYS: keys per COUNT_BY, SUM_BY,
	// MINIMUM_BY, MAXIMUM_BY map on each CPU.
	ByKeys = 256
	// HistByKeys is KLASY_AGG_HIST_BY_KEYS: keys per HIST_BY, LHIST_BY
	// map on each CPU.
	HistByKeys = 64
)

// TupleKey is one key of a _BY map: its values, N updates, Value the
// sum, least or greatest (for count, N), and a histogram's buckets.
type TupleKey struct {
	Key     []Value
	N       uint64
	Value   int64    `json:",omitempty"`
	Buckets []uint64 `json:",omitempty"`
	// Timer is a keyed timer's times under this key (Count, Wall, CPU).
	Timer *Timer `json:",omitempty"`
}

// ByKeysOf is the keys per CPU of a _BY map of kind.
func ByKeysOf(kind string) int {
	if kind == KindHist || kind == KindLHist || kind == KindTimer {
		return HistByKeys
	}
	return ByKeys
}

// parseByMap reads the rest of a _BY map's line: an lhist's bounds,
// keys=, dropped=, a histogram's buckets=.
func (m *Map) parseByMap(kv kvs) error {
	by, err := kv.int("by")
	if err != nil {
		return err
	}
	if by != 1 {
		return fmt.Errorf("by=%d, want 1", by)
	}
	m.By = true
	hist := m.Kind == KindHist || m.Kind == KindLHist
	if m.Kind == KindLHist {
		if err := m.parseBounds(kv); err != nil {
			return err
		}
	}
	if m.keys, err = kv.int("keys"); err != nil {
		return err
	}
	if m.Dropped, err = kv.uint("dropped", 64); err != nil {
		return err
	}
	if hist {
		m.nb, err = m.parseNBuckets(kv)
	}
	if m.Kind == KindTimer {
		err = m.parseTimerCounts(kv)
	}
	m.TKeys = []TupleKey{}
	return err
}

// parseTimerCounts reads what a keyed timer counts without a key: STOPs
// without a START, STARTs that found no slot, nested and orphaned
// STARTs, the tasks inside it; and its buckets=. (Its dropped= counts
// STOPs whose key found no room.)
func (m *Map) parseTimerCounts(kv kvs) error {
	t := &Timer{}
	m.Timer = t
	var err error
	for _, f := range []struct {
		key string
		v   *uint64
	}{{"no_start", &t.NoStart}, {"starts_dropped", &t.Dropped}, {"nested", &t.Nested}, {"orphaned", &t.Orphaned}} {
		if *f.v, err = kv.uint(f.key, 64); err != nil {
			return err
		}
	}
	if t.Inside, err = kv.int("inside"); err != nil {
		return err
	}
	nb, err := kv.int("buckets")
	if err == nil && nb != HistBuckets {
		err = fmt.Errorf("buckets=%d, a timer has %d", nb, HistBuckets)
	}
	return err
}

// parseKeyTimes reads a keyed timer's times under one key.
func parseKeyTimes(kv kvs, n uint64) (*Timer, error) {
	t := &Timer{Count: n}
	for _, f := range []struct {
		key string
		v   *uint64
	}{
		{"wall_sum", &t.Wall.Sum}, {"wall_min", &t.Wall.Min}, {"wall_max", &t.Wall.Max},
		{"cpu_sum", &t.CPU.Sum}, {"cpu_min", &t.CPU.Min}, {"cpu_max", &t.CPU.Max},
	} {
		var err error
		if *f.v, err = kv.uint(f.key, 64); err != nil {
			return nil, err
		}
	}
	t.Wall.Buckets, t.CPU.Buckets = make([]uint64, HistBuckets), make([]uint64, HistBuckets)
	return t, nil
}

// parseTKey reads a tkey line: t= the key's typed bitmap, w= its words
// in hex, n= its updates, v= its value.
func (m *Map) parseTKey(kv kvs) error {
	if m == nil || !m.By {
		return fmt.Errorf("a tkey outside a _BY map")
	}
	var k TupleKey
	var err error
	if k.Key, err = parseKeyWords(kv); err != nil {
		return err
	}
	if k.N, err = kv.uint("n", 64); err != nil {
		return err
	}
	if k.Value, err = kv.sint("v"); err != nil {
		return err
	}
	if k.N == 0 {
		return fmt.Errorf("key %s with n=0", KeyString(k.Key))
	}
	if m.Kind == KindCount {
		k.Value = int64(k.N)
	}
	if m.nb > 0 {
		k.Buckets = make([]uint64, m.nb)
	}
	if m.Kind == KindTimer {
		if k.Timer, err = parseKeyTimes(kv, k.N); err != nil {
			return err
		}
	}
	m.TKeys = append(m.TKeys, k)
	return nil
}

// KeyString is a _BY key as bpftrace prints one: "dd, 1234", strings
// unquoted, a truncated one with "..." after it.
func KeyString(key []Value) string {
	parts := make([]string, len(key))
	for i, v := range key {
		switch {
		case v.IsString() && !v.Bad:
			parts[i] = v.Str
			if v.Truncated {
				parts[i] += "..."
			}
		default:
			parts[i] = v.String()
		}
	}
	return strings.Join(parts, ", ")
}
