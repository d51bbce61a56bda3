package target

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/klasy/klasy/dwarfmap"
	"github.com/klasy/klasy/weaver/joinpoint"
)

// Paths klasy reads in the running kernel.
const (
	NotesPath     = "/sys/kernel/notes"
	BlacklistPath = "/sys/kernel/debug/kprobes/blacklist"
	KprobesList   = "/sys/kernel/debug/kprobes/list"
	// KprobesEnabled is 0 when kprobes are disarmed in the whole kernel
	// (echo 0 > it): registered probes stay, none runs.
	KprobesEnabled = "/sys/kernel/debug/kprobes/enabled"
)

// BuildIDFromNotes finds the GNU build-id in the ELF notes the running
// kernel exports in /sys/kernel/notes.
func BuildIDFromNotes(notes []byte) (string, error) {
	le := binary.LittleEndian
	align := func(n uint32) int { return int((n + 3) &^ 3) }
	for off := 0; off+12 <= len(notes); {
		namesz, descsz, typ := le.Uint32(notes[off:]), le.Uint32(notes[off+4:]), le.Uint32(notes[off+8:])
		off += 12
		if namesz > 1<<16 || descsz > 1<<16 || off+align(namesz)+align(descsz) > len(notes) {
			break
		}
		name := notes[off : off+int(namesz)]
		desc := notes[off+align(namesz) : off+align(namesz)+int(descsz)]
		off += align(namesz) + align(descsz)
		if typ == 3 && string(bytes.TrimRight(name, "\x00")) == "GNU" {
			return hex.EncodeToString(desc), nil
		}
	}
	return "", fmt.Errorf("no GNU build-id note in %s", NotesPath)
}

// BlacklistEntry is one range the kernel refuses kprobes in, in running
// kernel addresses.
type BlacklistEntry struct {
	Start, End uint64
	Symbol     string
}

// ParseBlacklist reads /sys/kernel/debug/kprobes/blacklist:
// "0xSTART-0xEND\tsymbol" per line. Addresses print as zero to a reader
// without kallsyms rights; those lines are dropped.
func ParseBlacklist(b []byte) ([]BlacklistEntry, error) {
	var out []BlacklistEntry
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		rng, sym, _ := strings.Cut(line, "\t")
		lo, hi, ok := strings.Cut(rng, "-")
		if !ok {
			return nil, fmt.Errorf("%s line %d: %q is not START-END", BlacklistPath, n, rng)
		}
		s, err1 := strconv.ParseUint(strings.TrimPrefix(lo, "0x"), 16, 64)
		e, err2 := strconv.ParseUint(strings.TrimPrefix(hi, "0x"), 16, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("%s line %d: bad address in %q", BlacklistPath, n, rng)
		}
		if s == 0 && e == 0 {
			continue
		}
		// "sym [module]" for a module's symbol.
		sym, _, _ = strings.Cut(strings.TrimSpace(sym), " ")
		out = append(out, BlacklistEntry{Start: s, End: e, Symbol: sym})
	}
	return out, sc.Err()
}

// Slide computes the running kernel's KASLR slide from blacklist entries
// whose symbol is one global function of the image: the slide is the
// same for the whole kernel image, so the most common difference wins.
func Slide(bl []BlacklistEntry, x *dwarfmap.Index) (uint64, bool) {
	votes := map[uint64]int{}
	for _, e := range bl {
		fs := x.Funcs(e.Symbol)
		if len(fs) != 1 || fs[0].InlineOnly || !fs[0].External || len(fs[0].Ranges) == 0 {
			continue
		}
		votes[e.Start-fs[0].Ranges[0][0]]++
	}
	var best uint64
	n := 0
	for s, v := range votes {
		if v > n || v == n && s < best {
			best, n = s, v
		}
	}
	return best, n > 0
}

// Refusals turns the blacklist into a Refusal on image addresses.
func Refusals(bl []BlacklistEntry, slide uint64) joinpoint.Refusal {
	bl = append([]BlacklistEntry(nil), bl...)
	sort.Slice(bl, func(i, j int) bool { return bl[i].Start < bl[j].Start })
	return func(addr uint64) string {
		a := addr + slide
		i := sort.Search(len(bl), func(i int) bool { return bl[i].Start > a })
		for j := i - 1; j >= 0 && j >= i-64; j-- {
			if a >= bl[j].Start && a < bl[j].End {
				return fmt.Sprintf("the kernel refuses kprobes in %s (kprobe blacklist: NOKPROBE_SYMBOL, .kprobes.text, .noinstr.text or entry code)", bl[j].Symbol)
			}
		}
		return ""
	}
}
