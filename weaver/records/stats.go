package records

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/klasy/klasy/weaver/runtime"
)

// Stats is the runtime's stats file: every aspect's aggregation maps
// (COUNT, SUM, MINIMUM, MAXIMUM, HIST, LHIST, TIMER_START/TIMER_STOP in
// advice), merged over the CPUs by the runtime when it was read.
type Stats struct {
	ABI     int
	CPUs    int
	Aspects []AspectStats
}

// AspectStats are one aspect's maps.
type AspectStats struct {
	ID   uint32
	Name string
	// Room is the maps the aspect has room for (from its advice text).
	Room int
	// Unclaimed counts the hits of macro uses that got no map; Failed
	// is how many uses that is, Fails lists the first of them.
	Unclaimed uint64
	Failed    int
	Fails     []Fail
	Maps      []Map
	// SharedMaps are its MAP_SET/MAP_GET/MAP_DELETE maps.
	SharedMaps []SharedMap `json:",omitempty"`

	maps int // as the aspect's line says
}

// check is done when the lines of a have all been read.
func (a *AspectStats) check() error {
	if a == nil {
		return nil
	}
	if len(a.Maps) != a.maps {
		return fmt.Errorf("aspect %d has %d map lines, its line says maps=%d", a.ID, len(a.Maps), a.maps)
	}
	if len(a.Fails) > a.Failed {
		return fmt.Errorf("aspect %d lists %d failed uses, its line says failed=%d", a.ID, len(a.Fails), a.Failed)
	}
	return nil
}

// Map kinds as the stats file names them.
const (
	KindCount = "count"
	KindSum   = "sum"
	KindMin   = "min" // MINIMUM
	KindMax   = "max" // MAXIMUM
	KindHist  = "hist"
	KindLHist = "lhist"
	KindTimer = "timer"
)

// Use is where a macro is used: the first use of a map, or a failed one.
type Use struct {
	Kind   string
	Name   string // the _AS or timer name; "" for a map named by its line
	Advice int    // 1-based in the aspect file; 0 outside an advice body
	File   string
	Line   int
	// Key is what the keys of a keyed map are: "" integers, KeyKStack
	// stack ids (COUNT_STACK), whose frames are in the Stacks file.
	Key string `json:",omitempty"`
}

// KeyKStack is the key of COUNT_STACK's maps: kernel stack ids.
const KeyKStack = "kstack"

// Label is how klasy stats names a map: its name, or its macro and line
// ("count:12").
func (u Use) Label() string {
	if u.Name != "" {
		return u.Name
	}
	return fmt.Sprintf("%s:%d", u.Kind, u.Line)
}

// Map is one aggregation map, merged over the CPUs.
type Map struct {
	Index int
	Use
	// Keyed maps (count, sum, min, max): the keys in increasing order,
	// and the updates of keys that found no room on their CPU.
	Keys    []KeyValue `json:",omitempty"`
	Dropped uint64     `json:",omitempty"`
	// Histograms (hist, lhist): the values counted, and the count of
	// each bucket (bucket 0 below the first, as bpftrace lays them out).
	Count   uint64   `json:",omitempty"`
	Buckets []uint64 `json:",omitempty"`
	// Lo, Hi, Step are an lhist's bounds.
	Lo, Hi, Step int64  `json:",omitempty"`
	Timer        *Timer `json:",omitempty"`
	// By: a _BY map (COUNT_BY, HIST_BY...), whose keys are TKeys, each
	// with its own buckets for a histogram; Dropped counts updates that
	// found no room for their key.
	By    bool       `json:",omitempty"`
	TKeys []TupleKey `json:",omitempty"`

	keys int // as the map's line says
	nb   int // a _BY histogram's buckets per key
}

// KeyValue is one key of a keyed map: N updates; Value the sum, least
// or greatest value (for count, N).
type KeyValue struct {
	Key   uint64
	N     uint64
	Value int64
}

