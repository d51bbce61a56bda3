package gen

import (
	"slices"
	"strings"

	"github.com/klasy/klasy/weaver/joinpoint"
)

// accessKinds is the member access kind of hook h's access join points
// (read, write, rw, addr), for the runtime's hook table and so for each
// record trace prints: "" when none is an access, kinds joined by "/"
// when its join points differ.
func accessKinds(h *joinpoint.Hook) string {
	var ks []string
	for _, jp := range h.Points {
		if jp.Access == nil {
			continue
		}
		for _, a := range append([]*joinpoint.AccessSite{jp.Access}, jp.Merged...) {
			if !slices.Contains(ks, a.Mode) {
				ks = append(ks, a.Mode)
			}
		}
	}
	return strings.Join(ks, "/")
}
