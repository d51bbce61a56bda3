package human

import "fmt"

// Plural says "1 hook", "2 hooks".
func Plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
