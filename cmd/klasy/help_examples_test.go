package main

import (
	"strings"
	"testing"

	"github.com/klasy/klasy/aspect"
)

// The aspects shown in help texts must be ones klasy check accepts, or
// the help teaches mistakes.
func TestHelpExamplesAreValid(t *testing.T) {
	texts := map[string]string{"klasy --help": overview}
	for name, c := range commands {
		texts["klasy help "+name] = c.Help
	}
	found := 0
	for where, text := range texts {
		i := strings.Index(text, "<aspect>")
		j := strings.Index(text, "</aspect>")
		if i < 0 || j < i {
			continue
		}
		found++
		_, diags := aspect.Load(where, []byte(text[i:j+len("</aspect>")]))
		if len(diags) > 0 {
			t.Errorf("the example in %s is invalid:\n%v", where, diags)
		}
	}
	if found < 3 {
		t.Errorf("found %d help examples, want the overview, check and translate", found)
	}
}
