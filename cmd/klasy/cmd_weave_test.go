package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestWeaveBufferUsage(t *testing.T) {
	for _, kb := range []string{"0", "7", "65537", "-1"} {
		var out, errb bytes.Buffer
		err := run(&stdio{In: strings.NewReader(""), Out: &out, Err: &errb}, []string{"weave", "--lab", "none", "--buffer-kb", kb, "a.klasy"})
		if err == nil || !strings.Contains(err.Error(), "want 8..65536 KiB per CPU") {
			t.Errorf("weave --buffer-kb %s = %v, want an error giving the range", kb, err)
		}
	}
}
