package human

import "fmt"

// Value prints a stored value as a person reads it: small negative
// numbers (errnos) signed, kernel addresses in hex, the rest in decimal.
func Value(v int64) string {
	switch {
	case v < 0 && v >= -4095:
		return fmt.Sprint(v)
	case uint64(v) >= 0xffff800000000000:
		return fmt.Sprintf("%#x", uint64(v))
	case v < 0:
		return fmt.Sprint(uint64(v))
	}
	return fmt.Sprint(v)
}
