package weaver

import (
	"context"
	"fmt"

	"github.com/klasy/klasy/weaver/records"
	"github.com/klasy/klasy/weaver/runtime"
)

// Stats reads the aggregation maps of the aspects woven into the target,
// merged over its CPUs when read; nil, nil when the runtime is not
// loaded.
func (s *Session) Stats(ctx context.Context) (*records.Stats, error) {
	b, err := s.T.ReadFile(ctx, runtime.StatsPath)
	if err != nil {
		if isNotExist(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading %s in %s: %w", runtime.StatsPath, s.T.Name(), err)
	}
	st, err := records.ParseStats(b)
	if err != nil {
		return nil, fmt.Errorf("%s in %s: %w", runtime.StatsPath, s.T.Name(), err)
	}
	return st, nil
}