// Timer is a TIMER_START/TIMER_STOP pair's times, in ns.
type Timer struct {
	Count     uint64 // STOPs that ended a START
	Wall, CPU Times
	NoStart   uint64 // STOPs of a task not inside the timer
	Dropped   uint64 // STARTs that found no room for their task
	Nested    uint64 // STARTs of a task already inside the timer
	// Orphaned are outermost STARTs whose STOP never came: their task
	// started again at their depth or above, or their slot was taken
	// after a minute in a full timer.
	Orphaned uint64
	Inside   int // tasks inside the timer when the file was read
}

// Times are the durations a timer measured in one clock.
type Times struct {
	Sum, Min, Max uint64
	Buckets       []uint64 // power-of-two buckets of the durations
}

// Fail is a macro use the runtime could not make a map for.
type Fail struct {
	Use
	Reason string // FailConflict or FailRoom
	With   int    // the map a conflict is with (Map.Index), else -1
}

// Why a use got no map.
const (
	// FailConflict: its name is a map of another kind (or an lhist of
	// other bounds).
	FailConflict = "conflict"
	// FailRoom: the aspect had no room left for another map.
	FailRoom = "room"
)

// Limits of the runtime's maps (klasy_rt.h).
const (
	// AggKeys is KLASY_AGG_KEYS: keys per map on each CPU.
	AggKeys = 1024
	// AggTasks is KLASY_AGG_TASKS: tasks inside one timer at once.
	AggTasks = 1024
	// AggMaxMaps is KLASY_AGG_MAX_MAPS: maps per aspect.
	AggMaxMaps = 64
	// HistBuckets is KLASY_AGG_HIST_BUCKETS: below 0, 0, 1, then
	// [2^k, 2^(k+1)) up to 2^63.
	HistBuckets = 65
	// LHistMax is KLASY_AGG_LHIST_MAX: linear buckets between lo and hi.
	LHistMax = 1000
)

// ParseStats parses the stats file's text. Like ParseStatus it refuses
// another ABI and any line or key it does not know.
func ParseStats(text []byte) (*Stats, error) {
	lines := strings.Split(strings.TrimSuffix(string(text), "\n"), "\n")
	if len(lines) == 0 || lines[0] == "" {
		return nil, fmt.Errorf("stats: empty")
	}
	var s Stats
	var a *AspectStats
	var m *Map
	var sm *SharedMap
	for i, line := range lines {
		n := i + 1
		kind, rest, _ := strings.Cut(line, " ")
		if (i == 0) != (kind == "stats") {
			return nil, fmt.Errorf("stats line %d: %q: want the stats line first, and only there", n, kind)
		}
		kv, err := parseKV(rest)
		if err != nil {
			return nil, fmt.Errorf("stats line %d: %v", n, err)
		}
		switch kind {
		case "stats":
			err = s.parseHeader(kv)
		case "aspect":
			if err = m.check(); err != nil {
				break
			}
			if err = sm.check(); err != nil {
				break
			}
			sm = nil
			if err = a.check(); err != nil {
				break
			}
			m = nil
			var as AspectStats
			as, err = parseAspectStats(kv)
			s.Aspects = append(s.Aspects, as)
			a = &s.Aspects[len(s.Aspects)-1]
		case "map":
			if a == nil {
				err = fmt.Errorf("a map outside an aspect")
				break
			}
			if err = m.check(); err != nil {
				break
			}
			var mp Map
			mp, err = parseMap(kv)
			if err == nil && mp.Index != len(a.Maps) {
				err = fmt.Errorf("map index %d, want %d", mp.Index, len(a.Maps))
			}
			a.Maps = append(a.Maps, mp)
			m = &a.Maps[len(a.Maps)-1]
		case "key":
			err = m.parseKey(kv)
		case "tkey":
			err = m.parseTKey(kv)
		case "smap":
			if a == nil {
				err = fmt.Errorf("a shared map outside an aspect")
				break
			}
			if err = m.check(); err != nil {
				break
			}
			if err = sm.check(); err != nil {
				break
			}
			m = nil
			var mp SharedMap
			mp, err = parseSharedMap(kv)
			if err == nil && mp.Index != len(a.SharedMaps) {
				err = fmt.Errorf("shared map index %d, want %d", mp.Index, len(a.SharedMaps))
			}
			a.SharedMaps = append(a.SharedMaps, mp)
			sm = &a.SharedMaps[len(a.SharedMaps)-1]
		case "skey":
			err = sm.parseSKey(kv)
		case "b", "w", "c":
			err = m.parseBucket(kind, kv)
		case "fail":
			if a == nil {
				err = fmt.Errorf("a fail outside an aspect")
				break
			}
			if err = m.check(); err != nil {
				break
			}
			m = nil
			var f Fail
			f, err = parseFail(kv)
			a.Fails = append(a.Fails, f)
		default:
			err = fmt.Errorf("unknown line kind %q", kind)
		}
		if err == nil {
			err = kv.unused()
		}
		if err != nil {
			return nil, fmt.Errorf("stats line %d: %v", n, err)
		}
	}
	if err := m.check(); err != nil {
		return nil, fmt.Errorf("stats line %d: %v", len(lines), err)
	}
	if err := sm.check(); err != nil {
		return nil, fmt.Errorf("stats line %d: %v", len(lines), err)
	}
	if err := a.check(); err != nil {
		return nil, fmt.Errorf("stats line %d: %v", len(lines), err)
	}
	return &s, nil
}

