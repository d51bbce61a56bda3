// Package jpview prints the join points a weave hooked or a plan would
// hook (klasy weave and klasy list): a summary per aspect with its
// mechanisms, times and access tiers, a table of the join points, one
// JSON object per join point, and the warnings of those skipped.
package jpview

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/klasy/klasy/internal/human"
	"github.com/klasy/klasy/weaver"
	"github.com/klasy/klasy/weaver/joinpoint"
	"github.com/klasy/klasy/weaver/records"
)

// Warnings prints what resolving noticed, at the aspect's FILE:LINE:COL.
func Warnings(w io.Writer, rep *weaver.Report) {
	for _, m := range rep.Warnings {
		fmt.Fprintf(w, "klasy: warning: %s\n", m)
	}
}

// maxSkippedShown: up to this many skipped join points are warned about
// one by one; beyond, the first few and a count per reason, as a weave
// of thousands of access join points would otherwise bury the report.
const maxSkippedShown = 10

// Skipped warns of the join points skipped, and why.
func Skipped(w io.Writer, rep *weaver.Report) {
	var skipped []*joinpoint.JoinPoint
	for _, jp := range rep.JoinPoints {
		if jp.Skipped != "" {
			skipped = append(skipped, jp)
		}
	}
	shown := skipped
	if len(skipped) > maxSkippedShown {
		shown = skipped[:3]
	}
	for _, jp := range shown {
		fmt.Fprintf(w, "klasy: warning: %s: advice %d %s %s skipped: %s\n", rep.Aspect, jp.Advice, jp.Timing, jp.Where(), jp.Skipped)
	}
	if len(shown) == len(skipped) {
		return
	}
	byReason := map[string]int{}
	for _, jp := range skipped {
		byReason[joinpoint.SkipClass(jp.Skipped)]++
	}
	reasons := make([]string, 0, len(byReason))
	for r := range byReason {
		reasons = append(reasons, r)
	}
	slices.SortFunc(reasons, func(a, b string) int { return cmp.Or(cmp.Compare(byReason[b], byReason[a]), cmp.Compare(a, b)) })
	var parts []string
	for _, r := range reasons {
		parts = append(parts, fmt.Sprintf("%s %d", r, byReason[r]))
	}
	fmt.Fprintf(w, "klasy: warning: %s: %d more join points skipped (%s); klasy list or weave -v lists each with its reason\n",
		rep.Aspect, len(skipped)-len(shown), strings.Join(parts, ", "))
}

type joinPointJSON struct {
	Domain    string `json:"domain,omitempty"` // weave --domains
	Aspect    string `json:"aspect"`
	Advice    int    `json:"advice"`
	Function  string `json:"function"`
	InlinedIn string `json:"inlined_in,omitempty"`
	File      string `json:"file"`
	Line      int    `json:"line"`
	PC        string `json:"pc"`
	Mechanism string `json:"mechanism,omitempty"`
	Skipped   string `json:"skipped,omitempty"`
	// Access join points only.
	Module string `json:"module,omitempty"`
	Access string `json:"access,omitempty"` // "sk_buff.len read"
	Exact  *bool  `json:"exact,omitempty"`
	// Merged are the other accesses the same hook stands for (the same
	// advice, address and values: "sk_buff.nohdr write net/core/skbuff.c:1190",
	// "(line-level)" after one whose hook is on its line under an exact one).
	Merged []string `json:"merged,omitempty"`
	// Source is where the access came from: "plugin" (.debug_klasy) or
	// "inferred" (the image's DWARF and code: a kernel without the
	// plugin).
	Source string `json:"source,omitempty"`
}

// JSON prints one object per join point, each naming domain unless it
// is "" (weave and list --domains).
func JSON(w io.Writer, domain string, rep *weaver.Report) error {
	enc := json.NewEncoder(w)
	for _, jp := range rep.JoinPoints {
		j := joinPointJSON{Domain: domain, Aspect: rep.Aspect, Advice: jp.Advice, Function: jp.Function, InlinedIn: jp.InlinedIn,
			File: jp.File, Line: jp.Line, PC: fmt.Sprintf("%#x", jp.Addr), Mechanism: jp.Mechanism, Skipped: jp.Skipped, Module: jp.Module}
		if jp.Access != nil {
			exact := jp.Exact
			j.Exact, j.Access, j.Source = &exact, accessLabel(jp), "plugin"
			if jp.Access.Inferred {
				j.Source = "inferred"
			}
			for _, m := range jp.Merged {
				l := fmt.Sprintf("%s.%s %s %s:%d", m.Struct, m.Member, m.Mode, m.File, m.Line)
				if m.LineLevel {
					l += " (line-level)"
				}
				j.Merged = append(j.Merged, l)
			}
		}
		if err := enc.Encode(j); err != nil {
			return err
		}
	}
	return nil
}

