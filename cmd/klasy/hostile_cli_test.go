package main

import (
	"testing"
)

// Hostile inputs to the command line itself.
func init() {
	hostileCases = append(hostileCases,
		hostileCase{
			name: "unknown-command", class: "small", want: `unknown command "frobnicate"`,
			setup: func(t *testing.T, dir string) hostileRun {
				return hostileRun{args: []string{"frobnicate"}}
			},
		},
	)
}