func (s *Stats) parseHeader(m kvs) error {
	abi, err := m.int("abi")
	if err != nil {
		return err
	}
	if abi != runtime.ABIVersion {
		return fmt.Errorf("runtime ABI %d, this klasy reads ABI %d: load the runtime of this klasy", abi, runtime.ABIVersion)
	}
	s.ABI = abi
	s.CPUs, err = m.int("cpus")
	return err
}

func parseAspectStats(m kvs) (AspectStats, error) {
	var a AspectStats
	id, err := m.uint("id", 32)
	if err != nil {
		return a, err
	}
	a.ID = uint32(id)
	if a.Name, err = m.name("name"); err != nil {
		return a, err
	}
	if a.maps, err = m.int("maps"); err != nil {
		return a, err
	}
	if a.Room, err = m.int("room"); err != nil {
		return a, err
	}
	if a.Unclaimed, err = m.uint("unclaimed", 64); err != nil {
		return a, err
	}
	a.Failed, err = m.int("failed")
	return a, err
}

func parseUse(m kvs) (Use, error) {
	var u Use
	var err error
	if u.Kind, err = m.str("kind"); err != nil {
		return u, err
	}
	switch u.Kind {
	case KindCount, KindSum, KindMin, KindMax, KindHist, KindLHist, KindTimer:
	default:
		return u, fmt.Errorf("unknown kind=%s", u.Kind)
	}
	if u.Name, err = m.name("name"); err != nil {
		return u, err
	}
	if u.Advice, err = m.int("advice"); err != nil {
		return u, err
	}
	if u.File, err = m.name("file"); err != nil {
		return u, err
	}
	if u.Line, err = m.int("line"); err != nil {
		return u, err
	}
	if m["key"] != nil {
		u.Key, _ = m.str("key")
		if u.Key != KeyKStack || u.Kind != KindCount {
			return u, fmt.Errorf("key=%s on a %s map: only a count's keys may be kstack", u.Key, u.Kind)
		}
	}
	return u, nil
}

// HasStacks says whether a map of s is keyed by kernel stacks
// (COUNT_STACK, KEY_KSTACK in a _BY key); false for nil.
func (s *Stats) HasStacks() bool {
	for _, a := range s.aspects() {
		for _, m := range a.Maps {
			if m.Key == KeyKStack || len(m.KStackValues()) > 0 {
				return true
			}
		}
	}
	return false
}

