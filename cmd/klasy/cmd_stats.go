package main

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/klasy/klasy/cmd/klasy/internal/statsview"
	"github.com/klasy/klasy/weaver/records"
)

func init() {
	register(&command{
		Name:    "stats",
		Summary: "show what woven advice counted, summed, timed and drew in the kernel",
		Help:    helpText("stats") + targetHelp,
		Run:     runStats,
	})
}

func runStats(s *stdio, args []string) error {
	var t targetFlags
	var asJSON, folded bool
	var only string
	var interval time.Duration
	fs := newFlagSet("stats")
	t.declare(fs, false, false)
	fs.BoolVar(&asJSON, "json", false, "")
	fs.BoolVar(&folded, "folded", false, "")
	fs.StringVar(&only, "aspect", "", "")
	fs.DurationVar(&interval, "interval", 0, "")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if pos := fs.Args(); len(pos) != 0 {
		return usageError{Msg: fmt.Sprintf("takes no arguments, got %q", pos)}
	}
	if folded && asJSON {
		return usageError{Msg: "--folded and --json are two formats: give one"}
	}
	if fs.Given("interval") && interval < 100*time.Millisecond {
		return usageError{Msg: fmt.Sprintf("--interval %v: at least 100ms", interval)}
	}
	ts, err := openTargets(s, &t, false, nil)
	if err != nil {
		return err
	}
	defer ts.Close()
	ctx, sess := ts.ctx, ts.one
	once := func() error {
		// Status first: it refuses a runtime of another ABI, which has
		// no stats file to say so.
		st, err := sess.Status(ctx)
		if err != nil {
			return err
		}
		var stats *records.Stats
		if st != nil {
			if stats, err = sess.Stats(ctx); err != nil {
				return err
			}
		}
		var stacks statsview.Stacks
		if stats.HasStacks() {
			tab, err := sess.FillStacks(ctx, stats.KStackValues())
			if err != nil {
				return err
			}
			stacks = tab.Frames
			statsview.StackTableNote(s.Err, tab.Stacks)
		}
		if folded {
			return statsview.Folded(s.Out, sess.T.Name(), stats, only, stacks)
		}
		return statsview.Print(s.Out, s.Err, sess.T.Name(), stats, only, asJSON, stacks)
	}
	if interval == 0 {
		return once()
	}
	// --interval: the totals so far, every interval, until Ctrl-C, each
	// round under its time (bpftrace's interval:s:N printing its maps).
	for {
		now := time.Now()
		if asJSON {
			if err := json.NewEncoder(s.Out).Encode(map[string]string{"time": now.Format(time.RFC3339Nano)}); err != nil {
				return err
			}
		} else {
			fmt.Fprintf(s.Out, "%s\n", now.Format("15:04:05"))
		}
		if err := once(); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if err := s.flush(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Until(now.Add(interval))):
		}
	}
}
