package cachedir

import (
	"path/filepath"
	"testing"
)

func TestRoot(t *testing.T) {
	tests := []struct {
		cache, xdg, home, want string
	}{
		{cache: "/c", xdg: "/x", home: "/h", want: "/c"},
		{xdg: "/x", home: "/h", want: "/x/klasy"},
		{home: "/h", want: filepath.Join("/h", ".cache", "klasy")},
	}
	for _, tt := range tests {
		t.Setenv("KLASY_CACHE", tt.cache)
		t.Setenv("XDG_CACHE_HOME", tt.xdg)
		t.Setenv("HOME", tt.home)
		if got := Root(); got != tt.want {
			t.Errorf("KLASY_CACHE=%q XDG_CACHE_HOME=%q HOME=%q: Root() = %q, want %q", tt.cache, tt.xdg, tt.home, got, tt.want)
		}
	}
}