// KStackValues are the kernel stacks among the values of m's _BY keys,
// to fill their frames.
func (m *Map) KStackValues() []*Value {
	var out []*Value
	for i := range m.TKeys {
		for j := range m.TKeys[i].Key {
			if m.TKeys[i].Key[j].Kind == KindKStack {
				out = append(out, &m.TKeys[i].Key[j])
			}
		}
	}
	return out
}

// KStackValues are the kernel stacks among the _BY keys of s's maps.
func (s *Stats) KStackValues() []*Value {
	var out []*Value
	for i := range s.aspects() {
		for j := range s.Aspects[i].Maps {
			out = append(out, s.Aspects[i].Maps[j].KStackValues()...)
		}
	}
	return out
}

func (s *Stats) aspects() []AspectStats {
	if s == nil {
		return nil
	}
	return s.Aspects
}

// Keyed says whether the map is a keyed one (count, sum, min, max).
func (m *Map) Keyed() bool {
	switch m.Kind {
	case KindCount, KindSum, KindMin, KindMax:
		return true
	}
	return false
}

func parseMap(kv kvs) (Map, error) {
	var m Map
	var err error
	if m.Index, err = kv.int("index"); err != nil {
		return m, err
	}
	if m.Use, err = parseUse(kv); err != nil {
		return m, err
	}
	if _, by := kv["by"]; by {
		return m, m.parseByMap(kv)
	}
	switch {
	case m.Keyed():
		if m.keys, err = kv.int("keys"); err != nil {
			return m, err
		}
		m.Dropped, err = kv.uint("dropped", 64)
	case m.Kind == KindTimer:
		t := &Timer{}
		m.Timer = t
		for _, f := range []struct {
			key string
			v   *uint64
		}{
			{"count", &t.Count}, {"wall_sum", &t.Wall.Sum}, {"wall_min", &t.Wall.Min}, {"wall_max", &t.Wall.Max},
			{"cpu_sum", &t.CPU.Sum}, {"cpu_min", &t.CPU.Min}, {"cpu_max", &t.CPU.Max},
			{"no_start", &t.NoStart}, {"dropped", &t.Dropped}, {"nested", &t.Nested},
			{"orphaned", &t.Orphaned},
		} {
			if *f.v, err = kv.uint(f.key, 64); err != nil {
				return m, err
			}
		}
		if t.Inside, err = kv.int("inside"); err != nil {
			return m, err
		}
		nb, err := kv.int("buckets")
		if err != nil {
			return m, err
		}
		if nb != HistBuckets {
			return m, fmt.Errorf("buckets=%d, a timer has %d", nb, HistBuckets)
		}
		t.Wall.Buckets, t.CPU.Buckets = make([]uint64, nb), make([]uint64, nb)
	default: // hist, lhist
		if m.Kind == KindLHist {
			if err = m.parseBounds(kv); err != nil {
				return m, err
			}
		}
		if m.Count, err = kv.uint("count", 64); err != nil {
			return m, err
		}
		nb, err := m.parseNBuckets(kv)
		if err != nil {
			return m, err
		}
		m.Buckets = make([]uint64, nb)
	}
	return m, err
}

// parseBounds reads an lhist's lo=, hi=, step=.
func (m *Map) parseBounds(kv kvs) error {
	var err error
	if m.Lo, err = kv.sint("lo"); err != nil {
		return err
	}
	if m.Hi, err = kv.sint("hi"); err != nil {
		return err
	}
	m.Step, err = kv.sint("step")
	return err
}

