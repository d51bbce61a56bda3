package testenv

import "testing"

func TestRequired(t *testing.T) {
	tests := []struct {
		env, feature string
		want         bool
	}{
		{"", "lab", false},
		{"all", "lab", true},
		{"plugin, lab", "lab", true},
		{"plugin", "lab", false},
		{"laboratory", "lab", false},
	}
	for _, tt := range tests {
		t.Setenv("KLASY_TEST_REQUIRE", tt.env)
		if got := Required(tt.feature); got != tt.want {
			t.Errorf("KLASY_TEST_REQUIRE=%q: Required(%q) = %v, want %v", tt.env, tt.feature, got, tt.want)
		}
	}
}
