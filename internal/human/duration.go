package human

import (
	"fmt"
	"time"
)

// Dur prints a step's time: ms below a second, else s to a tenth.
func Dur(d time.Duration) string {
	if d < time.Second {
		return fmt.Sprintf("%d ms", d.Milliseconds())
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}

// DurPrecise prints short durations to the microsecond.
func DurPrecise(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%d µs", d.Microseconds())
	case d < time.Second:
		return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1e3)
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}

// NS prints ns in the unit that suits it.
func NS(ns uint64) string {
	switch {
	case ns < 1000:
		return fmt.Sprintf("%d ns", ns)
	case ns < 1000000:
		return fmt.Sprintf("%.1f µs", float64(ns)/1e3)
	case ns < 1000000000:
		return fmt.Sprintf("%.3f ms", float64(ns)/1e6)
	}
	return fmt.Sprintf("%.3f s", float64(ns)/1e9)
}

// Micros prints nanoseconds as microseconds with two decimals, as
// Table 6.3 does.
func Micros(ns uint64) string {
	return fmt.Sprintf("%d.%02d", ns/1000, ns%1000/10)
}

// ElapsedMicros prints a span of nanoseconds as Micros does, with a
// sign when it is negative.
func ElapsedMicros(ns int64) string {
	if ns < 0 {
		return "-" + Micros(uint64(-ns))
	}
	return Micros(uint64(ns))
}
