package weaver

import (
	"context"
	"fmt"

	"github.com/klasy/klasy/weaver/kstack"
	"github.com/klasy/klasy/weaver/records"
	"github.com/klasy/klasy/weaver/runtime"
)

// KStacks reads the kernel stacks advice saved (STACK_ID) and a
// symbolizer for them. A session opened without its image (stats,
// trace) indexes it here and works out the KASLR slide; when it cannot,
// the frames stay addresses and a warning says why.
func (s *Session) KStacks(ctx context.Context) (*kstack.Table, error) {
	b, err := s.T.ReadFile(ctx, runtime.StacksPath)
	if err != nil {
		return nil, fmt.Errorf("reading %s in %s: %w", runtime.StacksPath, s.T.Name(), err)
	}
	st, err := records.ParseStacks(b)
	if err != nil {
		return nil, fmt.Errorf("%s in %s: %w", runtime.StacksPath, s.T.Name(), err)
	}
	if s.X == nil && s.noSymbols == nil {
		err = s.index()
		if err == nil {
			err = s.checkBuild(ctx)
		}
		if err == nil {
			err = s.readBlacklist(ctx)
		}
		if err != nil {
			if s.X != nil {
				s.X.Close()
				s.X = nil
			}
			// Said once: trace --follow comes back every poll.
			s.noSymbols = err
			fmt.Fprintf(s.log, "klasy: warning: kernel stacks are not symbolized: %v\n", err)
		}
	}
	if s.X == nil || !s.SlideKnown {
		return &kstack.Table{Stacks: st, Sym: kstack.New(nil, 0)}, nil
	}
	return &kstack.Table{Stacks: st, Sym: kstack.New(s.X, s.Slide)}, nil
}

// fillStacks symbolizes the kernel stacks rs recorded (STORE_STACK)
// now, while the kernel's table holds them: records saved for a later
// trace keep their frames.
func (s *Session) fillStacks(ctx context.Context, rs []records.TraceRecord) error {
	vs := records.KStacks(rs)
	if len(vs) == 0 {
		return nil
	}
	_, err := s.FillStacks(ctx, vs)
	return err
}

// FillStacks reads the kernel's stacks (KStacks) and gives each of vs,
// kernel stack values, its frames, or marks it unkept.
func (s *Session) FillStacks(ctx context.Context, vs []*records.Value) (*kstack.Table, error) {
	tab, err := s.KStacks(ctx)
	if err != nil {
		return nil, err
	}
	for _, v := range vs {
		fs, ok := tab.Frames(v.KStack)
		v.Frames, v.Unkept = fs, !ok
	}
	return tab, nil
}
