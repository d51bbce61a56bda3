package traceview

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/klasy/klasy/cmd/klasy/internal/hist"
	"github.com/klasy/klasy/weaver/records"
)

// Options are klasy trace's view options: --group-by N [--group-gap
// D], --hist N, --lhist N,MIN,MAX,STEP.
type Options struct {
	groupBy  indexFlag
	groupGap gapFlag
	hist     indexFlag
	lhist    lhistFlag
}

// Set says whether a view was asked for.
func (v *Options) Set() bool {
	return v.groupBy.set || v.groupGap.set || v.hist.set || v.lhist.text != ""
}

// Declare declares the options on fs.
func (v *Options) Declare(fs *flag.FlagSet) {
	fs.Var(&v.groupBy, "group-by", "")
	fs.Var(&v.groupGap, "group-gap", "")
	fs.Var(&v.hist, "hist", "")
	fs.Var(&v.lhist, "lhist", "")
}

// indexFlag is the 1-based index of a stored value, checked by view.
type indexFlag struct {
	n   int
	set bool
}

func (f *indexFlag) String() string { return strconv.Itoa(f.n) }

func (f *indexFlag) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil {
		return errors.New("want the 1-based index of a stored value")
	}
	f.n, f.set = n, true
	return nil
}

// defaultGroupGap: a value seen again more than this after its group's
// latest record starts a new group (an sk_buff freed and reallocated).
const defaultGroupGap = time.Second

// gapFlag is --group-gap: a duration that knows whether it was given.
type gapFlag struct {
	d   time.Duration
	set bool
}

func (g *gapFlag) String() string { return g.d.String() }

func (g *gapFlag) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return errors.New("want a duration such as 1s or 500ms")
	}
	if d < 0 {
		return errors.New("want a duration of 0 (never split a group) or more")
	}
	g.d, g.set = d, true
	return nil
}

// lhistFlag is --lhist N,MIN,MAX,STEP, bpftrace's lhist(value, min,
// max, step) for the N'th value.
type lhistFlag struct {
	text   string
	index  int
	layout hist.Linear
}

// maxLinearBuckets is bpftrace's bound on lhist's buckets.
const maxLinearBuckets = 1000

func (l *lhistFlag) String() string { return l.text }

func (l *lhistFlag) Set(s string) error {
	parts := strings.Split(s, ",")
	if len(parts) != 4 {
		return errors.New("want N,MIN,MAX,STEP")
	}
	var n [4]int64
	for i, p := range parts {
		v, err := strconv.ParseInt(strings.TrimSpace(p), 0, 64)
		if err != nil {
			return fmt.Errorf("%q is not an integer (want N,MIN,MAX,STEP)", p)
		}
		n[i] = v
	}
	if err := checkValueIndex(n[0]); err != nil {
		return err
	}
	lo, hi, step := n[1], n[2], n[3]
	if step <= 0 {
		return errors.New("STEP must be positive")
	}
	span := hi - lo
	if hi <= lo || span < 0 { // span < 0: the subtraction overflowed
		return fmt.Errorf("MAX (%d) must be above MIN (%d)", hi, lo)
	}
	if span%step != 0 {
		return fmt.Errorf("MAX-MIN (%d) must be a multiple of STEP (%d)", span, step)
	}
	if span/step > maxLinearBuckets {
		return fmt.Errorf("(MAX-MIN)/STEP is %d buckets, at most %d", span/step, maxLinearBuckets)
	}
	*l = lhistFlag{text: s, index: int(n[0]), layout: hist.Linear{Min: lo, Max: hi, Step: step}}
	return nil
}

func checkValueIndex(n int64) error {
	if n < 1 || n > records.MaxValues {
		return fmt.Errorf("value index %d: want 1..%d, the values an advice stores, in order", n, records.MaxValues)
	}
	return nil
}

// View checks the options and returns the view they ask for: nil for
// one line per record. Records left out are warned of to errw.
func (v *Options) View(errw io.Writer) (View, error) {
	var given []string
	if v.groupBy.set {
		given = append(given, "--group-by")
	}
	if v.hist.set {
		given = append(given, "--hist")
	}
	if v.lhist.text != "" {
		given = append(given, "--lhist")
	}
	if len(given) > 1 {
		return nil, errors.New(strings.Join(given, " and ") + " are different views: give one")
	}
	if v.groupGap.set && !v.groupBy.set {
		return nil, errors.New("--group-gap needs --group-by")
	}
	check := func(opt string, n int) error {
		if err := checkValueIndex(int64(n)); err != nil {
			return fmt.Errorf("%s: %v", opt, err)
		}
		return nil
	}
	switch {
	case v.groupBy.set:
		if err := check("--group-by", v.groupBy.n); err != nil {
			return nil, err
		}
		gap := defaultGroupGap
		if v.groupGap.set {
			gap = v.groupGap.d
		}
		return NewGroupView(v.groupBy.n, gap, errw), nil
	case v.hist.set:
		if err := check("--hist", v.hist.n); err != nil {
			return nil, err
		}
		return NewHistView("--hist", v.hist.n, nil, errw), nil
	case v.lhist.text != "":
		l := v.lhist.layout
		return NewHistView("--lhist", v.lhist.index, &l, errw), nil
	}
	return nil, nil
}