// accessLabel is "sk_buff.len read", with how a hook off the access's
// own line was placed.
func accessLabel(jp *joinpoint.JoinPoint) string {
	a := jp.Access
	l := a.Struct + "." + a.Member + " " + a.Mode
	if a.Via != "" {
		l += " (" + a.Via + ")"
	}
	if a.Inferred {
		l += " (inferred)"
	}
	return l
}

// Table prints a row per join point: advice, function, file:line, pc,
// for access join points the access and its tier, and the hook.
func Table(w io.Writer, rep *weaver.Report) {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	access := slices.ContainsFunc(rep.JoinPoints, func(jp *joinpoint.JoinPoint) bool { return jp.Access != nil })
	if access {
		fmt.Fprintln(tw, "  ADVICE\tFUNCTION\tFILE:LINE\tPC\tACCESS\tTIER\tHOOK")
	} else {
		fmt.Fprintln(tw, "  ADVICE\tFUNCTION\tFILE:LINE\tPC\tHOOK")
	}
	for _, jp := range rep.JoinPoints {
		fn := jp.Function
		if jp.InlinedIn != "" {
			fn += " (in " + jp.InlinedIn + ")"
		}
		if jp.Module != "" {
			fn += " [" + jp.Module + "]"
		}
		how := jp.Mechanism
		if how == "" {
			how = jp.Kind.String()
		}
		if jp.Skipped != "" {
			how = "skipped: " + jp.Skipped
		}
		acc := ""
		if access {
			acc, tier := "-\t-\t", "line"
			if jp.Access != nil {
				if jp.Exact {
					tier = "exact"
				}
				if jp.Skipped != "" {
					tier = "-"
				}
				acc = accessLabel(jp) + "\t" + tier + "\t"
			}
			fmt.Fprintf(tw, "  %d %s\t%s\t%s:%d\t%#x\t%s%s\n", jp.Advice, jp.Timing, fn, jp.File, jp.Line, jp.Addr, acc, how)
			continue
		}
		fmt.Fprintf(tw, "  %d %s\t%s\t%s:%d\t%#x\t%s%s\n", jp.Advice, jp.Timing, fn, jp.File, jp.Line, jp.Addr, acc, how)
	}
	tw.Flush()
}

// Coverage prints the access join points' tiers and lines.
func Coverage(w io.Writer, rep *weaver.Report) {
	c := joinpoint.Coverage(rep.JoinPoints)
	if c.JoinPoints == 0 {
		return
	}
	fmt.Fprintf(w, "  access: %s exact, %s line-level; %d of %d source lines have a join point\n",
		human.Plural(c.Exact, "join point"), human.Plural(c.LineLevel, "join point"), c.LinesHooked, c.Lines)
}

// Mechanisms counts the woven join points by mechanism.
func Mechanisms(rep *weaver.Report) map[string]int {
	mech := map[string]int{}
	for _, jp := range rep.JoinPoints {
		if jp.Skipped == "" {
			mech[jp.Mechanism]++
		}
	}
	return mech
}

// Woven prints klasy weave's report of an aspect: its join points by
// mechanism, the time of each step, the access tiers, and with verbose
// the table of join points.
func Woven(w io.Writer, rep *weaver.Report, verbose bool) {
	mech := Mechanisms(rep)
	skipped := len(rep.JoinPoints) - rep.Woven()
	tp := ""
	if n := mech[records.MechFexit]; n > 0 {
		tp = fmt.Sprintf(", fexit %d", n)
	}
	if n := mech[records.MechTracepoint]; n > 0 {
		tp += fmt.Sprintf(", tracepoint %d", n)
	}
	fmt.Fprintf(w, "%s: woven into %s: %s (ftrace-ops %d, ftrace %d, jump %d, int3 %d, kretprobe %d%s), %d skipped\n",
		rep.Aspect, rep.Target, human.Plural(rep.Woven(), "join point"), mech["ftrace-ops"], mech["ftrace"], mech["jump"], mech["int3"], mech["kretprobe"], tp, skipped)
	t := rep.Times
	fmt.Fprintf(w, "  resolve %s, generate %s, build %s, load %s, register %s\n",
		human.Dur(t.Resolve), human.Dur(t.Generate), human.Dur(t.Build), human.Dur(t.Load), human.Dur(t.Register))
	Coverage(w, rep)
	if verbose {
		if why := rep.EntryKprobesWhy(); why != "" {
			fmt.Fprintf(w, "  entry hooks are kprobes, not on the aspect's ftrace_ops: %s\n", why)
		}
		if why := rep.AfterKretprobesWhy(); why != "" {
			fmt.Fprintf(w, "  after hooks are kretprobes, not on the direct trampoline (fexit): %s\n", why)
		}
		Table(w, rep)
	}
}
