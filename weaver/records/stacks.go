package records

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/klasy/klasy/weaver/runtime"
)

// Stacks is the runtime's stacks file: the kernel stacks advice saved
// with STACK_ID() (COUNT_STACK, STORE_STACK), by id.
type Stacks struct {
	Depth int // return addresses a stack keeps at most
	Room  int // stacks the table holds
	// Full counts the saves of a stack that found no room: its id
	// names no frames.
	Full uint64
	// Collisions counts the saves of a stack whose id (a 64-bit hash
	// of its frames) the table holds for other frames: the first
	// frames are kept, and counts by that id are both stacks'.
	Collisions uint64
	// Frames are each stack's running addresses, innermost first.
	Frames map[uint64][]uint64
}

// ParseStacks parses the stacks file's text: refuses another ABI and
// any line or key it does not know. A stack listed twice is kept once
// (the runtime lists an id once; before ABI 16 two CPUs saving one
// stack at once could both publish it).
func ParseStacks(text []byte) (*Stacks, error) {
	lines := strings.Split(strings.TrimSuffix(string(text), "\n"), "\n")
	s := &Stacks{Frames: map[uint64][]uint64{}}
	for i, line := range lines {
		if err := s.parseLine(i, line); err != nil {
			return nil, fmt.Errorf("stacks line %d: %v", i+1, err)
		}
	}
	return s, nil
}

func (s *Stacks) parseLine(i int, line string) error {
	kind, rest, _ := strings.Cut(line, " ")
	if (i == 0) != (kind == "stacks") {
		return fmt.Errorf("%q: want the stacks line first, and only there", kind)
	}
	kv, err := parseKV(rest)
	if err != nil {
		return err
	}
	switch kind {
	case "stacks":
		abi, err := kv.int("abi")
		if err != nil {
			return err
		}
		if abi != runtime.ABIVersion {
			return fmt.Errorf("runtime ABI %d, this klasy reads ABI %d: load the runtime of this klasy", abi, runtime.ABIVersion)
		}
		if s.Depth, err = kv.int("depth"); err != nil {
			return err
		}
		if s.Room, err = kv.int("room"); err != nil {
			return err
		}
		if _, err = kv.int("used"); err != nil {
			return err
		}
		if s.Full, err = kv.uint("full", 64); err != nil {
			return err
		}
		if s.Collisions, err = kv.uint("collisions", 64); err != nil {
			return err
		}
	case "stack":
		id, err := kv.uint("id", 64)
		if err != nil {
			return err
		}
		v, err := kv.str("frames")
		if err != nil {
			return err
		}
		var fs []uint64
		if v != "-" {
			for _, f := range strings.Split(v, ",") {
				a, err := strconv.ParseUint(f, 16, 64)
				if err != nil {
					return fmt.Errorf("frames=%s: %q is not a hex address", v, f)
				}
				fs = append(fs, a)
			}
		}
		if len(fs) > s.Depth {
			return fmt.Errorf("stack %d has %d frames, the table keeps %d", id, len(fs), s.Depth)
		}
		s.Frames[id] = fs
	default:
		return fmt.Errorf("unknown line kind %q", kind)
	}
	return kv.unused()
}