// parseNBuckets reads a histogram's buckets=, which its kind and bounds
// decide.
func (m *Map) parseNBuckets(kv kvs) (int, error) {
	nb, err := kv.int("buckets")
	if err != nil {
		return 0, err
	}
	want := HistBuckets
	if m.Kind == KindLHist {
		want = -1
		span := uint64(m.Hi) - uint64(m.Lo)
		if m.Step > 0 && m.Hi > m.Lo && span%uint64(m.Step) == 0 && span/uint64(m.Step) <= LHistMax {
			want = int(span/uint64(m.Step)) + 2
		}
	}
	if nb != want {
		return 0, fmt.Errorf("buckets=%d, want %d for a %s", nb, want, m.Kind)
	}
	return nb, nil
}

// check is done when the lines of m have all been read: a keyed map has
// as many keys as its line said, in increasing order.
func (m *Map) check() error {
	if m != nil && m.By {
		if len(m.TKeys) != m.keys {
			return fmt.Errorf("map %d has %d tkey lines, its line says keys=%d", m.Index, len(m.TKeys), m.keys)
		}
		return nil
	}
	if m == nil || !m.Keyed() {
		return nil
	}
	if len(m.Keys) != m.keys {
		return fmt.Errorf("map %d has %d key lines, its line says keys=%d", m.Index, len(m.Keys), m.keys)
	}
	for i := 1; i < len(m.Keys); i++ {
		if m.Keys[i].Key <= m.Keys[i-1].Key {
			return fmt.Errorf("map %d: key %d after %d: want them merged and increasing", m.Index, m.Keys[i].Key, m.Keys[i-1].Key)
		}
	}
	return nil
}

func (m *Map) parseKey(kv kvs) error {
	if m == nil || !m.Keyed() || m.By {
		return fmt.Errorf("a key outside a count, sum, min or max map")
	}
	var k KeyValue
	var err error
	if k.Key, err = kv.uint("k", 64); err != nil {
		return err
	}
	if k.N, err = kv.uint("n", 64); err != nil {
		return err
	}
	if k.Value, err = kv.sint("v"); err != nil {
		return err
	}
	if k.N == 0 {
		return fmt.Errorf("key %d with n=0", k.Key)
	}
	if m.Kind == KindCount {
		k.Value = int64(k.N)
	}
	m.Keys = append(m.Keys, k)
	return nil
}

func (m *Map) parseBucket(tag string, kv kvs) error {
	var bs []uint64
	switch {
	case m == nil:
	case m.By && len(m.TKeys) > 0:
		k := m.TKeys[len(m.TKeys)-1]
		switch {
		case tag == "b":
			bs = k.Buckets
		case tag == "w" && k.Timer != nil:
			bs = k.Timer.Wall.Buckets
		case tag == "c" && k.Timer != nil:
			bs = k.Timer.CPU.Buckets
		}
	case m.By:
	case tag == "b" && (m.Kind == KindHist || m.Kind == KindLHist):
		bs = m.Buckets
	case tag == "w" && m.Timer != nil:
		bs = m.Timer.Wall.Buckets
	case tag == "c" && m.Timer != nil:
		bs = m.Timer.CPU.Buckets
	}
	if bs == nil {
		return fmt.Errorf("a %s bucket outside a map that has them", tag)
	}
	i, err := kv.int("i")
	if err != nil {
		return err
	}
	n, err := kv.uint("n", 64)
	if err != nil {
		return err
	}
	if i >= len(bs) {
		return fmt.Errorf("bucket %d of %d", i, len(bs))
	}
	bs[i] = n
	return nil
}

func parseFail(kv kvs) (Fail, error) {
	var f Fail
	var err error
	if f.Use, err = parseUse(kv); err != nil {
		return f, err
	}
	if f.Reason, err = kv.str("reason"); err != nil {
		return f, err
	}
	if f.Reason != FailConflict && f.Reason != FailRoom {
		return f, fmt.Errorf("unknown reason=%s", f.Reason)
	}
	w, err := kv.sint("with")
	f.With = int(w)
	return f, err
}

// sint parses a signed decimal.
func (m kvs) sint(k string) (int64, error) {
	v, err := m.str(k)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s=%s: not a signed 64-bit decimal", k, v)
	}
	return n, nil
}
