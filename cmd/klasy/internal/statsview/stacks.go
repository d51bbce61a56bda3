package statsview

import (
	"fmt"
	"io"
	"slices"
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

// keyText is a _BY key as bpftrace prints one, "dd, 1234", a kernel
// stack (KEY_KSTACK) as its frames, one per line.
func keyText(key []records.Value) string {
	parts := make([]string, len(key))
	for i, v := range key {
		if v.Kind == records.KindKStack {
			parts[i] = "\n" + stackText(v, "    ")
			continue
		}
		parts[i] = records.KeyString(key[i : i+1])
	}
	return strings.Join(parts, ", ")
}

// stackText is a kernel stack value's frames, a line each after indent.
func stackText(v records.Value, indent string) string {
	switch {
	case v.Unkept:
		return indent + notKept(v.KStack) + "\n"
	case len(v.Frames) == 0:
		return indent + "(no kernel frames)\n"
	}
	return kstack.Lines(v.Frames, indent)
}

// foldedStack is a stack as one folded line's frames.
func foldedStack(fs []kstack.Frame, ok bool, id uint64) string {
	line := kstack.Folded(fs)
	switch {
	case !ok:
		line = strings.ReplaceAll(notKept(id), " ", "_")
	case line == "":
		line = "[no_kernel_frames]"
	}
	return line
}

// foldedLine is one line of --folded: its frames and its count.
type foldedLine struct {
	frames string
	n      int64
}

// foldedLines are m's stacks as folded lines: a COUNT_STACK map's, or a
// COUNT_BY or SUM_BY map's whose keys hold a kernel stack (KEY_KSTACK),
// their other values as frames above the stack's root ("dd;root;...").
func foldedLines(m records.Map, stacks Stacks) []foldedLine {
	var out []foldedLine
	if m.Key == records.KeyKStack {
		for _, k := range sortedKeys(m) {
			fs, ok := framesOf(stacks, k.Key)
			out = append(out, foldedLine{foldedStack(fs, ok, k.Key), k.Value})
		}
		return out
	}
	if !m.By || (m.Kind != records.KindCount && m.Kind != records.KindSum) || len(m.KStackValues()) == 0 {
		return nil
	}
	for _, k := range slices.Backward(byKeys(m)) {
		var parts, stack []string
		for i, v := range k.Key {
			if v.Kind == records.KindKStack {
				stack = append(stack, foldedStack(v.Frames, !v.Unkept, v.KStack))
				continue
			}
			parts = append(parts, strings.ReplaceAll(records.KeyString(k.Key[i:i+1]), ";", ":"))
		}
		out = append(out, foldedLine{strings.Join(append(parts, stack...), ";"), k.Value})
	}
	return out
}

// Folded prints the stack maps of stats (of the aspect only, if named)
// in the folded format flame graph tools read (flamegraph.pl, inferno,
// speedscope): a line per stack, "root;...;leaf count", the most
// counted first. With several maps each line starts with its map,
// "@name;root;...".
func Folded(out io.Writer, target string, stats *records.Stats, only string, stacks Stacks) error {
	type sm struct {
		label string
		lines []foldedLine
	}
	var maps []sm
	if stats != nil {
		for _, a := range stats.Aspects {
			for _, m := range a.Maps {
				if ls := foldedLines(m, stacks); ls != nil && (only == "" || a.Name == only) {
					maps = append(maps, sm{m.Label(), ls})
				}
			}
		}
	}
	if len(maps) == 0 {
		of := target
		if only != "" {
			of = "aspect " + only + " in " + target
		}
		return fmt.Errorf("--folded prints maps of kernel stacks (COUNT_STACK, KEY_KSTACK), and %s has none (yet: a map is made at its first hit)", of)
	}
	for _, x := range maps {
		for _, l := range x.lines {
			line := l.frames
			if len(maps) > 1 {
				line = "@" + x.label + ";" + line
			}
			if _, err := fmt.Fprintf(out, "%s %d\n", line, l.n); err != nil {
				return err
			}
		}
	}
	return nil
}

// StackTableNote warns on w when the kernel's table of stacks could not
// keep every stack saved: when it was full near a stack's id, or held
// other frames under it (a 64-bit hash collision), that stack's counts
// show as not kept, or under the other stack's frames.
func StackTableNote(w io.Writer, s *records.Stacks) {
	if s == nil {
		return
	}
	if s.Full > 0 {
		fmt.Fprintf(w, "klasy: %s found the kernel's table of stacks full (%d stacks): their frames were not kept\n", human.Plural(int(s.Full), "stack save"), s.Room)
	}
	if s.Collisions > 0 {
		fmt.Fprintf(w, "klasy: %s had the id of another stack the table holds (a 64-bit hash collision): counted under that stack's frames\n", human.Plural(int(s.Collisions), "stack save"))
	}
}
