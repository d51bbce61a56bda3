package main

import (
	"fmt"

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
	var asJSON bool
	var only string
	fs := newFlagSet("stats")
	t.declare(fs, false, false)
	fs.BoolVar(&asJSON, "json", false, "")
	fs.StringVar(&only, "aspect", "", "")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if pos := fs.Args(); len(pos) != 0 {
		return usageError{Msg: fmt.Sprintf("takes no arguments, got %q", pos)}
	}
	ts, err := openTargets(s, &t, false, nil)
	if err != nil {
		return err
	}
	defer ts.Close()
	ctx, sess := ts.ctx, ts.one
	// Status first: it refuses a runtime of another ABI, which has no
	// stats file to say so.
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
	return statsview.Print(s.Out, s.Err, sess.T.Name(), stats, only, asJSON)
}
