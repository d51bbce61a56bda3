package main

import "github.com/klasy/klasy/cmd/klasy/internal/cmdout"

// flush writes what s.Out buffers and returns the first write error, as
// run would report it. A command calls it where it must know its output
// was written before it goes on (a summary on standard error, a console
// that echoes at once); run flushes at the end anyway.
func (s *stdio) flush() error {
	if o, ok := s.Out.(*cmdout.Output); ok {
		o.Flush()
		return o.Err()
	}
	return nil
}
