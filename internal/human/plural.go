package human

import "fmt"

// Plural says "1 hook", "2 hooks".
func Plural(n int, what string) string {
	return fmt.Sprintf("%d %s", n, Noun(n, what))
}

// Noun is what in the number n takes: "domain" for 1, "domains" else.
func Noun(n int, what string) string {
	if n == 1 {
		return what
	}
	return what + "s"
}
