// Package health says what went wrong in a kernel since some moment:
// the taint flags it gained (/proc/sys/kernel/tainted), and the oopses,
// BUGs, warnings, soft lockups and RCU stalls its log reports, each with
// the instruction it was at (the report's RIP line). When that
// instruction is in an advice module, Locate names the advice and its
// aspect line from the module's symbols and line table (the generated C
// carries #line directives back to the aspect).
package health

import (
	"bufio"
	"bytes"
	"debug/dwarf"
	"debug/elf"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// TaintPath is where the kernel keeps its taint flags.
const TaintPath = "/proc/sys/kernel/tainted"

// taintLetters are the flags' letters, bit 0 first, as the kernel
// prints them (Documentation/admin-guide/tainted-kernels.rst).
const taintLetters = "PFSRMBUDAWCIOELKXT"

// Expected are the flags loading klasy's own modules sets: out of tree
// (O) and unsigned (E).
const Expected = 1<<12 | 1<<13

// ParseTaint reads /proc/sys/kernel/tainted's number.
func ParseTaint(b []byte) (uint64, error) {
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %q is not a number", TaintPath, strings.TrimSpace(string(b)))
	}
	return v, nil
}

// Letters spells taint flags as the kernel does ("DW"), the reason of
// each after it.
func Letters(t uint64) string {
	reasons := map[byte]string{'D': "died: an oops or BUG", 'W': "warned", 'L': "soft lockup", 'B': "bad page", 'M': "machine check"}
	var parts []string
	for i := 0; i < len(taintLetters); i++ {
		if t&(1<<i) == 0 {
			continue
		}
		c := taintLetters[i]
		if r, ok := reasons[c]; ok {
			parts = append(parts, fmt.Sprintf("%c (%s)", c, r))
		} else {
			parts = append(parts, string(c))
		}
	}
	return strings.Join(parts, ", ")
}

// Event is one report in the kernel log.
type Event struct {
	Time float64 // seconds since boot, the log line's stamp
	What string  // the report's first line, without its stamp
	// RIP is where it happened ("klasy_h0+0x5/0x20 [klasy_a_x]"), Func,
	// Off and Module the same parsed; empty when the log has no RIP
	// line for it.
	RIP    string
	Func   string
	Off    uint64
	Module string
}

var (
	stamp = regexp.MustCompile(`^\s*(?:<\d+>)?\[\s*(\d+\.\d+)\]\s?(.*)$`)
	// The first line of each kind of report.
	headline = regexp.MustCompile(`^(BUG: |kernel BUG at |Oops: |general protection fault|WARNING: |watchdog: BUG: soft lockup|rcu: INFO: rcu_\w+ (self-)?detected stall|Kernel panic - )`)
	ripLine  = regexp.MustCompile(`^RIP: [0-9a-f]{4}:(([A-Za-z0-9_.$]+)\+0x([0-9a-f]+)/0x[0-9a-f]+(?: \[(\w+)\])?)`)
)

// LastTime is the stamp of the log's last line (0 if none).
func LastTime(log []byte) float64 {
	var last float64
	sc := bufio.NewScanner(bytes.NewReader(log))
	for sc.Scan() {
		if g := stamp.FindStringSubmatch(sc.Text()); g != nil {
			last, _ = strconv.ParseFloat(g[1], 64)
		}
	}
	return last
}

// Events lists the reports of log stamped after since. An Oops line
// that follows a BUG line belongs to that report, as does the first RIP
// line after a headline.
func Events(log []byte, since float64) []Event {
	var out []Event
	var cur *Event
	sc := bufio.NewScanner(bytes.NewReader(log))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		g := stamp.FindStringSubmatch(sc.Text())
		if g == nil {
			continue
		}
		t, _ := strconv.ParseFloat(g[1], 64)
		if t <= since {
			continue
		}
		text := g[2]
		if headline.MatchString(text) {
			// An oops continues the report its BUG line began.
			if cur != nil && cur.RIP == "" && (strings.HasPrefix(text, "Oops: ") || strings.HasPrefix(text, "general protection")) {
				continue
			}
			out = append(out, Event{Time: t, What: text})
			cur = &out[len(out)-1]
			continue
		}
		if r := ripLine.FindStringSubmatch(text); r != nil && cur != nil && cur.RIP == "" {
			cur.RIP, cur.Func, cur.Module = r[1], r[2], r[4]
			cur.Off, _ = strconv.ParseUint(r[3], 16, 64)
		}
	}
	return out
}

// Place is an instruction of an advice module as the aspect has it.
type Place struct {
	Func string // the module's function (klasy_advice_N, or a hook's trampoline it was inlined into)
	File string // the aspect file, by the module's #line directives
	Line int
}

// Locate maps fn+off of the advice module ko (unstripped: with its
// symbols and DWARF) to the aspect's file and line.
func Locate(ko []byte, fn string, off uint64) (Place, error) {
	f, err := elf.NewFile(bytes.NewReader(ko))
	if err != nil {
		return Place{}, err
	}
	syms, err := f.Symbols()
	if err != nil {
		return Place{}, err
	}
	var sec string
	var addr uint64
	found := false
	for _, s := range syms {
		if s.Name == fn && elf.ST_TYPE(s.Info) == elf.STT_FUNC && int(s.Section) < len(f.Sections) {
			sec, addr, found = f.Sections[s.Section].Name, s.Value+off, true
			break
		}
	}
	if !found {
		return Place{}, fmt.Errorf("no function %s in the module", fn)
	}
	d, err := f.DWARF()
	if err != nil {
		return Place{}, err
	}
	// A relocatable module's line table holds section offsets; its code
	// is in .text (the advice and the hooks' trampolines).
	if sec != ".text" {
		return Place{}, fmt.Errorf("%s is in %s, not .text", fn, sec)
	}
	r := d.Reader()
	for {
		e, err := r.Next()
		if err != nil || e == nil {
			return Place{}, fmt.Errorf("no line for %s+%#x", fn, off)
		}
		if e.Tag != dwarf.TagCompileUnit {
			r.SkipChildren()
			continue
		}
		lr, err := d.LineReader(e)
		if err != nil || lr == nil {
			continue
		}
		var entry, best dwarf.LineEntry
		ok := false
		for lr.Next(&entry) == nil {
			if !entry.EndSequence && entry.Address <= addr && (!ok || entry.Address >= best.Address) {
				best, ok = entry, true
			}
		}
		if ok && best.File != nil {
			return Place{Func: fn, File: best.File.Name, Line: best.Line}, nil
		}
	}
}
