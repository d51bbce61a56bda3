package statsview

import (
	"fmt"
	"io"
	"strings"

	"github.com/klasy/klasy/internal/human"
	"github.com/klasy/klasy/weaver/kstack"
	"github.com/klasy/klasy/weaver/records"
)

// framesOf is stack id's frames, nil and false when unknown.
func framesOf(stacks Stacks, id uint64) ([]kstack.Frame, bool) {
	if stacks == nil {
		return nil, false
	}
	return stacks(id)
}

// notKept stands for the frames of a stack the kernel's table had no
// room for.
func notKept(id uint64) string {
	return fmt.Sprintf("[stack %#x not kept: the stack table was full]", id)
}

// printStacks prints a COUNT_STACK map as bpftrace prints
// @name[kstack] = count(): each stack's frames, innermost first, then
// its count; the most counted first.
func printStacks(w io.Writer, m records.Map, stacks Stacks) {
	fmt.Fprintf(w, "@%s: COUNT per kernel stack (%s), %s\n", m.Label(), where(m.Use), human.Plural(len(m.Keys), "stack"))
	for _, k := range sortedKeys(m) {
		fmt.Fprintf(w, "@%s[\n", m.Label())
		fs, ok := framesOf(stacks, k.Key)
		switch {
		case !ok:
			fmt.Fprintf(w, "    %s\n", notKept(k.Key))
		case len(fs) == 0:
			fmt.Fprintln(w, "    (no kernel frames)")
		default:
			io.WriteString(w, kstack.Lines(fs, "    "))
		}
		fmt.Fprintf(w, "]: %d\n", k.Value)
	}
	if m.Dropped > 0 {
		fmt.Fprintf(w, "  %s dropped: no room for their stack (at most %d keys per map on each CPU)\n", human.Plural(int(m.Dropped), "update"), records.AggKeys)
	}
}

// Folded prints the COUNT_STACK maps of stats (of the aspect only, if
// named) in the folded format flame graph tools read (flamegraph.pl,
// inferno, speedscope): a line per stack, "root;...;leaf count". With
// several maps each line starts with its map, "@name;root;...".
func Folded(out io.Writer, target string, stats *records.Stats, only string, stacks Stacks) error {
	type sm struct {
		aspect string
		m      records.Map
	}
	var maps []sm
	if stats != nil {
		for _, a := range stats.Aspects {
			for _, m := range a.Maps {
				if m.Key == records.KeyKStack && (only == "" || a.Name == only) {
					maps = append(maps, sm{a.Name, m})
				}
			}
		}
	}
	if len(maps) == 0 {
		of := target
		if only != "" {
			of = "aspect " + only + " in " + target
		}
		return fmt.Errorf("--folded prints COUNT_STACK maps, and %s has none (yet: a map is made at its first hit)", of)
	}
	for _, x := range maps {
		for _, k := range sortedKeys(x.m) {
			fs, ok := framesOf(stacks, k.Key)
			line := kstack.Folded(fs)
			switch {
			case !ok:
				line = strings.ReplaceAll(notKept(k.Key), " ", "_")
			case line == "":
				line = "[no_kernel_frames]"
			}
			if len(maps) > 1 {
				line = "@" + x.m.Label() + ";" + line
			}
			if _, err := fmt.Fprintf(out, "%s %d\n", line, k.Value); err != nil {
				return err
			}
		}
	}
	return nil
}
